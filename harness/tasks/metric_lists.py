"""Metric lists: specs checked against the catalogue, length honesty metrics, :class:`PresentItems` aggregations."""

from __future__ import annotations

from typing import Any

from lm_eval.api.metrics import mean as lm_eval_mean, mean_stderr

from harness.metrics.catalogue import metric_info
from harness.metrics.pooling import POOLING, mean, total

# how a task pools them; what they are is the catalogue's (harness.metrics.catalogue)
HONESTY_METRICS = [
    {"metric": "prompt_tokens", "aggregation": mean},
    {"metric": "over_length", "aggregation": total},
    {"metric": "sample_tokens", "aggregation": mean},
]
TARGET_METRIC = {"metric": "over_target", "aggregation": total}


def described(metric_list: list, task: Any) -> list[dict]:
    """``metric_list`` with each metric's ``higher_is_better`` from :mod:`harness.metrics.catalogue`; a metric it does
    not know, or a direction that contradicts it, is a ``TypeError`` naming the task."""
    out = []
    for spec in metric_list:
        if not isinstance(spec, dict) or "metric" not in spec:
            raise TypeError(f"task {task}: a metric_list entry without a metric name: {spec!r}")
        info = metric_info(spec["metric"])
        if info is None:
            raise TypeError(
                f"task {task}: metric {spec['metric']!r} is not in harness/metrics/catalogue.py; declare "
                "what it is there"
            )
        if spec.get("higher_is_better", info.higher_is_better) != info.higher_is_better:
            raise TypeError(
                f"task {task}: metric {spec['metric']!r} says higher_is_better "
                f"{spec['higher_is_better']}, the catalogue {info.higher_is_better}"
            )
        out.append({**spec, "higher_is_better": info.higher_is_better})
    return out


def pooling_of(spec: dict, task: Any) -> str | None:
    """How the metric of ``spec`` pools over any subset of documents: what its aggregation declares
    (:func:`harness.metrics.pooling.pools_as`; lm-eval's ``mean``: ``mean``). An aggregation that declares nothing is a
    ``TypeError`` naming the task."""
    aggregation = spec.get("aggregation")
    if aggregation == "mean" or aggregation is lm_eval_mean:
        return "mean"
    if not hasattr(aggregation, POOLING):
        raise TypeError(
            f"task {task}: the aggregation of metric {spec.get('metric')!r} ({aggregation!r}) does not say "
            "how it pools over documents; declare it with harness.metrics.pooling.pools_as"
        )
    return getattr(aggregation, POOLING)


class PresentItems:
    """An lm-eval aggregation over the documents that have the metric (the others report None). With none present the
    value is ``fn([])`` (a count: 0), or NaN where that fails (a mean; the metric is then left out of the results). The
    count and, for lm-eval's own ``mean``, the closed-form ``mean_stderr`` (lm-eval gives a stderr only to aggregations
    it knows) go to ``record``."""

    def __init__(self, fn: Any, name: str, record: Any) -> None:
        self.fn, self.name, self.record = fn, name, record
        self.__name__ = getattr(fn, "__name__", name)

    def __call__(self, items: list) -> Any:
        present = [item for item in items if item is not None]
        stderr = float(mean_stderr(present)) if self.fn is lm_eval_mean and len(present) > 1 else None
        self.record(self.name, len(present), stderr)
        if present:
            return self.fn(present)
        try:
            return self.fn([])
        except (ZeroDivisionError, ValueError, IndexError, TypeError):
            return float("nan")
