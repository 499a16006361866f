"""Aggregations that refuse to report a meaningless number: a perplexity over no scored token is an error
that says what to do, not a NaN with exit 0; and, after a run, the cautions of a metric that rests on a handful of
items (a LongPPL over 12 key tokens, a score over 1 sample: :mod:`harness.metrics.support`) written into the
results and the log."""

from __future__ import annotations

import logging
from typing import Sequence

from harness.errors import UsageError
from harness.metrics.pooling import pooled_perplexity
from harness.metrics.support import CAUTIONS_KEY, results_cautions

log = logging.getLogger(__name__)


def perplexity(items: Sequence[tuple[float, float]]) -> float:
    """:func:`harness.metrics.pooling.pooled_perplexity` of the documents' ``(nll_sum, n_tokens)``; raises
    when no document had a token to score (every document empty, or skipped by ``min_tokens``)."""
    if not any(n for _, n in items):
        raise UsageError(f"none of the {len(items)} documents could be scored (each was empty or shorter than "
                         "min_tokens; docs_skipped counts them): give longer documents or lower min_tokens")
    return pooled_perplexity(items)


def key_perplexity(items: Sequence[tuple[float, float]]) -> float:
    """LongPPL: :func:`harness.metrics.pooling.pooled_perplexity` of the documents' ``(key nll_sum, n_key)``.
    No key token in any document is an error (a LongPPL of nothing, never NaN); fewer than
    :data:`~harness.metrics.longppl.MIN_KEY_TOKENS` is a warning with the count (``n_key_tokens`` in the results
    holds it)."""
    n_key = sum(n for _, n in items)
    if not n_key:
        raise UsageError(f"LongPPL has no key token in any of the {len(items)} documents under the evaluated "
                         "tokenizer (key_spans_dropped counts the evaluator's spans no evaluated token lies inside): "
                         "LongPPL means nothing here; give longer documents or lower trunc_len / sliding_window")
    return pooled_perplexity(items)


def record_cautions(results: dict) -> dict[str, list[str]]:
    """The cautions of a run (:func:`harness.metrics.support.results_cautions`) written into lm-eval's results object
    under :data:`~harness.metrics.support.CAUTIONS_KEY` (``{}``: checked, none) and logged as warnings."""
    found = results_cautions(results)
    results[CAUTIONS_KEY] = found
    for sentences in found.values():
        for sentence in sentences:
            log.warning("caution: %s", sentence)
    return found


def finish_results(results: dict) -> dict:
    """What a run of ours adds to lm-eval's results object before its caller writes it: the cautions
    (:func:`record_cautions`)."""
    record_cautions(results)
    return results
