"""Depth x length: a per-length task whose samples carry ``doc["depth_bucket"]`` (:mod:`harness.data.depth`) also
scores ``depth_<D>_len_<L>`` (mean x 100) and counts ``n_depth_<D>_len_<L>`` (summed) for every bucket of
:data:`~harness.data.depth.DEPTH_BUCKETS` at every length; a cell without samples is left out of the results."""

from __future__ import annotations

from lm_eval.api.metrics import mean as lm_eval_mean

from harness.data.depth import DEPTH_BUCKETS, cell_metric
from harness.metrics.catalogue import COUNT_PREFIX, DEPTH_PREFIX
from harness.metrics.pooling import total
from harness.metrics.support import Support


class DepthScores:
    """Mixin placed before ``PerLengthTask`` in the bases; :meth:`has_depth` says whether the samples record a depth."""

    def has_depth(self) -> bool:
        return True

    def extra_metrics(self, meta: dict) -> list[dict]:
        out = super().extra_metrics(meta)  # type: ignore[misc]
        if not self.has_depth():
            return out
        cells = [cell_metric(b, self.label(x)) for x in self.options.length_list() for b in DEPTH_BUCKETS]  # type: ignore[attr-defined]
        return (
            out
            + [{"metric": name, "aggregation": lm_eval_mean} for name in cells]
            + [{"metric": COUNT_PREFIX + name, "aggregation": total} for name in cells]
        )

    def support(self, metrics: list[str]) -> list[Support]:
        """No caution per depth cell: a cell breaks down its length's score, whose own support stands."""
        return [s for s in super().support(metrics) if not s.metric.startswith(DEPTH_PREFIX)]  # type: ignore[misc]

    def score_document(self, doc: dict, results: list) -> dict:
        out = super().score_document(doc, results)  # type: ignore[misc]
        if self.has_depth() and doc.get("depth_bucket") is not None:
            name = cell_metric(doc["depth_bucket"], doc["length"])
            out.update({name: out["score"], COUNT_PREFIX + name: 1})
        return out
