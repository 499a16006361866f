"""lm-eval's own run settings (its flags, ``simple_evaluate``'s parameters) checked like our options before any model
loads (lm-eval 0.4.13 passes most on unchecked): a value outside its domain is one line naming the flag, the value and
what is allowed. :data:`FLAGS` and :data:`GEN_KWARGS` declare each once; :func:`check_run_arguments` applies them to
``simple_evaluate``'s arguments, :func:`check_cli_run` to a parsed command line, :func:`check_json_args` before it."""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from harness.core.errors import UsageError
from harness.core.options import MAX_SEED


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _optional(test: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: value is None or test(value)


def _at_least(low: int) -> Callable[[Any], bool]:
    return lambda value: _integer(value) and value >= low


def _boolean(value: Any) -> bool:
    return isinstance(value, bool)


def _limit(value: Any) -> bool:
    # lm-eval reads a value below 1 as a share of the documents and any other as a count, cut to its integer part
    return _number(value) and (0 < value < 1 or (value >= 1 and float(value).is_integer()))


def _batch_size(value: Any) -> bool:
    if _integer(value):
        return value >= 1
    if not isinstance(value, str):
        return False
    text = value.strip()
    if text.isdigit():
        return int(text) >= 1
    head, colon, times = text.partition(":")
    if head != "auto":
        return False
    try:  # lm-eval's HF model re-detects the batch size N times over the run (`auto:N`, a float)
        return not colon or (math.isfinite(float(times)) and float(times) > 0)
    except ValueError:
        return False


def _device(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    import torch

    try:
        torch.device(value)
    except (RuntimeError, ValueError):
        return False
    return True


def _cache_problem(value: Any) -> str:
    """Why lm-eval could not write ``--use_cache``'s database, ``<path>_rank<N>.db`` (its own naming), or ``""``."""
    from harness.core.files import writable_problem

    if not isinstance(value, str) or not value.strip():
        return "not a path"
    return writable_problem(f"{value}_rank0.db", folder=False) or ""


def _indices(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(_integer(i) and i >= 0 for i in value)


_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _verbosity(value: Any) -> bool:
    # what logging's setLevel takes (lm-eval's --verbosity upper-cases the word; a Python caller's is taken as given)
    return _integer(value) or (isinstance(value, str) and value in logging.getLevelNamesMapping())


def _gen_kwargs(value: Any) -> bool:
    if isinstance(value, Mapping):
        return all(isinstance(key, str) and key.strip() for key in value)
    # the text simple_evaluate parses (lm_eval.utils.simple_parse_args_string): key=value pairs, a comma between
    parts = [part.partition("=") for part in value.split(",") if part.strip()] if isinstance(value, str) else None
    return parts is not None and all(eq and key.strip() for key, eq, _ in parts)


@dataclass(frozen=True)
class Flag:
    """One run setting: ``simple_evaluate``'s ``parameter``, the lm-eval ``flag`` that sets it (``""``: Python callers
    only), its domain in words (``allowed``), the test of a value (``accepts``); ``why``: more about a refused value;
    ``part``: which part of the flag's value it is (the four seeds of ``--seed``)."""

    parameter: str
    flag: str
    allowed: str
    accepts: Callable[[Any], bool]
    why: Callable[[Any], str] | None = None
    part: str = ""

    def refusal(self, value: Any, cli: bool) -> UsageError:
        """The one-line error for ``value``, naming the flag (``cli``) or the parameter (a Python caller)."""
        why = self.why(value) if self.why else ""
        if cli and self.flag:
            return _refusal(self.flag, value, self.allowed, True, why, self.part)
        return _refusal(self.parameter, value, self.allowed, False, why)


def _shown(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # lm-eval's --limit is a float: `--limit -3` arrives as -3.0
    return repr(value) if isinstance(value, str) else str(value)


def _refusal(name: str, value: Any, allowed: str, cli: bool, why: str = "", part: str = "") -> UsageError:
    given = f"{name} {_shown(value)}" if cli else f"{name}={_shown(value)}"
    if part:
        given += f" ({part})"
    return UsageError(f"{given}: not allowed{f' ({why})' if why else ''}; give {allowed}")


_SEED = f"an integer from 0 to {MAX_SEED}, or None (not seeded)"
_BOOLEAN = "True or False"


def _seed(parameter: str, part: str) -> Flag:
    return Flag(parameter, "--seed", _SEED, _optional(lambda v: _integer(v) and 0 <= v <= MAX_SEED), part=part)


def _switch(parameter: str, flag: str) -> Flag:
    return Flag(parameter, flag, _BOOLEAN, _boolean)


FLAGS: tuple[Flag, ...] = (
    Flag("limit", "--limit", "a whole number of documents per task (1 or more) or a share of each task's documents "
         "in (0, 1)", _optional(_limit)),
    Flag("num_fewshot", "--num_fewshot", "an integer >= 0 (examples in the few-shot context)",
         _optional(_at_least(0))),
    Flag("batch_size", "--batch_size", "an integer >= 1, auto, or auto:N (N > 0: times the batch size is "
         "re-detected)", _optional(_batch_size)),
    Flag("max_batch_size", "--max_batch_size", "an integer >= 1 (the largest batch --batch_size auto tries)",
         _optional(_at_least(1))),
    Flag("device", "--device", "a torch device: cpu, cuda, cuda:N, mps ...", _optional(_device)),
    Flag("use_cache", "--use_cache", "a path in a folder you can write (lm-eval adds _rank<N>.db to it)",
         _optional(lambda v: _cache_problem(v) == ""), _cache_problem),
    Flag("samples", "--samples", "a JSON object of task -> document indices, '{\"<task>\": [0, 3, 6]}'",
         _optional(lambda v: isinstance(v, Mapping) and all(isinstance(task, str) for task in v))),
    Flag("bootstrap_iters", "", "an integer >= 0 (0: no standard errors)", _optional(_at_least(0))),
    Flag("gen_kwargs", "--gen_kwargs", "key=value pairs, a comma between them, or a JSON object",
         _optional(_gen_kwargs)),
    Flag("system_instruction", "--system_instruction", "a text", _optional(lambda v: isinstance(v, str))),
    Flag("apply_chat_template", "--apply_chat_template", "True, False or the name of one of the tokenizer's chat "
         "templates", lambda v: _boolean(v) or isinstance(v, str)),
    Flag("fewshot_as_multiturn", "--fewshot_as_multiturn", "True, False or None", _optional(_boolean)),
    Flag("verbosity", "--verbosity", f"{', '.join(_LEVELS[:-1])} or {_LEVELS[-1]}", _optional(_verbosity)),
    _seed("random_seed", "its 1st value, Python's random seed"),
    _seed("numpy_random_seed", "its 2nd value, numpy's seed"),
    _seed("torch_random_seed", "its 3rd value, torch's seed"),
    _seed("fewshot_random_seed", "its 4th value, the few-shot sampler's seed"),
    _switch("cache_requests", "--cache_requests"),
    _switch("rewrite_requests_cache", "--cache_requests"),
    _switch("delete_requests_cache", "--cache_requests"),
    _switch("check_integrity", "--check_integrity"),
    _switch("write_out", "--write_out"),
    _switch("log_samples", "--log_samples"),
    _switch("predict_only", "--predict_only"),
    _switch("confirm_run_unsafe_code", "--confirm_run_unsafe_code"),
)


def _until(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value))


# --gen_kwargs keys whose meaning lm-eval's models and ours share: key -> (domain in words, test); others pass as given
GEN_KWARGS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "max_gen_toks": ("an integer >= 1 (tokens generated at most)", _at_least(1)),
    "temperature": ("a number >= 0", lambda v: _number(v) and v >= 0),
    "top_p": ("a number in (0, 1]", lambda v: _number(v) and 0 < v <= 1),
    "top_k": ("an integer >= 0", _at_least(0)),
    "do_sample": (_BOOLEAN, _boolean),
    "until": ("a text or a list of texts (stop sequences)", _until),
}


def _gen_kwargs_items(value: Any) -> Iterable[tuple[str, Any]]:
    """``--gen_kwargs``'s pairs with their values as lm-eval converts them."""
    if isinstance(value, Mapping):
        return value.items()
    from lm_eval.utils import simple_parse_args_string

    return simple_parse_args_string(value).items()


def check_run_arguments(arguments: Mapping[str, Any], cli: bool, tasks: list[str] | None = None) -> None:
    """Raise a one-line :class:`UsageError` for the first of ``arguments`` (``simple_evaluate``'s parameter -> value)
    outside its domain, naming the flag (``cli``) or the parameter. ``tasks``: the run's task names (groups
    expanded) when known; ``--samples`` must name only those."""
    for flag in FLAGS:
        value = arguments.get(flag.parameter)
        if flag.parameter in arguments and not flag.accepts(value):
            raise flag.refusal(value, cli)
    gen_kwargs = arguments.get("gen_kwargs")
    if gen_kwargs:
        name = "--gen_kwargs" if cli else "gen_kwargs"
        for key, value in _gen_kwargs_items(gen_kwargs):
            allowed, accepts = GEN_KWARGS.get(key, ("", None))
            if accepts is not None and not accepts(value):
                raise _refusal(f"{name} {key}", value, allowed, cli=False)
    samples = arguments.get("samples")
    if samples:
        name = "--samples" if cli else "samples"
        for task, indices in samples.items():
            if not _indices(indices):  # lm-eval runs every document of a task given [] and none given a negative
                raise _refusal(f"{name} {task}", indices, "a non-empty list of document indices, integers >= 0",
                               cli=False)
        unknown = [task for task in samples if tasks is not None and task not in tasks]
        if unknown:
            raise UsageError(f"{name} names {', '.join(unknown)}, which this run does not evaluate (lm-eval would "
                             f"ignore it and run every document); give indices of its tasks: {', '.join(tasks or [])}")


def check_json_args(argv: list[str]) -> None:
    """Refuse in one line naming the flag, before lm-eval's parser sees them: ``--metadata`` / ``--model_args`` JSON
    (holding ``{``) that does not parse, a ``key=value,...`` value giving a key twice, an unusable ``--samples``."""
    for i, arg in enumerate(argv):
        flag, _, value = arg.partition("=")
        if flag not in ("--metadata", "--model_args", "-a", "--samples", "-E"):
            continue
        if not _:
            value = argv[i + 1] if i + 1 < len(argv) else ""
        if flag in ("--samples", "-E"):
            check_samples_arg(flag, value)
            continue
        if "{" not in value:
            keys = [part.partition("=")[0].strip() for part in value.split(",") if "=" in part]
            twice = sorted({k for k in keys if keys.count(k) > 1})
            if twice:
                raise UsageError(f"{flag} gives {', '.join(twice)} more than once: give each key once")
            continue
        try:
            json.loads(value)
        except json.JSONDecodeError as err:
            raise UsageError(f"{flag} is not valid JSON ({err.msg} at column {err.colno}): write a JSON object with "
                             "double quotes, e.g. '{\"num_docs\": 2}'") from None


def check_samples_arg(flag: str, value: str) -> dict:
    """lm-eval's ``--samples``: a JSON object ``{"task": [doc indices]}``, or a file holding one; returns the object and
    refuses anything else (lm-eval 0.4.13 would fail on it mid-run)."""
    try:
        samples = json.loads(value)
    except json.JSONDecodeError as err:
        path = Path(value).expanduser()
        if value.lstrip().startswith(("{", "[")) or not path.is_file():
            raise UsageError(f"{flag} {value!r} is neither a JSON object ({err.msg}) nor a file: give "
                             "'{\"<task>\": [<doc indices>]}' or the path of a file holding it") from None
        try:
            samples = json.loads(path.read_text(encoding="utf-8", errors="replace"))
        except json.JSONDecodeError as err:
            raise UsageError(f"{flag} file {path} is not valid JSON ({err.msg} at line {err.lineno}): give a file "
                             "holding '{\"<task>\": [<doc indices>]}'") from None
    if not isinstance(samples, dict):
        raise UsageError(f"{flag} must be a JSON object of task -> doc indices, got a {type(samples).__name__}")
    return samples


# lm-eval's `run` command hands simple_evaluate these settings under other names or shapes (lm_eval/_cli/run.py:
# Run._execute); every other setting of lm_eval_flags.FLAGS goes by its own name
_SEEDS = ("random_seed", "numpy_random_seed", "torch_random_seed", "fewshot_random_seed")
_REQUEST_CACHING = ("cache_requests", "rewrite_requests_cache", "delete_requests_cache")


def cli_arguments(args: Any) -> dict[str, Any]:
    """The arguments lm-eval's ``run`` command will hand ``simple_evaluate`` for the settings of
    :data:`~harness.plugin.lm_eval_flags.FLAGS`, from a parsed command line: ``--seed`` split, ``--cache_requests``'
    three switches, ``--samples`` read from its file; a shape lm-eval's configuration refuses itself is left out."""
    settings = cli_settings(args)
    arguments = {flag.parameter: settings[flag.parameter] for flag in FLAGS
                 if flag.parameter in settings and flag.parameter not in _REQUEST_CACHING}
    seeds = settings.get("seed")
    seeds = list(seeds) if isinstance(seeds, (list, tuple)) else [seeds] if seeds is not None else []
    if len(seeds) in (1, len(_SEEDS)):
        arguments.update(zip(_SEEDS, seeds * (len(_SEEDS) // len(seeds))))
    caching = settings.get("cache_requests")
    if isinstance(caching, dict):  # the flag, as its argparse type converts it
        arguments.update((key, caching.get(key, False)) for key in _REQUEST_CACHING)
    elif caching is not None:  # a --config YAML's: lm-eval 0.4.13 reads it as a dict and fails mid-run on a word
        raise UsageError(f"--config {settings.get('config')}: cache_requests {caching!r} is not read from a config "
                         "file by lm-eval 0.4.13; give --cache_requests true, refresh or delete on the command line")
    if isinstance(arguments.get("samples"), str):
        arguments["samples"] = check_samples_arg("--samples", arguments["samples"])
    return arguments


def split_tasks(value: Any) -> list[str]:
    """Task names as lm-eval's ``--tasks`` gives them (comma-separated text, or a list), blanks left out."""
    if isinstance(value, str):
        value = value.split(",")
    return [t.strip() for t in value or [] if isinstance(t, str) and t.strip()]


def cli_settings(args: Any) -> dict[str, Any]:
    """The settings of a parsed lm-eval command line as lm-eval merges them (``EvaluatorConfig.from_cli``): a
    ``--config`` YAML first, the flags given over it (a flag counts when its value is truthy or 0)."""
    settings: dict[str, Any] = {}
    config = getattr(args, "config", None)
    if config:
        try:
            from lm_eval.config.evaluate_config import EvaluatorConfig

            settings.update(EvaluatorConfig.load_yaml_config(config))
        except Exception:  # noqa: BLE001 (lm-eval reports its own config file's problems)
            pass
    for key, value in vars(args).items():
        if (value or value == 0) and key not in ("command", "func"):
            settings[key] = value
    return settings


def cli_run_settings(args: Any) -> tuple[Any, list[str], Any]:
    """``(model, tasks, include_path)`` of a parsed lm-eval command line (:func:`cli_settings`)."""
    settings = cli_settings(args)
    return settings.get("model"), split_tasks(settings.get("tasks")), settings.get("include_path")
