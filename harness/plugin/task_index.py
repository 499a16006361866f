"""Which request types our tasks send (the YAML's class ``REQUEST_TYPE``, else its ``output_type``; a group: its
members') and which models serve them (:mod:`harness.engines.registry`), checked before any model loads: lm-eval
would fail with an ``AttributeError`` only after the model has loaded."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.core.errors import UsageError
from harness.engines.registry import LM_EVAL_TYPES, model_entry, models


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
