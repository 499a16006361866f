"""The checks of a run of our models or tasks that need no model, before lm-eval loads one (model args, request types
served, ``--metadata`` and task options, lm-eval's own flags), run by ``lch eval`` and by the ``simple_evaluate``
wrapper (:func:`after_evaluator_import`). A run is ours by lm-eval's task index (:func:`our_tasks`) and our model
names; any other is left to lm-eval. docs/lm-eval-plugin.md describes the mechanism."""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import logging
import os
import sys
from contextvars import ContextVar
from pathlib import Path
from typing import Any, ContextManager

from harness.core import results as keys
from harness.core.context import patched, setting
from harness.plugin.lm_eval_flags import check_run_arguments, cli_arguments, cli_run_settings
from harness.plugin.metadata import check_metadata, check_task_inputs, check_task_options
from harness.tasks import TASKS_PATH
from harness.engines.registry import model_entry, model_names
from harness.engines.vllm_pic.imports import VllmUnavailable
from harness.plugin.task_index import check_model_serves, task_folder
from harness.plugin.discovery import index_folders, is_group, last_task_index, manager_index, plugin_tasks_only

log = logging.getLogger(__name__)
_MARK = "_lch_preflight"
# set while lm-eval's command line runs a run of ours: the keys of the runs it has checked (None: a Python caller)
_COMMAND_LINE: ContextVar[set[str] | None] = ContextVar("lch_command_line", default=None)


def command_line_run() -> ContextManager[set[str]]:
    """While lm-eval's command line runs a run of ours (``lch eval``, plain ``lm_eval``): errors name lm-eval's flags,
    and a run checked before lm-eval starts is not checked again inside ``simple_evaluate``."""
    current = _COMMAND_LINE.get()
    return setting(_COMMAND_LINE, current if current is not None else set())


def as_dict(value: Any) -> dict:
    """``--model_args`` / ``--metadata`` as lm-eval may hand them: a dict, ``k=v,...`` text or JSON text."""
    if not value:
        return {}
    if isinstance(value, dict):
        return dict(value)
    text = str(value).strip()
    if text.startswith("{"):
        return dict(json.loads(text))
    from lm_eval.utils import simple_parse_args_string

    return dict(simple_parse_args_string(text))


def _paths(include_path: Any) -> list[Path]:
    """The folders of an lm-eval ``include_path`` (a path, or a list of them; None: none)."""
    if not include_path:
        return []
    paths = [include_path] if isinstance(include_path, (str, Path)) else list(include_path)
    return [Path(p).expanduser() for p in paths if p]


@functools.lru_cache(maxsize=1)
def _our_index() -> frozenset[str]:
    """The names (tasks, groups, tags) lm-eval's own indexer finds in our task folder."""
    return frozenset(index_folders([TASKS_PATH]))


def our_tasks(tasks: list[Any], include_path: Any = None, task_manager: Any = None) -> list[str]:
    """The names among ``tasks`` that lm-eval resolves to our task folder: by the run's ``TaskManager`` index, else
    (before lm-eval indexes) names of our folder's index that no YAML under ``include_path`` redefines."""
    names = [t for t in tasks if isinstance(t, str)]
    index = manager_index(task_manager)
    if index is not None:
        ours = TASKS_PATH.resolve()
        found = [(name, getattr(index.get(name), "yaml_path", None)) for name in names]
        return [name for name, path in found if path is not None and ours in Path(path).resolve().parents]
    candidates = [t for t in names if t in _our_index()]
    folders = _paths(include_path)
    if candidates and folders:
        theirs = index_folders(folders)
        candidates = [t for t in candidates if t not in theirs]
    return candidates


def involves_us(model: Any, tasks: list[Any], include_path: Any = None, task_manager: Any = None) -> bool:
    """Whether a run uses one of our models (by its registered name) or one of our tasks (:func:`our_tasks`)."""
    return (isinstance(model, str) and model in model_names()) or bool(our_tasks(tasks, include_path, task_manager))


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


