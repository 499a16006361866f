"""``lch eval``: lm-eval's own command line with our plugin discovery applied and our checks run first (lm-eval's
flags as :mod:`harness.plugin.lm_eval_flags` declares them, then the preflight)."""

from __future__ import annotations

import contextlib
import sys
from typing import Any

from harness.core.incomplete import raise_if_incomplete
from harness.plugin.activation import activate
from harness.plugin.preflight import as_dict, check_destinations, command_line_run, preflight, task_index_for


def _is_task_list_request(argv: list[str]) -> bool:
    for i, arg in enumerate(argv):
        if arg == "--tasks" and i + 1 < len(argv) and argv[i + 1] == "list":
            return True
        if arg == "--tasks=list":
            return True
    return False


def include_path_of(argv: list[str]) -> str | None:
    """The ``--include_path`` of an ``lch eval`` command line (lm-eval's flag), or None."""
    for i, arg in enumerate(argv):
        if arg == "--include_path" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--include_path="):
            return arg.split("=", 1)[1]
    return None


def _model_args(args) -> dict:
    return as_dict(getattr(args, "model_args", None))


def _parse_as_lch(cli):
    """lm-eval's ``cli.parse_args()``, argparse's errors raised as our one-line ``UsageError``."""
    import argparse
    import re

    from harness.core.errors import UsageError

    def error(parser: argparse.ArgumentParser, message: str):
        # argparse names a flag's type function: lm-eval's --seed type is a functools.partial, meaningless to a user
        message = re.sub(r"invalid (functools\.partial\(.*\)|<lambda>) value:", "invalid value:", message)
        raise UsageError(f"lch eval: {message}; see `lch eval --help`")

    original = argparse.ArgumentParser.error
    argparse.ArgumentParser.error = error  # type: ignore[method-assign]
    try:
        return cli.parse_args()
    finally:
        argparse.ArgumentParser.error = original  # type: ignore[method-assign]


def run_lm_eval(argv: list[str]) -> None:
    """Run lm-eval's own CLI on ``argv`` with our plugin discovery applied, lm-eval's flags (:func:`check_cli_run`) and
    the run's preflight checked before lm-eval indexes its tasks."""
    check_json_args(argv)
    activate()
    from lm_eval.utils import setup_logging

    if _is_task_list_request(argv):  # lm-eval 0.4.13 moved this to `lm-eval ls tasks`
        user = include_path_of(argv)
        argv = ["ls", "tasks"] + (["--include_path", user] if user else [])
    setup_logging()
    saved_argv = sys.argv
    sys.argv = ["lm-eval", *argv]
    try:
        with command_line_run():
            cli, args = parse_command_line(argv)
            index_scope: Any = contextlib.nullcontext()
            if getattr(args, "model", None) is not None or getattr(args, "tasks", None):
                check_destinations(getattr(args, "output_path", None))
                check_cli_run(args)
                tasks = args.tasks.split(",") if isinstance(args.tasks, str) else list(args.tasks or [])
                tasks = [t.strip() for t in tasks if t.strip()]
                preflight(getattr(args, "model", None), _model_args(args), tasks, getattr(args, "metadata", None),
                          include_path_of(argv))
                index_scope = task_index_for(tasks, include_path_of(argv))
            with index_scope:
                cli.execute(args)
    finally:
        sys.argv = saved_argv
    raise_if_incomplete()  # the results are written; a metric asked for is missing: the command fails


def parse_command_line(argv: list[str]) -> tuple[Any, Any]:
    """lm-eval's CLI and its parse of ``argv`` (errors one line; run settings moved out of ``--model_args``)."""
    from harness.plugin.discovery import harness_cli

    saved_argv = sys.argv
    sys.argv = ["lm-eval", *argv]
    try:
        cli = harness_cli()
        args = _parse_as_lch(cli)
    finally:
        sys.argv = saved_argv
    move_run_settings(args, argv)
    return cli, args


# lm-eval always passes these to the model's constructor from its own flags: the same key in --model_args would reach
# it twice (a TypeError)
RUN_SETTINGS = ("device", "batch_size", "max_batch_size")


def move_run_settings(args, argv: list[str]) -> None:
    """A ``device`` / ``batch_size`` / ``max_batch_size`` given in ``--model_args`` becomes the value of lm-eval's
    flag of that name; given both ways with different values, it is refused in one line."""
    from harness.core.errors import UsageError

    model_args = _model_args(args)
    moved = {key: model_args.pop(key) for key in RUN_SETTINGS if key in model_args}
    if not moved:
        return
    for key, value in moved.items():
        flagged = any(a == f"--{key}" or a.startswith(f"--{key}=") for a in argv)
        if flagged and str(getattr(args, key, None)) != str(value):
            raise UsageError(f"lch eval: {key} is given twice, {value} in --model_args and {getattr(args, key)} by "
                             f"--{key}: give it once")
        setattr(args, key, value)
    args.model_args = model_args


def check_json_args(argv: list[str]) -> None:
    """Refuse in one line naming the flag, before lm-eval's parser sees them: ``--metadata`` / ``--model_args`` JSON
    (holding ``{``) that does not parse, a ``key=value,...`` value giving a key twice, an unusable ``--samples``."""
    import json

    from harness.core.errors import UsageError

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
    import json
    from pathlib import Path

    from harness.core.errors import UsageError

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
    from harness.plugin.lm_eval_flags import FLAGS
    from harness.plugin.preflight import cli_settings

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
        from harness.core.errors import UsageError

        raise UsageError(f"--config {settings.get('config')}: cache_requests {caching!r} is not read from a config "
                         "file by lm-eval 0.4.13; give --cache_requests true, refresh or delete on the command line")
    if isinstance(arguments.get("samples"), str):
        arguments["samples"] = check_samples_arg("--samples", arguments["samples"])
    return arguments


def check_cli_run(args: Any) -> None:
    """lm-eval's settings of a parsed command line of a run of ours checked, naming the flags, before lm-eval indexes
    its tasks; a run that is not ours is left to lm-eval."""
    from harness.plugin.lm_eval_flags import check_run_arguments
    from harness.plugin.preflight import cli_run_settings, involves_us, run_task_names

    model, tasks, include_path = cli_run_settings(args)
    if not involves_us(model, tasks, include_path):
        return
    arguments = cli_arguments(args)
    check_run_arguments(arguments, cli=True,
                        tasks=run_task_names(tasks, include_path) if arguments.get("samples") else None)
