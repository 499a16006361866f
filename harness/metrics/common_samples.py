"""Scores on the samples every run scored: which documents (by ``doc_id``) a run scored for each metric, and a metric
recomputed over a subset by the pooling its task declared (:func:`pooled_value`). Also lm-eval's stderr and group
formulas, for reports that do not import lm-eval (tests/reporting/test_common_samples.py holds them equal to
lm-eval's)."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from harness.metrics.pooling import RULES, mean, pooled_mean, pooled_perplexity


def doc_value(value: Any) -> float | tuple[float, float] | None:
    """A logged per-document value as a number, or a ``(sum, count)`` pair with a non-zero count; None otherwise."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
        and value[1]
    ):
        return float(value[0]), float(value[1])
    return None


def scored_values(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[Any, Any]]:
    """``{"<metric>,<filter>": {doc_id: value}}`` of lm-eval's logged rows of one task (in their order): each metric a
    row lists (``metrics``) with a value :func:`doc_value` reads, under the row's filter (``none`` when absent)."""
    out: dict[str, dict[Any, Any]] = {}
    for row in rows:
        for name in row.get("metrics") or ():
            value = doc_value(row.get(name))
            if value is not None:
                out.setdefault(f"{name},{row.get('filter', 'none')}", {})[row["doc_id"]] = value
    return out


def scored_digest(docs: Iterable[Any]) -> str:
    """16 hex digits naming a set of documents by their ids: equal sets, equal digests, whatever the order."""
    key = sorted(json.dumps(doc_id) for doc_id in docs)
    return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]


def pooled_value(values: Sequence[Any], rule: str) -> float:
    """``values`` pooled by ``rule`` (:data:`RULES`): their mean, or ``sum of sums / sum of counts`` (then ``exp``
    of it for ``pooled_exp``); NaN when there is nothing to pool."""
    if rule not in RULES:
        raise ValueError(f"pooling rule {rule!r} is not one of {RULES}")
    if rule == "mean":
        return mean(values)
    return pooled_mean(values) if rule == "pooled" else pooled_perplexity(values)


def mean_stderr(values: Sequence[float]) -> float | None:
    """``sd / sqrt(n)``, ``sd`` with ``n - 1`` degrees of freedom (lm-eval's ``mean_stderr``); None for n < 2."""
    n = len(values)
    if n < 2:
        return None
    mu = sum(values) / n
    return math.sqrt(sum((v - mu) ** 2 for v in values) / (n - 1) / n)


def group_stderr(stderrs: Sequence[float], sizes: Sequence[int], weighted: bool) -> float:
    """The standard error of :func:`group_value` from its tasks' standard errors ``se_i`` and sizes ``n_i``:
    unweighted, ``sqrt(sum se_i^2) / k`` (k independent means averaged); weighted by size, the pooled sample
    variance ``sqrt(sum (n_i - 1) n_i se_i^2 / (sum n_i - k) / sum n_i)``."""
    if not weighted:
        return math.sqrt(sum(e * e for e in stderrs)) / len(stderrs)
    total = sum(sizes)
    pooled = sum((n - 1) * e * e * n for e, n in zip(stderrs, sizes)) / (total - len(sizes))
    return math.sqrt(pooled / total)


def group_leaves(group: str, subtasks: Mapping[str, Sequence[str]]) -> list[str]:
    """The tasks of ``group`` (lm-eval's ``group_subtasks``: group -> its members), nested groups flattened."""
    out: list[str] = []
    for child in subtasks.get(group, []):
        out += group_leaves(child, subtasks) if child in subtasks else [child]
    return out


def group_value(values: Sequence[float], sizes: Sequence[int], weighted: bool) -> float:
    """A group's value: the plain mean of its tasks' ``values``, or with ``weighted`` the mean weighted by ``sizes``."""
    if not values:
        return math.nan
    if not weighted:
        return sum(values) / len(values)
    total = sum(sizes)
    return sum(v * s for v, s in zip(values, sizes)) / total if total else math.nan
