"""The ``--metadata`` keys our tasks read, derived from their options dataclasses, and the checks ``lch
eval`` runs on them before lm-eval indexes tasks or loads a model.

lm-eval passes ``--metadata`` (merged with ``--model_args``) to every task and its dataset function, and a
key nobody reads is silently ignored: a typo (``num_sample``) would run the default. ``lch eval`` refuses
keys that none of our tasks reads, with the closest known keys, when every task of the run is ours (other
tasks may read keys of their own); and it parses each requested task's options (its class's ``OPTIONS``,
:mod:`harness.core.options`) so that a value of the wrong type fails in one line naming the task, the key and
the type.

The key table, :data:`METADATA_KEYS`, is not written by hand: it is the fields of the options dataclasses
of every task class our YAMLs name (:func:`metadata_keys`), plus lm-eval's own keys and the model args
lm-eval merges into the metadata (:class:`~harness.data.prompt_tokens.ModelKeys`). A new option is one
field in one dataclass.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Iterable

from harness.data.prompt_tokens import ModelKeys
from harness.core.errors import LchError, UsageError
from harness.core.options import option_help

# lm-eval's own metadata keys (not options of ours)
LM_EVAL_KEYS: dict[str, str] = {"version": "task version"}


def metadata_keys(option_classes: Iterable[type | None]) -> dict[str, str]:
    """``{key: help}``: the fields of these options dataclasses, lm-eval's own keys and the model keys
    (the first help string of a key shared by several dataclasses is kept)."""
    table: dict[str, str] = {**LM_EVAL_KEYS, **option_help(ModelKeys)}
    for cls in option_classes:
        if cls is not None:
            for key, text in option_help(cls).items():
                table.setdefault(key, text)
    return table


def task_option_classes(tasks_dir: str | Path) -> list[type]:
    """The ``OPTIONS`` dataclass of every task class our task folder names, once each, in folder order."""
    from harness.plugin.task_index import task_folder

    out: list[type] = []
    for entry in task_folder(str(tasks_dir)).tasks.values():
        cls = getattr(entry.task_class, "OPTIONS", None)
        if cls is not None and cls not in out:
            out.append(cls)
    return out


def __getattr__(name: str) -> Any:
    # METADATA_KEYS is computed on first use: it walks the task folder, which imports the task classes.
    if name == "METADATA_KEYS":
        from harness.tasks import TASKS_PATH

        return metadata_keys(task_option_classes(str(TASKS_PATH)))
    raise AttributeError(name)


def our_task_names(tasks_dir: str | Path) -> set[str]:
    """Task and group names defined by the YAMLs of our task folder."""
    from harness.plugin.task_index import task_folder

    folder = task_folder(str(tasks_dir))
    return set(folder.tasks) | set(folder.groups)


def check_metadata(metadata: dict | None, tasks: Iterable[str], tasks_dir: str | Path) -> None:
    """Raise :class:`UsageError` for ``--metadata`` keys none of our tasks reads (module docstring)."""
    if not metadata:
        return
    tasks = list(tasks)
    ours = our_task_names(tasks_dir)
    if not all(task in ours for task in tasks):
        return
    known = metadata_keys(task_option_classes(tasks_dir))
    for key in metadata:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
            hint = f"did you mean {' or '.join(close)}? " if close else ""
            raise UsageError(f"--metadata key {key!r} is not read by any of these tasks; {hint}the keys are the "
                             "fields of the tasks' options dataclasses (harness/plugin/metadata.py: METADATA_KEYS)")


def check_task_options(metadata: dict | None, model_args: dict | None, tasks: Iterable[str],
                       tasks_dir: str | Path) -> dict[str, Any]:
    """Parse the options of every task of ours that ``tasks`` names (groups: their members) from what
    lm-eval will hand it (YAML metadata, then model args, then ``--metadata``); raises the parser's one-line
    :class:`UsageError` for a value of the wrong type. Tasks that are not ours are left to lm-eval. Returns each
    task's ``(class, model keys, options)`` (options None for a task without options of its own)."""
    from harness.plugin.task_index import task_folder

    folder = task_folder(str(tasks_dir))
    parsed: dict[str, tuple[Any, Any, Any]] = {}
    for name in tasks:
        for entry in folder.members(name):
            read = getattr(entry.task_class, "read_options", None)
            if read is not None:
                keys, options = read({**entry.metadata, **(model_args or {}), **(metadata or {})}, entry.name)
                parsed[entry.name] = (entry.task_class, keys, options)
    return parsed


def check_task_inputs(parsed: dict[str, tuple[Any, Any, Any]]) -> None:
    """Every input that the tasks' options read (:mod:`harness.data.inputs`) checked at once: one
    :class:`~harness.core.errors.MissingDataError` naming all that are missing, before anything is loaded (when the hub
    cannot be reached the run is made offline first: no retries); then, all there, each task's own
    ``check_before_loading`` (enough long documents). ``parsed``: :func:`check_task_options`'s."""
    from harness.data.inputs import go_offline, missing_inputs
    from harness.core.errors import MissingDataError

    needs = {task: options.inputs() for task, (_, _, options) in parsed.items()
             if callable(getattr(options, "inputs", None))}
    if not needs:
        return
    offline = go_offline()
    missing = missing_inputs(needs, offline)
    if missing:
        count = f"{len(missing)} inputs are" if len(missing) > 1 else "an input is"
        raise MissingDataError(f"{count} missing (nothing was loaded): "
                               + " ".join(f"({i}) {m}." for i, m in enumerate(missing, start=1))
                               + " Task options go in --metadata '{\"key\": \"value\"}'.")
    for task, (task_class, keys, options) in parsed.items():
        check = getattr(task_class, "check_before_loading", None)
        if callable(check) and options is not None:
            try:
                check(keys, options)
            except LchError as err:  # the same error, saying which task's data it is about
                err.args = (f"{task}: {err}",)
                raise
