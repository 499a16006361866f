"""Our tasks' scorer where lm-eval's tasks score through registered scorers (the 0.5 line): lm-eval's pipeline
(filter, the task's ``process_results``, reduction) with our metric list, none looked up in lm-eval's metric registry
(a warning per name), and 0.4.13's aggregation: each metric by the task's ``aggregation()`` (a ``PARTIAL`` task's over
the documents that have it), a stderr only where that is lm-eval's ``mean`` (its closed form, over two or more values),
``"N/A"`` otherwise (``metric_lists.pooling_of`` admits only ours and lm-eval's ``mean``; ours declare no stderr,
where the 0.5 line would bootstrap every one). Imported by :func:`~harness.tasks.lm_eval_api.task_scorer`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lm_eval.api.metrics import Metric, mean, mean_stderr
from lm_eval.api.registry import get_aggregation, register_scorer
from lm_eval.scorers import MetricKey, Scorer

NAME = "lch_harness"


def _from_process_results(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("an lch-harness metric is computed by its task's process_results, never by a metric function")


@register_scorer(NAME)
class LchScorer(Scorer):
    """lm-eval's scorer, with our metrics and aggregation (module docstring)."""

    @classmethod
    def _resolve_metrics(cls, metric_cfg: Sequence[Any], output_type: str) -> list[Metric]:
        out = []
        for spec in metric_cfg:
            if isinstance(spec, Metric):
                out.append(spec)
                continue
            aggregation = spec.get("aggregation")
            out.append(
                Metric(
                    name=spec["metric"],
                    fn=_from_process_results,
                    aggregation=get_aggregation(aggregation) if isinstance(aggregation, str) else aggregation,
                    higher_is_better=spec.get("higher_is_better", True),
                    output_type={output_type} if output_type else {"generate_until"},
                )
            )
        return out

    def aggregate(
        self,
        reduced_docs: Mapping[int, Mapping[str, Any]],
        bootstrap_iters: int | None = 100000,
        aggregation_overrides: dict[str, Any] | None = None,
    ) -> tuple[dict[str, Any], int]:
        """``({"<metric>,<scorer>": value, "<metric>_stderr,<scorer>": stderr}, documents)``, the task's aggregations
        (``aggregation_overrides``: lm-eval passes the task's ``aggregation()``) first."""
        values: dict[str, list] = {}
        for doc in reduced_docs.values():
            for name, value in doc.items():
                values.setdefault(name, []).append(value)
        declared = {m.name: m.aggregation for m in self.metrics or []}
        out: dict[str, Any] = {}
        for name, items in values.items():
            fn = (aggregation_overrides or {}).get(name) or declared.get(name) or mean
            out[str(MetricKey(name, self.name))] = fn(items)
            closed_form = fn is mean and isinstance(bootstrap_iters, int) and bootstrap_iters > 0 and len(items) > 1
            out[str(MetricKey(name, self.name, is_stderr=True))] = mean_stderr(items) if closed_form else "N/A"
        return out, max((len(items) for items in values.values()), default=0)
