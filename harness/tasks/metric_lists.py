"""The metric lists of our tasks: each spec checked against the catalogue (:func:`described`: a task says how it
pools a metric, the catalogue what it is), the length honesty metrics every counting task adds, and the
aggregation of a metric only some documents have (:class:`PresentItems`)."""

from __future__ import annotations

from typing import Any

from lm_eval.api.metrics import mean as lm_eval_mean, mean_stderr

from harness.metrics.catalogue import metric_info
from harness.metrics.pooling import mean, total

# how a task pools them; what they are is the catalogue's (harness.metrics.catalogue)
HONESTY_METRICS = [{"metric": "prompt_tokens", "aggregation": mean}, {"metric": "over_length", "aggregation": total},
                   {"metric": "sample_tokens", "aggregation": mean}]
TARGET_METRIC = {"metric": "over_target", "aggregation": total}

def described(metric_list: list, task: Any) -> list[dict]:
    """``metric_list`` with each metric's ``higher_is_better`` from the catalogue (:mod:`harness.metrics.catalogue`:
    a task says how it pools a metric, not what the metric is); a metric the catalogue does not know, or a direction
    that contradicts it, is a ``TypeError`` naming the task (a defect of the task, not of the run)."""
    out = []
    for spec in metric_list:
        if not isinstance(spec, dict) or "metric" not in spec:
            raise TypeError(f"task {task}: a metric_list entry without a metric name: {spec!r}")
        info = metric_info(spec["metric"])
        if info is None:
            raise TypeError(f"task {task}: metric {spec['metric']!r} is not in harness/metrics/catalogue.py; declare "
                            "what it is there")
        if spec.get("higher_is_better", info.higher_is_better) != info.higher_is_better:
            raise TypeError(f"task {task}: metric {spec['metric']!r} says higher_is_better "
                            f"{spec['higher_is_better']}, the catalogue {info.higher_is_better}")
        out.append({**spec, "higher_is_better": info.higher_is_better})
    return out


class PresentItems:
    """An lm-eval aggregation over the documents that have the metric (:class:`LchTask`: the others report None).

    ``fn`` aggregates the items present; with none present the value is what ``fn`` makes of no items (a count: 0)
    or, where it has none (a mean), NaN, so that a group averaging it does not break; such a metric is left out of the
    results (nothing to report: a depth cell no sample fell in, a score every sample of which was skipped). lm-eval gives a standard error only to aggregations it knows by identity, so for its own
    ``mean`` the same closed form (``mean_stderr``) is computed here; the count and standard error go to ``record``
    (the task's metadata, :data:`harness.core.results.AGGREGATED`), which :func:`harness.plugin.finish_results.
    finish_results` moves into the results."""

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