def preflight(model: Any, model_args: Any, tasks: list[Any], metadata: Any, include_path: Any = None,
              task_manager: Any = None, planning: bool = False) -> None:
    """Every check of the run that needs no model; raises a one-line :class:`~harness.core.errors.LchError`.
    ``model``: a name (an ``LM`` object: only task options are checked). Only our tasks are checked
    (:func:`our_tasks`). ``planning`` (``lch plan``): an engine not installed here is no error."""
    model_args, metadata = as_dict(model_args), as_dict(metadata)
    # lm-eval's command line hands simple_evaluate the model args merged into the metadata: only the rest is ours
    metadata = {k: v for k, v in metadata.items() if not (k in model_args and model_args[k] == v)}
    names = [t for t in tasks if isinstance(t, str)]
    name = model if isinstance(model, str) else None
    key = json.dumps([name, model_args, names, metadata, planning], sort_keys=True, default=str)
    checked = _COMMAND_LINE.get()
    if checked is not None and key in checked:
        return
    entry = model_entry(name) if name else None
    if entry is not None:
        try:
            entry.preflight(model_args)
        except VllmUnavailable:
            if not planning:
                raise
    ours = our_tasks(names, include_path, task_manager)
    if ours:
        check_model_serves(name, ours, str(TASKS_PATH), model_args)
        if metadata and len(ours) == len(tasks):  # other tasks may read keys of their own
            check_metadata(metadata, ours, str(TASKS_PATH))
        # every task's options parsed now: a wrong-typed value or a missing input fails before the model loads
        check_task_inputs(check_task_options(metadata, model_args, ours, str(TASKS_PATH)))
    if checked is not None:
        checked.add(key)


def check_destinations(output_path: Any) -> None:
    """Refuse in one line, before the run computes anything, an ``--output_path`` (a folder or a ``.json`` file) or a
    folder of :data:`harness.core.cache.FOLDER_VARIABLES` that cannot be written."""
    from harness.core.cache import check_folder_variables
    from harness.core.errors import UsageError
    from harness.core.files import writable_problem

    check_folder_variables()
    if output_path:
        problem = writable_problem(str(output_path), folder=not str(output_path).endswith(".json"))
        if problem:
            raise UsageError(f"--output_path {output_path}: {problem}; give a folder you can write")


def run_task_names(tasks: list[Any], include_path: Any = None, task_manager: Any = None) -> list[str] | None:
    """The names of the tasks a run evaluates (our groups expanded into their members) when every task it names is
    ours (:func:`our_tasks`); None otherwise (another folder's groups are lm-eval's to expand)."""
    ours = our_tasks(tasks, include_path, task_manager)
    if not ours or len(ours) != len(tasks):
        return None
    folder = task_folder(str(TASKS_PATH))
    return list(dict.fromkeys(entry.name for name in ours for entry in folder.members(name)))


def through_user_groups(tasks: list[Any], include_path: Any = None) -> list[str] | None:
    """:func:`run_task_names` where a name may also be a group of ``include_path`` whose every member is ours or such a
    group; None when any member is not ours (or is an inline task)."""
    folders = _paths(include_path)
    theirs = index_folders(folders) if folders else {}
    out: list[str] = []

    def expand(name: Any, seen: frozenset[str]) -> bool:
        entry = theirs.get(name) if isinstance(name, str) else None
        if entry is not None and is_group(entry) and name not in seen:
            members = (entry.cfg or {}).get("task")
            return isinstance(members, list) and all(expand(m, seen | {name}) for m in members)
        found = run_task_names([name], include_path)
        out.extend(found or [])
        return found is not None

    return list(dict.fromkeys(out)) if tasks and all(expand(t, frozenset()) for t in tasks) else None


def task_index_for(tasks: list[Any], include_path: Any = None, task_manager: Any = None) -> Any:
    """The context a run of ``tasks`` builds lm-eval's task index in: plugin folders only (:func:`plugin_tasks_only
    <harness.plugin.discovery.plugin_tasks_only>`) for a run of our tasks without its own manager, else the whole."""
    if task_manager is None and run_task_names(tasks, include_path) is not None:
        return plugin_tasks_only()
    return contextlib.nullcontext()


def cli_decided(ours: bool) -> None:
    """lm-eval's command line has named its run: one of ours gets the wrapper of ``simple_evaluate``; any other gets
    lm-eval's own function (the wrapper removed, or its import hook withdrawn before the evaluator is imported)."""
    evaluator = sys.modules.get("lm_eval.evaluator")
    if ours:
        if evaluator is not None:
            after_evaluator_import(evaluator)
    elif evaluator is not None:
        unwrap(evaluator)
    else:
        import lch_harness_lm_eval

        lch_harness_lm_eval.withdraw("lm_eval.evaluator")


def unwrap(evaluator_module: Any) -> None:
    """lm-eval's own ``simple_evaluate`` back in place of the wrapper (:func:`after_evaluator_import`)."""
    current = evaluator_module.simple_evaluate
    if getattr(current, _MARK, False):
        evaluator_module.simple_evaluate = current.__wrapped__


