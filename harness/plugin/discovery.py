"""Our place in lm-eval's task index: the backport, onto lm-eval releases without it, of lm-eval's entry-point
discovery of plugin models (PR #4013) and task folders (PR #4015), for every package's entry points (nothing on an
lm-eval with its own; patched, not extended: lm-eval 0.4.13 offers no extension point); which of a run's tasks that
index resolves to our folder, and the scope a run of ours builds it in; the one reader of lm-eval's private modules.
docs/lm-eval-plugin.md describes the mechanism."""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.metadata as metadata
import importlib.util
import logging
from collections.abc import Iterable
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


# which tasks of a run are ours, by lm-eval's own index


def _paths(include_path: Any) -> list[Path]:
    """The folders of an lm-eval ``include_path`` (a path, or a list of them; None: none)."""
    if not include_path:
        return []
    paths = [include_path] if isinstance(include_path, (str, Path)) else list(include_path)
    return [Path(p).expanduser() for p in paths if p]


@functools.lru_cache(maxsize=1)
def _our_index() -> dict:
    """``{name: entry}`` lm-eval's own indexer finds in our task folder (tasks, groups, tags)."""
    return index_folders([tasks_path()])


def our_tasks(tasks: list[Any], include_path: Any = None, task_manager: Any = None) -> list[str]:
    """The names among ``tasks`` that lm-eval resolves to our task folder: by the run's ``TaskManager`` index, else
    (before lm-eval indexes) names of our folder's index that no YAML under ``include_path`` redefines."""
    names = [t for t in tasks if isinstance(t, str)]
    index = manager_index(task_manager)
    if index is not None:
        ours = Path(tasks_path()).resolve()
        found = [(name, getattr(index.get(name), "yaml_path", None)) for name in names]
        return [name for name, path in found if path is not None and ours in Path(path).resolve().parents]
    candidates = [t for t in names if t in _our_index()]
    folders = _paths(include_path)
    if candidates and folders:
        theirs = index_folders(folders)
        candidates = [t for t in candidates if t not in theirs]
    return candidates


def closest_tasks(missing: list[str], include_path: Any = None) -> str:
    """``"; did you mean X?"`` for the first of ``missing`` with a close name in lm-eval's whole task index (the last
    one built, else a new one), else ``""``."""
    from harness.core.options import closest

    try:
        index = last_task_index()
        if index is None:
            from lm_eval.tasks import TaskManager

            index = manager_index(TaskManager(include_path=include_path or None)) or {}
        known = sorted(index)
    except Exception:  # noqa: BLE001 (a hint only)
        return ""
    hints = (closest(name, known) for name in missing)
    return next((hint for hint in hints if hint), "")


def run_task_names(tasks: list[Any], include_path: Any = None, task_manager: Any = None) -> list[str] | None:
    """The names of the tasks a run evaluates (our groups expanded into their members) when every task it names is
    ours (:func:`our_tasks`); None otherwise (another folder's groups are lm-eval's to expand)."""
    ours = our_tasks(tasks, include_path, task_manager)
    if not ours or len(ours) != len(tasks):
        return None
    from harness.plugin.task_index import run_names

    return run_names(ours, tasks_path())


def through_user_groups(tasks: list[Any], include_path: Any = None) -> list[str] | None:
    """:func:`run_task_names` where a name may also be a group of ``include_path`` whose every member is ours or such a
    group; None when any member is not ours (or is an inline task)."""
    folders = _paths(include_path)
    theirs = index_folders(folders) if folders else {}
    out: list[str] = []

    def expand(name: Any, seen: frozenset[str]) -> bool:
        group = group_config(theirs.get(name)) if isinstance(name, str) else None
        if group is not None and name not in seen:
            members = group.get("task")
            return isinstance(members, list) and all(expand(m, seen | {name}) for m in members)
        found = run_task_names([name], include_path)
        out.extend(found or [])
        return found is not None

    return list(dict.fromkeys(out)) if tasks and all(expand(t, frozenset()) for t in tasks) else None


def task_index_for(tasks: list[Any], include_path: Any = None, task_manager: Any = None) -> Any:
    """The context a run of ``tasks`` builds lm-eval's task index in: plugin folders only (:func:`plugin_tasks_only`)
    for a run of our tasks without its own manager, else the whole."""
    if task_manager is None and run_task_names(tasks, include_path) is not None:
        return plugin_tasks_only()
    return contextlib.nullcontext()


def group_weighting(groups: Iterable[str], task_manager: Any = None) -> dict[str, bool]:
    """``{group: whether its aggregates weight its tasks by size}`` for the ``groups`` of a run (the 0.5 line's
    ``outer::inner`` read as ``inner``) as their YAMLs declare it (the ``weight_by_size`` of their
    ``aggregate_metric_list``, lm-eval's default True where an entry names none; no entry: False, a plain mean), by
    the run's task index (else our folder's); a group it lacks, or whose entries disagree, is left out."""
    index = manager_index(task_manager) or _our_index()
    out: dict[str, bool] = {}
    for name in groups:
        group = group_config(index.get(name, index.get(name.rpartition("::")[2])))
        listed = [e for e in (group or {}).get("aggregate_metric_list") or [] if isinstance(e, dict)]
        declared = {bool(e.get("weight_by_size", True)) for e in listed} or {False}
        if group is not None and len(declared) == 1:
            out[name] = declared.pop()
    return out
