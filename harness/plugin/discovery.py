"""Backport, onto lm-eval releases without it, of lm-eval's entry-point discovery of plugin models (PR #4013) and task
folders (PR #4015), for every package's entry points; it does nothing on an lm-eval with its own. Patched, not
extended: lm-eval 0.4.13 offers no extension point. docs/lm-eval-plugin.md describes the mechanism."""

from __future__ import annotations

import functools
import importlib
import importlib.metadata as metadata
import importlib.util
import logging
from contextlib import AbstractContextManager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from harness.core.context import setting

log = logging.getLogger(__name__)

MODELS_GROUP, TASKS_GROUP = "lm_eval.models", "lm_eval.tasks"
_MARK = "_lch_plugin_discovery"  # set on what the backport has patched, so that it patches once


def tasks_path() -> str:
    """Folder of our lm-eval task YAMLs (what ``lm_eval.tasks`` discovery finds; an ``--include_path`` too)."""
    from harness.tasks import TASKS_PATH

    return str(TASKS_PATH)


def _entry_points(group: str) -> list[metadata.EntryPoint]:
    try:
        return list(metadata.entry_points(group=group))
    except Exception as err:  # noqa: BLE001 (a broken distribution's metadata: as #4013 / #4015, a warning)
        log.warning("Failed to read entry points for group %r: %s", group, err)
        return []


def after_models_import(models_module: Any = None) -> list[str]:
    """Register every ``lm_eval.models`` entry point in lm-eval's model registry as PR #4013 does: under its name, a
    name already registered kept, its ``module:attr`` text as the placeholder (imported when the model is asked for).
    Returns the names registered; nothing on an lm-eval with its own discovery."""
    from lm_eval.api import registry

    if hasattr(registry, "load_plugins") or getattr(registry.model_registry, _MARK, False):
        return []
    setattr(registry.model_registry, _MARK, True)
    added = []
    for ep in _entry_points(MODELS_GROUP):
        if ep.name in registry.model_registry:
            log.debug("Plugin alias %r (group %r) ignored; already registered.", ep.name, MODELS_GROUP)
            continue
        try:
            registry.model_registry.register(ep.name, target=ep.value)
            added.append(ep.name)
        except Exception as err:  # noqa: BLE001
            log.warning("Failed to register plugin %r from %r: %s", ep.name, MODELS_GROUP, err)
    return added


def resolve_task_dir(value: str) -> Path | None:
    """The folder an ``lm_eval.tasks`` entry point value names (PR #4015): the part before ``:`` is a module;
    a package gives its folder, a module the folder of its file; None when neither."""
    name = value.split(":", 1)[0].strip()
    if not name:
        return None
    spec = importlib.util.find_spec(name) or importlib.import_module(name).__spec__
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0]).resolve()
    if spec.origin and spec.origin != "built-in":
        return Path(spec.origin).resolve().parent
    return None


@functools.lru_cache(maxsize=1)
def plugin_task_folders() -> tuple[Path, ...]:
    """The folders of the ``lm_eval.tasks`` entry points, in order, each once (one that does not resolve: a warning),
    scanned once per process (as #4015 caches its discovery)."""
    found: list[Path] = []
    for ep in _entry_points(TASKS_GROUP):
        try:
            folder = resolve_task_dir(ep.value)
        except Exception as err:  # noqa: BLE001
            log.warning("Failed to resolve task plugin %r (%s): %s", ep.name, ep.value, err)
            continue
        if folder is None:
            log.warning("Task plugin %r (%s) did not resolve to a directory; skipping.", ep.name, ep.value)
            continue
        if folder not in found:
            log.info("Discovered task plugin %r -> %s", ep.name, folder)
            found.append(folder)
    return tuple(found)


_last_index: list[dict] = []  # the index the last TaskManager with lm-eval's own tasks built in this process
_PLUGINS_ONLY: ContextVar[bool] = ContextVar("lch_plugin_tasks_only", default=False)


def plugin_tasks_only() -> AbstractContextManager[bool]:
    """While on, a ``TaskManager`` that would index lm-eval's own tasks indexes the plugin folders and its
    ``include_path`` only (for a run of plugin tasks only: each name resolves to the YAML the whole index gives it)."""
    return setting(_PLUGINS_ONLY, True)


