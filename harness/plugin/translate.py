"""Errors of lm-eval, transformers or the standard library that come from user input, turned into one-line
:class:`~harness.core.errors.LchError`\\ s; anything not recognised is a bug (traceback, exit 70)."""

from __future__ import annotations

import errno
import json
import re

from harness.core.errors import DataFormatError, LchError, MissingDataError, UsageError

_MODEL_NOT_FOUND = (
    "is not a local folder and is not a valid model identifier",
    "Repo id must be in the form",
    "Repo id must use alphanumeric chars",
    "does not appear to have a file named config.json",
    "Incorrect path_or_model_id",
    "We couldn't connect to",
)


_UNKNOWN_SPEC = r"Spec '(.+)' is not a registered task/group/tag name or valid YAML path"  # lm-eval's 0.5 line
_HUB_ERRORS = (
    "RepositoryNotFoundError",
    "GatedRepoError",
    "RevisionNotFoundError",
    "EntryNotFoundError",
    "LocalEntryNotFoundError",
    "HFValidationError",
    "OfflineModeIsEnabled",
)
_MODEL_FLAGS = ("--model", "--base", "--tuned", "--evaluator", "--init", "--tokenizer")
_MODEL_KEYS = ("pretrained", "peft", "tokenizer", "checkpoint")


def given_models(argv: list[str]) -> list[str]:
    """The model names / folders the user typed (model flags, ``pretrained=`` ...): a message names only these."""
    names = []
    for i, arg in enumerate(argv[:-1]):
        value = argv[i + 1]
        eval_model_class = arg == "--model" and argv[:1] == ["eval"]  # lm-eval's --model is a class (hf-pic)
        if arg in _MODEL_FLAGS and not eval_model_class and not value.startswith("-"):
            names.append(value)
        if arg in ("--model_args", "-a"):
            names += [v for k, _, v in (p.partition("=") for p in value.split(",")) if k.strip() in _MODEL_KEYS and v]
    return list(dict.fromkeys(names))


def _chain(err: BaseException) -> list[BaseException]:
    """``err`` and the exceptions it was raised from (transformers wraps the hub's errors in an OSError)."""
    seen: list[BaseException] = []
    while err is not None and err not in seen:
        seen.append(err)
        err = err.__cause__ or err.__context__  # type: ignore[assignment]
    return seen


def _model_not_found(models: list[str]) -> MissingDataError:
    name = " / ".join(models) if models else "the model given"  # only what the user typed, never the message's text
    return MissingDataError(
        f"model {name} not found: give pretrained= a local model folder or a hub name (offline: "
        "`lch models fetch NAME`, then pretrained=$(lch models path NAME))"
    )


def _raised_in_lm_eval(err: BaseException, *packages: str) -> bool:
    """Whether ``err`` was raised in one of lm-eval's ``packages`` (``_cli``, ``config``: what they refuse is a user's
    flag; ``tasks``: a task name)."""
    import os

    tb, innermost = err.__traceback__, None
    while tb is not None:
        innermost, tb = tb.tb_frame.f_code.co_filename, tb.tb_next
    parts = os.path.normpath(innermost or "").split(os.sep)
    return any(parts[i : i + 2] in [["lm_eval", package] for package in packages] for i in range(len(parts) - 1))


