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


def involves_us(model: Any, tasks: list[str]) -> bool:
    """Whether a run uses one of our models or one of our tasks (by name)."""
    return (isinstance(model, str) and model in model_names()) or bool(set(tasks) & task_names(tasks_path()))


def preflight(model: Any, model_args: Any, tasks: list[str], metadata: Any) -> None:
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
        check_model_serves(name, tasks, tasks_path(), model_args)
        if metadata:
            check_metadata(metadata, tasks, tasks_path())
        # every task's options parsed now, so a wrong-typed value fails before lm-eval loads the model
        check_task_options(metadata, model_args, tasks, tasks_path())
    _passed.add(key)


def after_evaluator_import(evaluator_module: Any) -> None:
    """Wrap ``lm_eval.evaluator.simple_evaluate`` so that a run of our models or tasks is preflighted before the
    model loads (the import hook of ``lm_eval.evaluator``; callers that import ``simple_evaluate`` afterwards, as
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
            ours = involves_us(bound.get("model"), tasks)
        except Exception as err:  # noqa: BLE001 (lm-eval reports its own argument errors)
            log.debug("lch preflight skipped: %s", err)
            ours = False
        if ours:
            preflight(bound.get("model"), bound.get("model_args"), tasks, bound.get("metadata"))
        return original(*args, **kwargs)

    setattr(simple_evaluate, _MARK, True)
    evaluator_module.simple_evaluate = simple_evaluate
