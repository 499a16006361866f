"""Scores on the samples every run scored: which documents a run scored for each metric, and a metric recomputed
over a subset of them by the rule that made it.

Runs of one task can score different documents: a truncation policy of ``skip`` leaves over-long samples unscored
(another model's tokenizer makes other samples over-long), a judge's unparsable replies are dropped. Their
aggregates are then means over different samples, and a difference between them mixes the models with the samples.

* A document *scored* a metric when its logged sample holds a number for it (or a ``[sum, count]`` pair: what pooled
  metrics log per document); :func:`scored_values` reads them from the logged rows, per results key
  (``<metric>,<filter>``).
* Documents are the benchmark's samples, named by ``doc_id``: a task that fits its samples to the evaluated model's
  tokenizer (RULER, BABILong) gives two models the same sample (needle, question, length) as two texts, so the
  input hash is not part of a sample's identity here (whether runs were run alike is
  :mod:`harness.reporting.comparability`'s to check).
* :func:`scored_digest`: one short string per set of documents, so a results file can record which documents each
  metric rests on without listing them, and two runs' sets are compared by their digests.
* :func:`rule_of`: how the run pooled a metric, found by reproducing its reported value from its logged values:
  ``mean`` (the plain mean: scores, per-length scores, depth cells), ``pooled`` (``sum / count`` over ``[sum, count]``
  pairs) or ``pooled_exp`` (``exp(sum / count)``: a perplexity from summed NLLs); None when no rule reproduces it
  (a corpus-level metric, a weighted judge score): such a metric is not recomputed on a subset.
  Reproduced means equal to a relative ``1e-9``: the same numbers summed in another order.
* :func:`pooled_value` applies a rule to a subset; :func:`mean_stderr` is the standard error of a mean
  (``sd / sqrt(n)``, ``sd`` with ``n - 1``: lm-eval's), :func:`group_value` a group's mean of its tasks' values
  (plain, or weighted by the tasks' sizes: lm-eval's two group rules) over its tasks (:func:`group_leaves`), and
  :func:`group_stderr` its standard error.

These are lm-eval's formulas (``mean_stderr``, ``aggregate_subtask_metrics``, ``unweighted_mean_stderr``,
``pooled_sample_stderr``) written here on purpose: reports read results files in a layer that does not import
lm-eval, and lm-eval's releases do not all have them (``unweighted_mean_stderr`` is in 0.4.13, not in the main
branch its plugin discovery grew on); tests/reporting/test_common_samples.py holds them equal to lm-eval's.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Iterable, Mapping, Sequence

RULES = ("mean", "pooled", "pooled_exp")
REL_TOL = 1e-9


def doc_value(value: Any) -> float | tuple[float, float] | None:
    """A logged per-document value as a number, or a ``(sum, count)`` pair with a non-zero count; None otherwise
    (no value, a judged item awaiting its judge, text)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if (isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, (int, float)) and not
                                                                     isinstance(v, bool) for v in value) and value[1]):
        return float(value[0]), float(value[1])
    return None


def scored_values(rows: Iterable[Mapping]) -> dict[str, dict[Any, Any]]:
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
    if rule == "mean":
        return sum(values) / len(values) if values else math.nan
    if rule not in RULES:
        raise ValueError(f"pooling rule {rule!r} is not one of {RULES}")
    total, count = sum(v[0] for v in values), sum(v[1] for v in values)
    if not count:
        return math.nan
    return math.exp(total / count) if rule == "pooled_exp" else total / count


def reproduces(a: float, b: float) -> bool:
    """``a`` equals ``b`` to a relative :data:`REL_TOL` (the same numbers summed in another order), both finite."""
    return math.isfinite(a) and math.isfinite(b) and abs(a - b) <= REL_TOL * max(abs(a), abs(b), 1e-300)


def rule_of(values: Sequence[Any], reported: float) -> str | None:
    """The rule of :data:`RULES` that turns ``values`` (a run's logged values of one metric, in its logged order)
    into its ``reported`` aggregate; None when none does."""
    if not values:
        return None
    pairs = all(isinstance(v, tuple) for v in values)
    if not pairs and not all(isinstance(v, float) for v in values):
        return None
    for rule in (("pooled", "pooled_exp") if pairs else ("mean",)):
        if reproduces(pooled_value(values, rule), reported):
            return rule
    return None


def mean_stderr(values: Sequence[float]) -> float | None:
    """The standard error of the mean of ``values``: ``sd / sqrt(n)``, ``sd`` with ``n - 1`` degrees of freedom
    (lm-eval's ``mean_stderr``); None for fewer than 2 values."""
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
    """A group's value from its tasks' ``values``: their plain mean, or with ``weighted`` their mean weighted by
    ``sizes`` (the documents each rests on)."""
    if not values:
        return math.nan
    if not weighted:
        return sum(values) / len(values)
    total = sum(sizes)
    return sum(v * s for v, s in zip(values, sizes)) / total if total else math.nan
