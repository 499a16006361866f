"""The ``--metadata`` keys our tasks read (:data:`METADATA_KEYS`: their options dataclasses' fields, lm-eval's own keys
and the model keys) and the checks run on them before a model loads: a key none of the run's tasks reads is refused
with the closest known keys (when every task is ours; lm-eval ignores it), and every task's options are parsed."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.core.errors import LchError, MissingDataError, UsageError
from harness.core.options import option_help
from harness.data.prompt_tokens import ModelKeys
from harness.plugin.task_index import task_folder

# lm-eval's own metadata keys (not options of ours)
LM_EVAL_KEYS: dict[str, str] = {"version": "task version"}


def metadata_keys(option_classes: Iterable[type | None]) -> dict[str, str]:
    """``{key: help}`` of these options dataclasses' fields, lm-eval's own keys and the model keys (first help wins)."""
    table: dict[str, str] = {**LM_EVAL_KEYS, **option_help(ModelKeys)}
    for cls in option_classes:
        if cls is not None:
            for key, text in option_help(cls).items():
                table.setdefault(key, text)
    return table


def task_option_classes(tasks_dir: str | Path) -> list[type]:
    """The ``OPTIONS`` dataclass of every task class our task folder names, once each, in folder order."""
    classes = (getattr(entry.task_class, "OPTIONS", None) for entry in task_folder(str(tasks_dir)).tasks.values())
    return [cls for cls in dict.fromkeys(classes) if cls is not None]


def __getattr__(name: str) -> Any:
    # METADATA_KEYS is computed on first use: it walks the task folder, which imports the task classes.
    if name == "METADATA_KEYS":
        from harness.tasks import TASKS_PATH

        return metadata_keys(task_option_classes(str(TASKS_PATH)))
    raise AttributeError(name)


def our_task_names(tasks_dir: str | Path) -> set[str]:
    """Task and group names defined by the YAMLs of our task folder."""
    folder = task_folder(str(tasks_dir))
    return set(folder.tasks) | set(folder.groups)


def check_metadata(metadata: dict, tasks: Iterable[str], tasks_dir: str | Path) -> None:
    """Raise :class:`UsageError` for ``--metadata`` keys none of our ``tasks`` reads (module docstring)."""
    known = metadata_keys(task_option_classes(tasks_dir))
    for key in metadata:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
            hint = f"did you mean {' or '.join(close)}? " if close else ""
            raise UsageError(
                f"--metadata key {key!r} is not read by any of these tasks; {hint}the keys are the "
                "fields of the tasks' options dataclasses (harness/plugin/metadata.py: METADATA_KEYS)"
            )


def check_task_options(
    metadata: dict | None, model_args: dict | None, tasks: Iterable[str], tasks_dir: str | Path
) -> dict[str, Any]:
    """Parse the options of every task of ours that ``tasks`` names (groups: their members) from what lm-eval will
    hand it (YAML metadata, then model args, then ``--metadata``); a wrong-typed value raises a one-line
    :class:`UsageError`. Returns each task's ``(class, model keys, options)`` (options None: none of its own)."""
    folder = task_folder(str(tasks_dir))
    parsed: dict[str, tuple[Any, Any, Any]] = {}
    for name in tasks:
        for entry in folder.members(name):
            read = getattr(entry.task_class, "read_options", None)
            if read is not None:
                keys, options = read({**entry.metadata, **(model_args or {}), **(metadata or {})}, entry.name)
                parsed[entry.name] = (entry.task_class, keys, options)
    return parsed


def check_tasks(metadata: dict, model_args: dict, tasks: list[str], tasks_dir: str | Path, every_task: bool) -> None:
    """Our ``tasks`` before a model loads: ``--metadata`` keys none of them reads (:func:`check_metadata`, when they
    are ``every_task`` of the run: others may read keys of their own), every task's options parsed
    (:func:`check_task_options`), every input the options read (:mod:`harness.data.inputs`) checked at once (one
    :class:`~harness.core.errors.MissingDataError` naming all that are missing, offline when the hub cannot be
    reached), then each task's own ``check_before_loading``."""
    from harness.data.inputs import go_offline, missing_inputs

    if metadata and every_task:
        check_metadata(metadata, tasks, tasks_dir)
    parsed = check_task_options(metadata, model_args, tasks, tasks_dir)

    needs = {
        task: options.inputs() for task, (_, _, options) in parsed.items() if callable(getattr(options, "inputs", None))
    }
    if not needs:
        return
    missing = missing_inputs(needs, go_offline())
    if missing:
        count = f"{len(missing)} inputs are" if len(missing) > 1 else "an input is"
        raise MissingDataError(
            f"{count} missing (nothing was loaded): "
            + " ".join(f"({i}) {m}." for i, m in enumerate(missing, start=1))
            + ' Task options go in --metadata \'{"key": "value"}\'.'
        )
    for task, (task_class, keys, options) in parsed.items():
        check = getattr(task_class, "check_before_loading", None)
        if callable(check) and options is not None:
            try:
                check(keys, options)
            except LchError as err:  # the same error, saying which task's data it is about
                err.args = (f"{task}: {err}",)
                raise
