"""Our task folder read once, without lm-eval (:func:`task_folder`): each task's class, the request type it sends (the
YAML's class ``REQUEST_TYPE``, else its ``output_type``; a group: its members'), its YAML metadata and options; and
the checks of a run's tasks of ours against it before any model loads (:func:`check_tasks`): the model serves every
request type they send (:mod:`harness.engines.registry`; lm-eval would fail with an ``AttributeError`` only after
the model has loaded), a ``--metadata`` key none of them reads is refused with the closest known keys
(:func:`our_metadata_keys`: their options dataclasses' fields, lm-eval's own keys and the model keys; only when
every task is ours, as lm-eval ignores it), every task's options are parsed and every input they name is there."""

from __future__ import annotations

import difflib
import functools
import importlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.core.errors import LchError, MissingDataError, UsageError
from harness.core.options import option_help
from harness.data.prompt_tokens import ModelKeys
from harness.engines.registry import LM_EVAL_TYPES, model_entry, models

# lm-eval's own metadata keys (not options of ours)
LM_EVAL_KEYS: dict[str, str] = {"version": "task version"}


class _Loader(yaml.SafeLoader):
    pass


# `!function utils.X` is kept as its text, `utils.X`, which names the task class (types-PyYAML types the method as
# SafeConstructor's, which a loader is)
_Loader.add_constructor("!function", _Loader.construct_scalar)  # type: ignore[type-var]


def _read_config(path: Path) -> dict:
    """A task YAML with its ``include`` (a file of the same folder) merged under it."""
    config = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader) or {}
    base = config.get("include")
    if isinstance(base, str):
        config = {**_read_config(path.parent / base), **{k: v for k, v in config.items() if k != "include"}}
    return config


def _task_class(folder: Path, reference: str) -> type | None:
    """The class a YAML names (``!function utils.RulerTask``), from the folder's module."""
    module, _, name = reference.rpartition(".")
    return getattr(importlib.import_module(f"harness.tasks.{folder.name}.{module}"), name, None)


@dataclass(frozen=True)
class TaskEntry:
    """One task of our folder as its YAML declares it: its class (None: lm-eval's ``ConfigurableTask``),
    the request type it sends and its YAML ``metadata``."""

    name: str
    task_class: type | None
    request_type: str
    metadata: dict[str, Any]


@dataclass(frozen=True)
class TaskFolder:
    """Every task and group of a task folder, read once (:func:`task_folder`)."""

    tasks: dict[str, TaskEntry]
    groups: dict[str, list[str]]

    def members(self, name: str, seen: frozenset[str] = frozenset()) -> list[TaskEntry]:
        """The tasks a task or group name runs (a group's members, recursively); [] for names not ours."""
        if name in self.tasks:
            return [self.tasks[name]]
        if name in seen or name not in self.groups:
            return []
        return [entry for member in self.groups[name] for entry in self.members(member, seen | {name})]


@functools.lru_cache(maxsize=4)
def task_folder(tasks_dir: str) -> TaskFolder:
    """The one walk over a task folder's YAMLs: each task's class, request type (the class's ``REQUEST_TYPE``, else the
    YAML's ``output_type``) and YAML metadata, and the groups."""
    tasks: dict[str, TaskEntry] = {}
    groups: dict[str, list[str]] = {}
    for path in sorted(Path(tasks_dir).rglob("*.yaml")):
        config = _read_config(path)
        if isinstance(config.get("group"), str) and isinstance(config.get("task"), list):
            groups[config["group"]] = [t for t in config["task"] if isinstance(t, str)]
        elif isinstance(config.get("task"), str):
            reference = config.get("class")
            task_class = _task_class(path.parent, reference) if isinstance(reference, str) else None
            request = getattr(task_class, "REQUEST_TYPE", None)
            meta = config.get("metadata")
            tasks[config["task"]] = TaskEntry(
                config["task"],
                task_class,
                request or str(config.get("output_type", "generate_until")),
                dict(meta) if isinstance(meta, dict) else {},
            )
    return TaskFolder(tasks, groups)


