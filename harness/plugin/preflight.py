"""The one door: every run reaches lm-eval's ``simple_evaluate`` (``lm_eval`` and ``lch eval`` through lm-eval's own
command line, a Python caller directly), which is wrapped once, at its import (:func:`after_evaluator_import`). A run
that uses none of our models or tasks goes straight to lm-eval's function. For a run of ours, before any model loads:
lm-eval's own settings that it would find wrong only after loading one (:func:`check_settings`, on the values its
parser made), the destinations, then what is ours, each by the check declared with it (:func:`preflight`); after it,
the results are finished (:mod:`harness.plugin.finish_results`). docs/lm-eval-plugin.md describes the mechanism."""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import logging
import math
import os
from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from harness.core import results as keys
from harness.core.context import patched
from harness.core.errors import UsageError
from harness.core.options import MAX_SEED
from harness.engines.registry import checking_once, model_entry, model_names
from harness.engines.vllm_pic.imports import VllmUnavailable
from harness.plugin.discovery import group_weighting, our_tasks, run_task_names, task_index_for
from harness.plugin.task_index import check_tasks
from harness.tasks import TASKS_PATH

log = logging.getLogger(__name__)
_MARK = "_lch_preflight"
# simple_evaluate's parameters lm-eval passes to the model's constructor beside the model args (those not None)
RUN_SETTINGS = ("device", "batch_size", "max_batch_size")


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


def own_metadata(metadata: Any, model_args: dict) -> dict:
    """``--metadata`` without the model args lm-eval's command line merges into it: only the rest is ours."""
    return {k: v for k, v in as_dict(metadata).items() if not (k in model_args and model_args[k] == v)}


def preflight(
    model: Any,
    model_args: Any,
    tasks: list[Any],
    metadata: Any,
    include_path: Any = None,
    task_manager: Any = None,
    planning: bool = False,
    run_settings: Mapping[str, Any] | None = None,
    ours: list[str] | None = None,
) -> None:
    """What is ours in a run, each checked by what declares it; raises a one-line
    :class:`~harness.core.errors.LchError`: a model of ours by the check registered with it, on the args lm-eval
    will build it with (``run_settings`` added: its constructor takes this result in the run, and checks them itself
    for a caller that builds it directly), the request types our tasks send against the model, ``--metadata`` keys,
    every task option parsed into its dataclass, every input they name. ``planning`` (``lch plan``, which loads no
    model): an engine not installed here is no error. ``ours``: the run's tasks of ours, where the caller knows them
    (:func:`~harness.plugin.discovery.our_tasks`)."""
    model_args = as_dict(model_args)
    metadata = own_metadata(metadata, model_args)
    name = model if isinstance(model, str) else None
    entry = model_entry(name) if name else None
    if entry is not None:
        try:
            entry.check({**model_args, **(run_settings or {})})
        except VllmUnavailable:
            if not planning:
                raise
    ours = our_tasks(tasks, include_path, task_manager) if ours is None else ours
    if ours:
        check_tasks(name, metadata, model_args, ours, str(TASKS_PATH), every_task=len(ours) == len(tasks))


def check_destinations(output_path: Any) -> None:
    """Refuse in one line, before the run computes anything, an ``--output_path`` (a folder or a ``.json`` file) or a
    folder of :data:`harness.core.cache.FOLDER_VARIABLES` that cannot be written."""
    from harness.core.cache import check_folder_variables
    from harness.core.files import writable_problem

    check_folder_variables()
    if output_path:
        problem = writable_problem(str(output_path), folder=not str(output_path).endswith(".json"))
        if problem:
            raise UsageError(f"--output_path {output_path}: {problem}; give a folder you can write")


# ------------------------------------------------------------------ lm-eval's own settings


class SettingRefused(UsageError):
    """A value of ``simple_evaluate``'s parameter outside its domain: ``str()`` names the parameter (a Python caller),
    :attr:`on_command_line` the flag of lm-eval's ``run`` command that sets it."""

    def __init__(self, message: str, on_command_line: str) -> None:
        super().__init__(message)
        self.on_command_line = " ".join(on_command_line.split())


# the parameters lm-eval's `run` command sets from another flag than their own name: (flag, which part of its value)
FLAG_OF = {
    "random_seed": ("--seed", "its 1st value, Python's random seed"),
    "numpy_random_seed": ("--seed", "its 2nd value, numpy's seed"),
    "torch_random_seed": ("--seed", "its 3rd value, torch's seed"),
    "fewshot_random_seed": ("--seed", "its 4th value, the few-shot sampler's seed"),
}


