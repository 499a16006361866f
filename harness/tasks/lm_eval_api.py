"""What our task classes take from lm-eval where its releases differ (0.4.13 and the next release; the 0.5 line), each
bridged here once, behind a check of what the installed lm-eval has."""

from __future__ import annotations

from typing import Any

from lm_eval.api.task import ConfigurableTask


def builds_requests_by_output_type() -> bool:
    """Whether lm-eval's configurable task leaves building requests to a subclass per output type (the 0.5 line: its
    ``construct_requests`` is abstract) rather than building every output type itself (0.4.13)."""
    return bool(getattr(ConfigurableTask.construct_requests, "__isabstractmethod__", False))


def task_base(output_type: str) -> type:
    """lm-eval's task class that builds the requests of ``output_type``: the class lm-eval itself builds a task of that
    output type from (the 0.5 line's ``Task.from_config`` dispatch), else ``ConfigurableTask``."""
    if not builds_requests_by_output_type():
        return ConfigurableTask
    by_type = getattr(ConfigurableTask, "_registry", {})
    if output_type not in by_type:
        raise TypeError(f"this lm-eval has no task class for output_type {output_type!r} ({', '.join(by_type)})")
    return by_type[output_type]


def task_scorer() -> str | None:
    """The name of our scorer (:mod:`harness.tasks.lm_eval_scorer`) on an lm-eval whose tasks score through registered
    scorers (the 0.5 line: ``register_scorer``), registered on first use; None on one without (0.4.13, whose evaluator
    aggregates by the task's ``aggregation()`` itself)."""
    from lm_eval.api import registry

    if not hasattr(registry, "register_scorer"):
        return None
    from harness.tasks.lm_eval_scorer import NAME

    return NAME


def bypass_scorers(metric_name: str, output_type: str) -> list[Any] | None:
    """``--predict_only``'s scorers for a task of ours: ``metric_name`` alone through our scorer where lm-eval scores
    through registered scorers (the 0.5 line rebuilds a task's scorers for lm-eval's own output types only, ours
    are not among them); None where it does not (0.4.13: ``ConfigurableTask.override_metric`` does it)."""
    scorer = task_scorer()
    if scorer is None:
        return None
    from lm_eval.scorers import build_scorer

    metrics = [{"metric": metric_name, "aggregation": metric_name}]
    cfg = {"name": "none", "filter": [], "metric_list": metrics}
    return [build_scorer(cfg=cfg, output_type=output_type, scorer_type=scorer)]
