"""Aggregations that refuse to report a meaningless number: a perplexity over no scored token is an error
that says what to do, not a NaN with exit 0."""

from __future__ import annotations

from typing import Sequence

from harness.errors import UsageError
from harness.metrics.pooling import pooled_perplexity


def perplexity(items: Sequence[tuple[float, float]]) -> float:
    """:func:`harness.metrics.pooling.pooled_perplexity` of the documents' ``(nll_sum, n_tokens)``; raises
    when no document had a token to score (every document empty, or skipped by ``min_tokens``)."""
    if not any(n for _, n in items):
        raise UsageError(f"none of the {len(items)} documents could be scored (each was empty or shorter than "
                         "min_tokens; docs_skipped counts them): give longer documents or lower min_tokens")
    return pooled_perplexity(items)
