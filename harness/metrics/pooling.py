"""Pooling per-document sums into dataset metrics (lm-eval aggregations). Perplexities are token-weighted in log
space: ``PPL = exp( - sum_{d,t} lp_{d,t} / sum_d n_d )`` over documents ``d`` with per-token log-probabilities
``lp_{d,t}``; LongPPL pools its key tokens the same way."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])
POOLING = "pooling"  # the attribute an aggregation declares its pooling under
# how per-document values pool over any subset of documents: a mean, sum / count over (sum, count) pairs, exp of it
# (a perplexity from summed NLLs): the rules a score is recomputed by on a subset; a sum (counts); None: not over
# documents (corpus-level, weighted across categories)
RULES = ("mean", "pooled", "pooled_exp")
POOLINGS = (*RULES, "sum", None)


def pools_as(rule: str | None) -> Callable[[F], F]:
    """Declare on an aggregation how its per-document values pool over any subset of documents (:data:`POOLINGS`):
    what a task records (``lch_metric_pooling``) and ``--common`` and ``lch agree`` recompute by."""
    if rule not in POOLINGS:
        raise ValueError(f"pooling {rule!r} is not one of {POOLINGS}")

    def declare(aggregation: F) -> F:
        setattr(aggregation, POOLING, rule)
        return aggregation

    return declare


def nll_sum(logprobs: Sequence[float]) -> tuple[float, int]:
    """``(-sum(logprobs), len(logprobs))`` for one document."""
    return -math.fsum(logprobs), len(logprobs)


@pools_as("pooled_exp")
def pooled_perplexity(items: Iterable[tuple[float, float]]) -> float:
    """``exp(sum nll / sum n)`` over ``(nll_sum, n_tokens)`` pairs; NaN when no token was scored."""
    return math.exp(pooled_mean(items))


@pools_as("mean")
def mean(items: Sequence[float]) -> float:
    """Plain mean, as an lm-eval aggregation; NaN when no document reported the metric."""
    return sum(items) / len(items) if items else math.nan


@pools_as("sum")
def total(items: Iterable[float]) -> float:
    """Plain sum, as an lm-eval aggregation (counts of tokens, skipped documents)."""
    return sum(items)


@pools_as("pooled")
def pooled_mean(items: Iterable[tuple[float, float]]) -> float:
    """``sum(values) / sum(counts)`` over ``(sum, count)`` pairs; NaN when empty."""
    items = list(items)
    total_n = sum(n for _, n in items)
    return sum(value for value, _ in items) / total_n if total_n else float("nan")