def translate(err: BaseException, models: list[str] | None = None, include_path: object = None) -> LchError | None:
    """The user error behind ``err`` (by type and attributes; by wording only for a plain ``OSError`` and lm-eval's
    refusals of a task name), or None. ``models``: :func:`given_models`; ``include_path``: the run's
    ``--include_path`` (for the closest task name)."""
    models = models or []
    message = " ".join(str(err).split())
    if any(
        type(e).__name__ in _HUB_ERRORS and type(e).__module__.startswith("huggingface_hub") for e in _chain(err)
    ) or (isinstance(err, (OSError, ValueError)) and any(s in message for s in _MODEL_NOT_FOUND)):
        return _model_not_found(models)
    if isinstance(err, json.JSONDecodeError):
        return DataFormatError(
            f"malformed JSON ({err.msg} at line {err.lineno} column {err.colno}): check the "
            "--metadata / --model_args JSON or the data file"
        )
    if isinstance(err, OSError) and err.errno == errno.ENAMETOOLONG:
        return UsageError(f"{err.filename or 'a path'}: file name too long for this file system")
    if isinstance(err, FileNotFoundError) and err.filename:
        return MissingDataError(f"{err.filename} does not exist: check the path")
    if isinstance(err, ValueError) and message.startswith("Tasks not found"):
        from harness.plugin.discovery import closest_tasks

        missing = [t.strip() for t in message.split(":", 1)[1].split(",") if t.strip()]
        return UsageError(
            f"{message.rstrip('.')}{closest_tasks(missing, include_path)} (`lch eval --tasks list` lists every task)"
        )
    unknown_spec = (
        re.fullmatch(_UNKNOWN_SPEC, str(err.args[0]))
        if isinstance(err, KeyError) and err.args and _raised_in_lm_eval(err, "tasks")
        else None
    )
    if unknown_spec:  # lm-eval's 0.5 line matches no name up front: its task manager refuses the name when loading it
        from harness.plugin.discovery import closest_tasks

        missing = [unknown_spec.group(1)]
        return UsageError(
            f"Tasks not found: {missing[0]}{closest_tasks(missing, include_path)} (`lch eval --tasks "
            "list` lists every task)"
        )
    if isinstance(err, (ValueError, TypeError)) and _raised_in_lm_eval(err, "_cli", "config"):
        return UsageError(
            f"lm-eval refused the arguments: {message.rstrip('.')}; check the flags (`lm_eval run --help`)"
        )
    samples_beyond = re.match(r"Elements of --samples should be in the interval .* k=(\d+)", message)
    if isinstance(err, AssertionError) and samples_beyond:
        # known only once lm-eval has built the task's documents (after the model loaded), so refused only then
        count = int(samples_beyond.group(1))
        return UsageError(
            f"--samples gives a document index beyond a task's {count} documents; give indices from 0 to {count - 1}"
        )
    if isinstance(err, ValueError) and "no model for this name found" in message:
        from harness.engines.registry import model_names

        return UsageError(f"{message} (our models: {', '.join(model_names())})")
    if (engine_args := _engine_config_error(err)) is not None:
        return engine_args
    unexpected = re.search(r"got an unexpected keyword argument '(\w+)'", message)
    if isinstance(err, TypeError) and unexpected and "__init__" in message:
        return UsageError(
            f"unknown model arg {unexpected.group(1)!r}: check --model_args against the model's documented arguments"
        )
    return None


def _engine_config_error(err: BaseException) -> UsageError | None:
    """A bad ``--model_args`` value: pydantic's ``ValidationError`` of a vLLM ``...Config`` (its engine args)."""
    if type(err).__name__ != "ValidationError" or not type(err).__module__.startswith("pydantic"):
        return None
    title = str(getattr(err, "title", ""))
    if not title.endswith("Config"):
        return None
    first = err.errors()[0] if err.errors() else {}  # type: ignore[attr-defined]
    loc = first.get("loc") or ()
    where = str(loc[0]) if loc and not str(loc[0]).startswith("function") else ""  # the field, not its validators
    message = str(first.get("msg", err)).removeprefix("Value error, ").rstrip(".")
    return UsageError(
        f"vLLM refused the engine args ({title}{': ' + where if where else ''}): {message}; check --model_args"
    )


def close_progress_bars() -> None:
    """Close the tqdm bars a stopped command left open, so that the error line stays the last line of stderr."""
    from tqdm import tqdm

    for bar in list(getattr(tqdm, "_instances", ())):
        bar.close()
