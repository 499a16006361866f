"""Pooling per-document sums into dataset metrics (lm-eval aggregations). Perplexities are token-weighted in log
space: ``PPL = exp( - sum_{d,t} lp_{d,t} / sum_d n_d )`` over documents ``d`` with per-token log-probabilities
``lp_{d,t}``; LongPPL pools its key tokens the same way."""

from __future__ import annotations

import math
from typing import Iterable, Sequence


def nll_sum(logprobs: Sequence[float]) -> tuple[float, int]:
    """``(-sum(logprobs), len(logprobs))`` for one document."""
    return -math.fsum(logprobs), len(logprobs)


def pooled_perplexity(items: Iterable[tuple[float, int]]) -> float:
    """``exp(sum nll / sum n)`` over ``(nll_sum, n_tokens)`` pairs; NaN when no token was scored."""
    total_nll, total_n = 0.0, 0
    for nll, n in items:
        total_nll += nll
        total_n += n
    return math.exp(total_nll / total_n) if total_n else float("nan")


def mean(items: Sequence[float]) -> float:
    """Plain mean, as an lm-eval aggregation; NaN when no document reported the metric."""
    return sum(items) / len(items) if items else math.nan


def total(items: Iterable[float]) -> float:
    """Plain sum, as an lm-eval aggregation (counts of tokens, skipped documents)."""
    return sum(items)


def pooled_mean(items: Iterable[tuple[float, float]]) -> float:
    """``sum(values) / sum(counts)`` over ``(sum, count)`` pairs; NaN when empty."""
    total_sum, total_n = 0.0, 0.0
    for value, n in items:
        total_sum += value
        total_n += n
    return total_sum / total_n if total_n else float("nan")