def after_evaluator_import(evaluator_module: Any) -> None:
    """Wrap ``lm_eval.evaluator.simple_evaluate`` (its import hook): a run of our models or tasks is preflighted before
    the model loads, runs with a quiet git lookup, and has its results finished (:mod:`harness.plugin.finish_results`)
    and its invocation recorded; other calls go straight to lm-eval's function."""
    original = evaluator_module.simple_evaluate
    if getattr(original, _MARK, False):
        return
    signature = inspect.signature(original)

    @functools.wraps(original)
    def simple_evaluate(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(*args, **kwargs).arguments
            tasks = list(bound.get("tasks") or [])
            manager = bound.get("task_manager")
            ours = involves_us(bound.get("model"), tasks, task_manager=manager)
        except Exception as err:  # noqa: BLE001 (lm-eval reports its own argument errors)
            log.debug("lch preflight skipped: %s", err)
            ours = False
        if not ours:
            return original(*args, **kwargs)
        # lm-eval's own settings first (a command line's were checked as it was parsed)
        check_run_arguments(bound, cli=_COMMAND_LINE.get() is not None,
                            tasks=run_task_names(tasks, task_manager=manager) if bound.get("samples") else None)
        # lm-eval hands the tasks a given task manager's metadata, and its own argument only to a manager it builds
        metadata = getattr(manager, "metadata", None) if manager is not None else bound.get("metadata")
        preflight(bound.get("model"), bound.get("model_args"), tasks, metadata, task_manager=manager)
        import time

        from harness.core.costs import gathering
        from harness.core.run_record import asking_chat_template
        from harness.models.device_info import reset_peak_memory

        reset_peak_memory()
        start = time.perf_counter()
        with gathering() as cost, quiet_git_lookup(evaluator_module), \
                asking_chat_template(bound.get("apply_chat_template")), task_index_for(tasks, task_manager=manager):
            results = original(*args, **kwargs)
        if isinstance(results, dict):  # None on the ranks of a parallel run other than the first
            # lm-eval has no hook after aggregation; its callers write this object as the results file
            from harness.plugin.finish_results import finish_results, record_cost

            finish_results(results)
            record_cost(results, time.perf_counter() - start, cost)
            invocation = invocation_of(bound, metadata, manager)
            if invocation is not None:
                results[keys.INVOCATION] = invocation.as_json()
        return results

    setattr(simple_evaluate, _MARK, True)
    evaluator_module.simple_evaluate = simple_evaluate


def invocation_of(bound: dict[str, Any], metadata: Any, manager: Any) -> Any:
    """How this ``simple_evaluate`` call can be made again (:class:`harness.core.invocation.Invocation`); None when a
    model or task is given as an object or an argument is not JSON."""
    from harness.core.invocation import RERUN_ARGUMENTS, Invocation, jsonable

    model, tasks = bound.get("model"), list(bound.get("tasks") or [])
    if not isinstance(model, str) or not all(isinstance(t, str) for t in tasks):
        return None
    model_args = as_dict(bound.get("model_args"))
    metadata = {k: v for k, v in as_dict(metadata).items() if not (k in model_args and model_args[k] == v)}
    include = getattr(manager, "include_path", None)
    include = [include] if isinstance(include, (str, Path)) else list(include or [])
    ours = TASKS_PATH.resolve()
    include = [str(Path(p).resolve()) for p in include if Path(p).resolve() != ours]
    arguments = {k: bound[k] for k in RERUN_ARGUMENTS if k in bound and bound[k] is not None}
    if not all(jsonable(v) for v in (model_args, metadata, *arguments.values())):
        return None
    return Invocation(model, model_args, tasks, metadata, include, arguments, cwd=os.getcwd())


def quiet_git_lookup(evaluator_module: Any) -> ContextManager[None]:
    """During one of our runs, the evaluator's ``get_git_commit_hash`` is :func:`quiet_git_commit_hash`: lm-eval's
    prints git's "fatal: not a git repository" outside a checkout and has no switch for it."""
    if not callable(getattr(evaluator_module, "get_git_commit_hash", None)):
        return contextlib.nullcontext()
    return patched(evaluator_module, "get_git_commit_hash", quiet_git_commit_hash)


def quiet_git_commit_hash() -> str | None:
    """lm-eval's ``get_git_commit_hash`` without git's error line on stderr."""
    import subprocess

    try:
        return subprocess.check_output(["git", "describe", "--always"], stderr=subprocess.DEVNULL).strip().decode()
    except (subprocess.CalledProcessError, FileNotFoundError, OSError):
        from lm_eval.loggers.utils import get_commit_from_path

        return get_commit_from_path(os.getcwd())


def check_cli_run(args: Any) -> None:
    """lm-eval's settings of a parsed command line of a run of ours checked, naming the flags, before lm-eval indexes
    its tasks; a run that is not ours is left to lm-eval."""
    model, tasks, include_path = cli_run_settings(args)
    if not involves_us(model, tasks, include_path):
        return
    arguments = cli_arguments(args)
    check_run_arguments(arguments, cli=True,
                        tasks=run_task_names(tasks, include_path) if arguments.get("samples") else None)
