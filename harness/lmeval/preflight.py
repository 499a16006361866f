"""The checks of a run of our models or tasks that need no model, before lm-eval loads one: the model args of
our models, whether the model serves every request type the tasks send (a stock ``hf`` / ``vllm`` asked for
``ppl_govreport`` is refused naming the models that serve it), ``--metadata`` keys and every task option.

``lch eval`` runs :func:`preflight` before lm-eval indexes its tasks; plain lm-eval runs it through
:func:`after_evaluator_import` (the import hook of :mod:`harness.lm_eval_activation`), which wraps
``simple_evaluate`` so that the command, ``python -m lm_eval`` and Python callers get the same checks before
the model loads. A run that names neither our models nor our tasks is left alone.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
from pathlib import Path
from typing import Any

from harness.lmeval.metadata import check_metadata, check_task_options
from harness.lmeval.plugin import tasks_path
from harness.lmeval.registry import model_entry, model_names
from harness.lmeval.request_types import check_model_serves, task_names

log = logging.getLogger(__name__)
_MARK = "_lch_preflight"
_passed: set[str] = set()  # runs already checked in this process (lch eval checks before lm-eval does)


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


def _our_prefixes(names: frozenset[str]) -> frozenset[str]:
    """The first words of our task names (``lch``, ``ppl``, ``longppl``, ``mrqa`` ...)."""
    return frozenset(name.split("_")[0] for name in names)


def looks_like_ours(task: str, names: frozenset[str]) -> bool:
    """Whether ``task`` is one of our task names or shares the first word of one (a typo of ours)."""
    return task in names or task.split("_")[0] in _our_prefixes(names)


def involves_us(model: Any, tasks: list[str], include_path: Any = None) -> bool:
    """Whether a run uses one of our models or one of our tasks (by name, or by the first word of one: a typo of
    ours gets our checks too)."""
    names = task_names(tasks_path())
    return (isinstance(model, str) and model in model_names()) or any(
        t in names or (looks_like_ours(t, names) and not _named_elsewhere(t, include_path)) for t in tasks)


def check_task_names(tasks: list[str], include_path: Any = None) -> None:
    """A task named like ours (its first word is one of our tasks') that is not one of them, nor named by lm-eval's
    own YAMLs or those under ``include_path``: a one-line :class:`~harness.errors.UsageError` with the closest of
    our names, before lm-eval indexes its tasks (other names are lm-eval's to find)."""
    from harness.errors import UsageError
    from harness.options import closest

    names = task_names(tasks_path())
    for task in tasks:
        if task not in names and looks_like_ours(task, names) and not _named_elsewhere(task, include_path):
            raise UsageError(f"task {task} is unknown{closest(task, sorted(names))} (`lch eval --tasks list` lists "
                             "every task)")


def _include_folders(include_path: Any) -> list[Path]:
    """The folders of an lm-eval ``include_path`` (a path, or a list of them; None: none)."""
    if not include_path:
        return []
    paths = [include_path] if isinstance(include_path, (str, Path)) else list(include_path)
    return [Path(p).expanduser() for p in paths if p]


def _named_elsewhere(task: str, include_path: Any = None) -> bool:
    """Whether a task YAML of lm-eval's own, or one under ``include_path``, names ``task`` (a task, group or tag of
    that name: lm-eval's LongBench tasks share our first word ``longbench``, a user's folder may add an
    ``lch_...`` group); a text search, read only for names that look like ours."""
    import re

    import lm_eval

    pattern = re.compile(rf"^\s*(?:task|group|tag|-)\s*:?\s*{re.escape(task)}\s*$", re.M)
    folders = [Path(lm_eval.__file__).parent / "tasks", *_include_folders(include_path)]
    for path in (p for folder in folders if folder.is_dir() for p in folder.rglob("*.yaml")):
        try:
            if task in path.read_text(encoding="utf-8", errors="ignore") and pattern.search(path.read_text(
                    encoding="utf-8", errors="ignore")):
                return True
        except OSError:
            continue
    return False


def preflight(model: Any, model_args: Any, tasks: list[str], metadata: Any, include_path: Any = None) -> None:
    """Every check of the run that needs no model (module docstring); raises a one-line
    :class:`~harness.errors.LchError`. ``model``: a name (an ``LM`` object is already built: only the tasks'
    options are checked)."""
    model_args, metadata = as_dict(model_args), as_dict(metadata)
    # lm-eval's command line hands simple_evaluate the model args merged into the metadata: only the rest is ours
    metadata = {k: v for k, v in metadata.items() if not (k in model_args and model_args[k] == v)}
    key = json.dumps([model if isinstance(model, str) else None, model_args, tasks, metadata], sort_keys=True,
                     default=str)
    if key in _passed:
        return
    name = model if isinstance(model, str) else None
    entry = model_entry(name) if name else None
    if entry is not None:
        entry.preflight(model_args)
    if tasks:
        check_task_names(tasks, include_path)
        check_model_serves(name, tasks, tasks_path(), model_args)
        if metadata:
            check_metadata(metadata, tasks, tasks_path())
        # every task's options parsed now, so a wrong-typed value fails before lm-eval loads the model
        check_task_options(metadata, model_args, tasks, tasks_path())
    _passed.add(key)


def check_destinations(output_path: Any) -> None:
    """Where the run will write, checked before it computes anything (a run that cannot write its results must
    not run for hours first): lm-eval's ``--output_path`` (a folder, or a ``.json`` file) and the folders of
    :data:`harness.cache.FOLDER_VARIABLES`; a one-line :class:`~harness.errors.UsageError` otherwise."""
    from harness.cache import check_folder_variables
    from harness.errors import UsageError
    from harness.files import writable_problem

    check_folder_variables()
    if output_path:
        problem = writable_problem(str(output_path), folder=not str(output_path).endswith(".json"))
        if problem:
            raise UsageError(f"--output_path {output_path}: {problem}; give a folder you can write")


def after_evaluator_import(evaluator_module: Any) -> None:
    """Wrap ``lm_eval.evaluator.simple_evaluate`` so that a run of our models or tasks is preflighted before the
    model loads, and its results carry the cautions of metrics that rest on too little
    (:func:`harness.lmeval.aggregations.record_cautions`) (the import hook of ``lm_eval.evaluator``; callers that import ``simple_evaluate`` afterwards, as
    lm-eval's CLI and ``lm_eval.simple_evaluate`` do, get the wrapper)."""
    original = evaluator_module.simple_evaluate
    if getattr(original, _MARK, False):
        return
    signature = inspect.signature(original)

    @functools.wraps(original)
    def simple_evaluate(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(*args, **kwargs).arguments
            tasks = [t for t in (bound.get("tasks") or []) if isinstance(t, str)]
            include_path = getattr(bound.get("task_manager"), "include_path", None)
            ours = involves_us(bound.get("model"), tasks, include_path)
        except Exception as err:  # noqa: BLE001 (lm-eval reports its own argument errors)
            log.debug("lch preflight skipped: %s", err)
            ours = False
        if ours:
            preflight(bound.get("model"), bound.get("model_args"), tasks, bound.get("metadata"), include_path)
        results = original(*args, **kwargs)
        if ours and isinstance(results, dict):  # None on the ranks of a parallel run other than the first
            # lm-eval has no hook after aggregation that sees every task's numbers at once; its callers (the CLI,
            # our run.py) write this object as the results file, so what is added here is in that file
            from harness.lmeval.aggregations import record_cautions

            record_cautions(results)
        return results

    setattr(simple_evaluate, _MARK, True)
    evaluator_module.simple_evaluate = simple_evaluate
    if callable(getattr(evaluator_module, "get_git_commit_hash", None)):
        # lm-eval runs `git describe` with the user's stderr, so every run outside a git checkout prints git's
        # "fatal: not a git repository" (noise about nothing the user did); lm-eval has no switch for it, so the
        # name its evaluator calls is replaced by the same lookup with git's stderr discarded
        evaluator_module.get_git_commit_hash = quiet_git_commit_hash


def quiet_git_commit_hash() -> str | None:
    """lm-eval's ``get_git_commit_hash`` (``git describe --always`` in the working folder, else the commit read
    from a ``.git`` folder above it) without git's error line on stderr."""
    import os
    import subprocess

    try:
        return subprocess.check_output(["git", "describe", "--always"], stderr=subprocess.DEVNULL).strip().decode()
    except (subprocess.CalledProcessError, FileNotFoundError, OSError):
        from lm_eval.loggers.utils import get_commit_from_path

        return get_commit_from_path(os.getcwd())