def _shown(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # lm-eval's --limit is a float: `--limit -3` arrives as -3.0
    return repr(value) if isinstance(value, str) else str(value)


def refused(parameter: str, value: Any, allowed: str, why: str = "", key: str | None = None) -> SettingRefused:
    """The refusal of ``value`` for ``parameter`` (or for its ``key``: a ``gen_kwargs`` key, a ``samples`` task)."""
    flag, part = FLAG_OF.get(parameter, (f"--{parameter}", ""))
    tail = f": not allowed{f' ({why})' if why else ''}; give {allowed}"
    if key is not None:
        return SettingRefused(f"{parameter} {key}={_shown(value)}{tail}", f"{flag} {key}={_shown(value)}{tail}")
    return SettingRefused(
        f"{parameter}={_shown(value)}{tail}", f"{flag} {_shown(value)}{f' ({part})' if part else ''}{tail}"
    )


def _integer(value: Any, low: int = 0, high: float = math.inf) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _batch_size(value: Any) -> bool:
    text = str(value).strip() if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
    head, colon, times = text.partition(":")
    if head != "auto":
        return text.isdigit() and int(text) >= 1
    try:  # lm-eval's HF model re-detects the batch size N times over the run (`auto:N`, a float)
        return not colon or (math.isfinite(float(times)) and float(times) > 0)
    except ValueError:
        return False


def _device(value: Any) -> bool:
    import torch

    if not isinstance(value, str):
        return False
    try:
        torch.device(value)
    except (RuntimeError, ValueError, TypeError):
        return False
    return True


def _cache_problem(value: Any) -> str:
    """Why lm-eval could not write ``--use_cache``'s database, ``<path>_rank<N>.db`` (its own naming), or ``""``."""
    from harness.core.files import writable_problem

    if not isinstance(value, str) or not value.strip():
        return "not a path"
    return writable_problem(f"{value}_rank0.db", folder=False) or ""


_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_SEED = f"an integer from 0 to {MAX_SEED}, or None (not seeded)"
# what each setting may be (None: lm-eval's default) and its domain in words; lm-eval checks none of these before a
# model has loaded, and takes some (a negative --limit, a --seed beyond numpy's) only to fail or mislead later
DOMAINS: dict[str, tuple[str, Any]] = {
    "limit": (
        "a whole number of documents per task (1 or more) or a share of each task's documents in (0, 1)",
        lambda v: _number(v) and (0 < v < 1 or (v >= 1 and float(v).is_integer())),
    ),
    "num_fewshot": ("an integer >= 0 (examples in the few-shot context)", _integer),
    "batch_size": ("an integer >= 1, auto, or auto:N (N > 0: times the batch size is re-detected)", _batch_size),
    "max_batch_size": ("an integer >= 1 (the largest batch --batch_size auto tries)", lambda v: _integer(v, 1)),
    "device": ("a torch device: cpu, cuda, cuda:N, mps ...", _device),
    "use_cache": ("a path in a folder you can write (lm-eval adds _rank<N>.db to it)", lambda v: not _cache_problem(v)),
    "bootstrap_iters": ("an integer >= 0 (0: no standard errors)", _integer),
    # what logging's setLevel takes (lm-eval's --verbosity upper-cases the word; a Python caller's is taken as given)
    "verbosity": (
        f"{', '.join(_LEVELS[:-1])} or {_LEVELS[-1]}",
        lambda v: _integer(v) or (isinstance(v, str) and isinstance(logging.getLevelName(v), int)),  # a name: its level
    ),
    **{seed: (_SEED, lambda v: _integer(v, 0, MAX_SEED)) for seed in FLAG_OF},
}
# --gen_kwargs keys whose meaning lm-eval's models and ours share: key -> (domain in words, test); others pass as given
GEN_KWARGS: dict[str, tuple[str, Any]] = {
    "max_gen_toks": ("an integer >= 1 (tokens generated at most)", lambda v: _integer(v, 1)),
    "temperature": ("a number >= 0", lambda v: _number(v) and v >= 0),
    "top_p": ("a number in (0, 1]", lambda v: _number(v) and 0 < v <= 1),
    "top_k": ("an integer >= 0", _integer),
    "do_sample": ("True or False", lambda v: isinstance(v, bool)),
    "until": (
        "a text or a list of texts (stop sequences)",
        lambda v: isinstance(v, str) or (isinstance(v, (list, tuple)) and all(isinstance(s, str) for s in v)),
    ),
}


def check_settings(
    arguments: Mapping[str, Any], switches: frozenset[str] = frozenset(), tasks: list[str] | None = None
) -> None:
    """Raise :class:`SettingRefused` for the first of ``arguments`` (``simple_evaluate``'s parameter -> value, as
    lm-eval's parser made them on a command line) outside its domain (:data:`DOMAINS`; ``switches``: the parameters
    lm-eval declares ``bool``); ``tasks``: the run's task names (groups expanded) when known, which ``samples`` must
    name only."""
    for parameter, value in arguments.items():
        allowed, accepts = DOMAINS.get(parameter, ("", None))
        if value is not None and accepts is not None and not accepts(value):
            raise refused(parameter, value, allowed, _cache_problem(value) if parameter == "use_cache" else "")
        if value is not None and parameter in switches and not isinstance(value, bool):
            raise refused(parameter, value, "True or False")
    gen_kwargs = arguments.get("gen_kwargs")
    if isinstance(gen_kwargs, str):
        from lm_eval.utils import simple_parse_args_string

        if not all(eq and key.strip() for key, eq, _ in (p.partition("=") for p in gen_kwargs.split(",") if p.strip())):
            raise refused("gen_kwargs", gen_kwargs, "key=value pairs, a comma between them, or a JSON object")
        gen_kwargs = simple_parse_args_string(gen_kwargs)
    for key, value in (gen_kwargs or {}).items():
        allowed, accepts = GEN_KWARGS.get(key, ("", None))
        if accepts is not None and not accepts(value):
            raise refused("gen_kwargs", value, allowed, key=key)
    _check_samples(arguments.get("samples"), tasks)


def unreadable_samples(text: str, why: str) -> SettingRefused:
    """The refusal of ``samples`` text that is neither JSON (``why``: the parser's words) nor a file."""
    tail = (
        f"{text!r} is neither a JSON object ({why}) nor a file: give '{{\"<task>\": [<doc indices>]}}' or the path "
        "of a file holding it"
    )
    return SettingRefused(f"samples {tail}", f"--samples {tail}")


def _check_samples(samples: Any, tasks: list[str] | None) -> None:
    """``samples``: ``{task: [document indices]}`` naming only the run's tasks (lm-eval's config has read a file or
    JSON text into it; what it could not read stays text)."""
    if samples is None:
        return
    if isinstance(samples, str):
        try:
            json.loads(samples)
            why = "not a JSON object"
        except json.JSONDecodeError as err:
            why = err.msg
        raise unreadable_samples(samples, why)
    if not isinstance(samples, Mapping) or not all(isinstance(task, str) for task in samples):
        raise refused("samples", samples, "a JSON object of task -> document indices, '{\"<task>\": [0, 3, 6]}'")
    for task, indices in samples.items():  # lm-eval runs every document of a task given [] and none given a negative
        if not (isinstance(indices, (list, tuple)) and indices and all(_integer(i) for i in indices)):
            raise refused("samples", indices, "a non-empty list of document indices, integers >= 0", key=task)
    unknown = [task for task in samples if tasks is not None and task not in tasks]
    if unknown:
        tail = (
            f"names {', '.join(unknown)}, which this run does not evaluate (lm-eval would ignore it and run every "
            f"document); give indices of its tasks: {', '.join(tasks or [])}"
        )
        raise SettingRefused(f"samples {tail}", f"--samples {tail}")


# ------------------------------------------------------------------ the door


@functools.lru_cache(maxsize=1)
def _switches() -> frozenset[str]:
    """The parameters of lm-eval's ``simple_evaluate`` that it declares ``bool``."""
    import lm_eval.evaluator

    parameters = inspect.signature(inspect.unwrap(lm_eval.evaluator.simple_evaluate)).parameters
    return frozenset(name for name, p in parameters.items() if p.annotation in ("bool", bool))


def admit(arguments: Mapping[str, Any]) -> bool:
    """Whether a ``simple_evaluate`` call (its arguments by name) is a run of ours; for one, every check before a
    model loads (module docstring), each raising one line."""
    model, tasks, manager = arguments.get("model"), list(arguments.get("tasks") or []), arguments.get("task_manager")
    ours = our_tasks(tasks, task_manager=manager)
    if not (model in model_names() or ours):
        return False
    check_destinations(getattr(arguments.get("evaluation_tracker"), "output_path", None))
    check_run_settings(arguments)
    settings = {key: arguments[key] for key in RUN_SETTINGS if arguments.get(key) is not None}
    preflight(
        model, arguments.get("model_args"), tasks, _metadata(arguments), None, manager, run_settings=settings, ours=ours
    )
    return True


def check_run_settings(arguments: Mapping[str, Any]) -> None:
    """:func:`check_settings` of a ``simple_evaluate`` call's arguments, ``samples`` against the run's tasks."""
    tasks, manager = list(arguments.get("tasks") or []), arguments.get("task_manager")
    check_settings(
        arguments, _switches(), run_task_names(tasks, task_manager=manager) if arguments.get("samples") else None
    )


def _metadata(arguments: Mapping[str, Any]) -> Any:
    """What lm-eval hands the tasks: a given task manager's metadata, else ``simple_evaluate``'s argument."""
    manager = arguments.get("task_manager")
    return getattr(manager, "metadata", None) if manager is not None else arguments.get("metadata")


def after_evaluator_import(evaluator_module: Any) -> None:
    """Wrap ``lm_eval.evaluator.simple_evaluate`` (its import hook): the module docstring's door."""
    original = evaluator_module.simple_evaluate
    if getattr(original, _MARK, False):
        return
    signature = inspect.signature(original)

    @functools.wraps(original)
    def simple_evaluate(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(*args, **kwargs).arguments
        except TypeError:  # lm-eval reports its own argument errors
            return original(*args, **kwargs)
        with checking_once():  # the model's constructor takes the door's check of its args
            if not admit(bound):
                return original(*args, **kwargs)
            return finished(original, evaluator_module, bound, args, kwargs)

    setattr(simple_evaluate, _MARK, True)
    evaluator_module.simple_evaluate = simple_evaluate


def finished(original: Any, evaluator_module: Any, bound: dict[str, Any], args: Any, kwargs: Any) -> Any:
    """lm-eval's ``simple_evaluate`` run with a quiet git lookup and its cost gathered, and its results finished
    (lm-eval has no hook after aggregation; its callers write this object as the results file) with how to run it
    again."""
    import time

    from harness.core.costs import gathering
    from harness.core.run_record import asking_chat_template
    from harness.models.device_info import reset_peak_memory
    from harness.plugin.finish_results import finish_results

    manager = bound.get("task_manager")
    reset_peak_memory()
    start = time.perf_counter()
    with (
        gathering() as cost,
        quiet_git_lookup(evaluator_module),
        asking_chat_template(bound.get("apply_chat_template")),
        task_index_for(bound.get("tasks") or [], task_manager=manager),
    ):
        results = original(*args, **kwargs)
    if isinstance(results, dict):  # None on the ranks of a parallel run other than the first
        weighting = group_weighting(map(str, results.get("group_subtasks") or {}), manager)
        finish_results(results, weighting, time.perf_counter() - start, cost)
        invocation = invocation_of(bound, _metadata(bound), manager)
        if invocation is not None:
            results[keys.INVOCATION] = invocation.as_json()
    return results


def invocation_of(bound: dict[str, Any], metadata: Any, manager: Any) -> Any:
    """How this ``simple_evaluate`` call can be made again (:class:`harness.core.invocation.Invocation`); None when a
    model or task is given as an object or an argument is not JSON."""
    from harness.core.invocation import RERUN_ARGUMENTS, Invocation, jsonable

    model, tasks = bound.get("model"), list(bound.get("tasks") or [])
    if not isinstance(model, str) or not all(isinstance(t, str) for t in tasks):
        return None
    model_args = as_dict(bound.get("model_args"))
    metadata = own_metadata(metadata, model_args)
    include = getattr(manager, "include_path", None)
    include = [include] if isinstance(include, (str, Path)) else list(include or [])
    ours = TASKS_PATH.resolve()
    include = [str(Path(p).resolve()) for p in include if Path(p).resolve() != ours]
    arguments = {k: bound[k] for k in RERUN_ARGUMENTS if k in bound and bound[k] is not None}
    if not all(jsonable(v) for v in (model_args, metadata, *arguments.values())):
        return None
    return Invocation(model, model_args, tasks, metadata, include, arguments, cwd=os.getcwd())


def quiet_git_lookup(evaluator_module: Any) -> AbstractContextManager[None]:
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