def run_names(names: Iterable[str], tasks_dir: str) -> list[str]:
    """The tasks of a task folder that ``names`` (its tasks and groups) run, groups expanded, once each in order."""
    folder = task_folder(str(tasks_dir))
    return list(dict.fromkeys(entry.name for name in names for entry in folder.members(name)))


def task_request_types(tasks_dir: str) -> dict[str, frozenset[str]]:
    """``{task or group name: request types it sends}`` for every task and group of a task folder."""
    folder = task_folder(str(tasks_dir))
    names = [*folder.tasks, *folder.groups]
    return {name: frozenset(entry.request_type for entry in folder.members(name)) for name in names}


def served(model: str) -> frozenset[str] | None:
    """The request types ``model`` serves: ours from the registry; another registered model lm-eval's types plus ours
    its class has methods for; None for a model lm-eval does not know."""
    entry = model_entry(model)
    if entry is not None:
        return entry.serves
    try:
        from lm_eval.api.registry import get_model

        cls = get_model(model)
    except Exception:  # noqa: BLE001 (an unknown model; or an unimportable one, e.g. vllm without vLLM)
        from lm_eval.api.registry import model_registry

        return LM_EVAL_TYPES if model in model_registry else None
    from harness.engines.requests import REQUESTS

    return LM_EVAL_TYPES | {name for name in REQUESTS if callable(getattr(cls, name, None))}


def check_model_serves(
    model: str | None, tasks: Iterable[str], tasks_dir: str | Path, model_args: dict | None = None
) -> None:
    """Raise :class:`UsageError` when ``model`` cannot serve (or refuses under ``model_args``) a request type one of
    ``tasks`` sends, naming the models that do; tasks not ours are left to lm-eval."""
    if not model:
        return
    known = task_request_types(str(tasks_dir))
    needed = {r for task in tasks for r in known.get(task, ())}
    if needed <= LM_EVAL_TYPES:
        return
    entry = model_entry(model)
    serves = served(model)
    if serves is None:
        return
    for task in tasks:
        for request_type in sorted(known.get(task, ())):
            if request_type not in serves:
                others = " or ".join(f"--model {m.name}" for m in models() if request_type in m.serves)
                raise UsageError(
                    f"{task} sends {request_type} requests, which the {model} model does not serve: use {others}"
                )
            if entry is not None:
                entry.check_request(task, request_type, model_args or {})


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


def our_metadata_keys() -> dict[str, str]:
    """``{key: help}`` of every ``--metadata`` key a task of our folder reads (:func:`metadata_keys`); computed on each
    call (the folder's walk is cached, and it imports the task classes, so it is not done at import)."""
    from harness.tasks import TASKS_PATH

    return metadata_keys(task_option_classes(str(TASKS_PATH)))


def check_metadata(metadata: dict, tasks: Iterable[str], tasks_dir: str | Path) -> None:
    """Raise :class:`UsageError` for ``--metadata`` keys none of our ``tasks`` reads (module docstring)."""
    known = metadata_keys(task_option_classes(tasks_dir))
    for key in metadata:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
            hint = f"did you mean {' or '.join(close)}? " if close else ""
            raise UsageError(
                f"--metadata key {key!r} is not read by any of these tasks; {hint}the keys are the "
                "fields of the tasks' options dataclasses (harness/plugin/task_index.py: our_metadata_keys)"
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


def check_tasks(
    model: str | None, metadata: dict, model_args: dict, tasks: list[str], tasks_dir: str | Path, every_task: bool
) -> None:
    """Our ``tasks`` before a model loads: the request types they send against ``model``
    (:func:`check_model_serves`), ``--metadata`` keys none of them reads (:func:`check_metadata`, when they
    are ``every_task`` of the run: others may read keys of their own), every task's options parsed
    (:func:`check_task_options`), every input the options read (:mod:`harness.data.inputs`) checked at once (one
    :class:`~harness.core.errors.MissingDataError` naming all that are missing, offline when the hub cannot be
    reached), then each task's own ``check_before_loading``."""
    from harness.data.inputs import go_offline, missing_inputs

    check_model_serves(model, tasks, tasks_dir, model_args)
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