def last_task_index() -> dict | None:
    """``{name: Entry}`` of the last ``TaskManager`` this process built over lm-eval's own tasks, or None."""
    return _last_index[0] if _last_index else None


def after_task_manager_import(manager_module: Any = None) -> bool:
    """Make a ``TaskManager`` that indexes lm-eval's own tasks also index the ``lm_eval.tasks`` entry points' folders,
    right after lm-eval's and before ``include_path`` (PR #4015), by subclassing the manager module's ``TaskIndex``;
    ``include_defaults=False`` indexes exactly the paths given. Returns whether it patched."""
    if manager_module is None:
        manager_module = importlib.import_module("lm_eval.tasks.manager")
    base: Any = getattr(manager_module, "TaskIndex", None)
    if (
        base is None
        or hasattr(manager_module, "discover_plugin_task_paths")
        or getattr(base, _MARK, False)
        or not callable(getattr(base, "build", None))
    ):
        return False
    defaults = Path(manager_module.__file__).resolve().parent

    class TaskIndex(base):
        @staticmethod
        def build(paths: Any, *args: Any, **kwargs: Any) -> Any:
            paths = list(paths)
            at = next((i + 1 for i, p in enumerate(paths) if Path(p).resolve() == defaults), None)
            if at is None:
                return base.build(paths, *args, **kwargs)
            if _PLUGINS_ONLY.get():
                del paths[at - 1]
                paths[0:0] = [p for p in plugin_task_folders() if p not in paths]
                return base.build(paths, *args, **kwargs)  # not the last whole index: no "did you mean" reads it
            paths[at:at] = [p for p in plugin_task_folders() if p not in paths]
            index = base.build(paths, *args, **kwargs)
            _last_index[:] = [index]
            return index

    setattr(TaskIndex, _MARK, True)
    manager_module.TaskIndex = TaskIndex
    return True


# lm-eval's private modules, read here only, each behind a check of what the installed release has.


def index_folders(folders: list[Path] | list[str]) -> dict:
    """``{name: entry}`` of lm-eval's task indexer over ``folders`` only: ``TaskIndex.build`` (private in 0.4.13 and
    the next release), else a ``TaskManager`` told to index nothing else."""
    try:
        from lm_eval.tasks._index import TaskIndex
    except ImportError:
        TaskIndex = None
    if TaskIndex is not None and callable(getattr(TaskIndex, "build", None)):
        return dict(TaskIndex.build([Path(f) for f in folders]))
    from lm_eval.tasks import TaskManager

    return dict(manager_index(TaskManager(include_path=[str(f) for f in folders], include_defaults=False)) or {})


def manager_index(task_manager: Any) -> dict | None:
    """``{name: entry}`` a ``TaskManager`` has indexed: its ``task_index`` (0.4.13, the next release), else the 0.5
    line's private ``_task_index``; None for anything else."""
    for attribute in ("task_index", "_task_index"):
        index = getattr(task_manager, attribute, None)
        if isinstance(index, dict):
            return index
    return None


def sample_size(task: Any, limit: float | None) -> int | None:
    """How many of ``task``'s documents lm-eval's evaluator takes under ``--limit`` (a count, or a fraction):
    ``get_sample_size`` (0.4.13, the next release), else the 0.5 line's private ``_get_sample_size``."""
    import lm_eval.evaluator_utils as utils

    found = getattr(utils, "get_sample_size", None) or utils._get_sample_size
    return found(task, limit)


def group_config(entry: Any) -> dict | None:
    """The YAML of an index entry (:func:`index_folders`) that is a group (its ``kind`` named ``GROUP``), else None."""
    return (entry.cfg or {}) if getattr(getattr(entry, "kind", None), "name", None) == "GROUP" else None


def harness_cli() -> Any:
    """lm-eval's command line (``HarnessCLI``), or a one-line error on a release without it."""
    try:
        from lm_eval._cli import HarnessCLI
    except ImportError as err:
        from harness.core.errors import UsageError

        raise UsageError(f"this lm-eval ({err}) has no `lm-eval run` command line; install lm-eval>=0.4.13") from err
    return HarnessCLI()
