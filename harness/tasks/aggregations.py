"""Our lm-eval aggregations: a perplexity over no scored token is an error that says what to do, never a NaN."""

from __future__ import annotations

from collections.abc import Sequence

from harness.core.errors import UsageError
from harness.metrics.pooling import pooled_perplexity, pools_as


@pools_as("pooled_exp")
def perplexity(items: Sequence[tuple[float, float]]) -> float:
    """:func:`harness.metrics.pooling.pooled_perplexity` of the documents' ``(nll_sum, n_tokens)``; raises
    when no document had a token to score (every document empty, or skipped by ``min_tokens``)."""
    if not any(n for _, n in items):
        raise UsageError(
            f"none of the {len(items)} documents could be scored (each was empty or shorter than "
            "min_tokens; docs_skipped counts them): give longer documents or lower min_tokens"
        )
    return pooled_perplexity(items)


@pools_as("pooled_exp")
def key_perplexity(items: Sequence[tuple[float, float]]) -> float:
    """LongPPL: :func:`harness.metrics.pooling.pooled_perplexity` of the documents' ``(key nll_sum, n_key)``; raises
    when no document has a key token (fewer than :data:`~harness.longppl.formulas.MIN_KEY_TOKENS` is a caution)."""
    n_key = sum(n for _, n in items)
    if not n_key:
        raise UsageError(
            f"LongPPL has no key token in any of the {len(items)} documents under the evaluated "
            "tokenizer (key_spans_dropped counts the evaluator's spans no evaluated token lies inside): "
            "LongPPL means nothing here; give longer documents or lower trunc_len / sliding_window"
        )
    return pooled_perplexity(items)
