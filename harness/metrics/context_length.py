"""Effective context length of a score-vs-length curve (``len_<L>`` scores out of 100, with stderrs and counts):
**absolute** (RULER): the longest length whose score and every shorter length's are at least a threshold
(:data:`RULER_THRESHOLD` by default); **relative** (NoLiMa): the same at :data:`RELATIVE_SHARE` of the shortest
length's score (none when that is 0). ``None`` when the shortest length is already below. A longer length scoring above
a shorter one by more than the 95 % interval of their difference makes the curve not monotone: a caution."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.core.options import option
from harness.metrics.catalogue import COUNT_PREFIX, LENGTH_PREFIX

RULER_THRESHOLD = 85.6  # RULER: Llama-2-7B's average score at 4k tokens, the leaderboard's bar
RELATIVE_SHARE = 0.85  # NoLiMa: the longest length keeping 85 % of the model's own short-length score
Z95 = 1.959964  # the normal quantile of a two-sided 95 % interval


@dataclass(frozen=True)
class CurveOptions:
    """The bar a task's per-length scores are read against (its effective length; module docstring)."""

    effective_threshold: float = option(
        RULER_THRESHOLD,
        "score (0-100) a length and every shorter one must reach to "
        "count in the effective length (default RULER's bar, Llama-2-7B at 4k)",
        low=0.0,
        high=100.0,
        measures=False,
        cache_key="no",
    )  # how scores are read, not made


@dataclass(frozen=True, order=True)
class LengthPoint:
    """One point of a curve: the length in tokens, as the task names it (``4096``, ``4k``), the score, its standard
    error and the samples it averages (None: not recorded)."""

    tokens: int
    name: str
    score: float
    stderr: float | None = None
    n: int | None = None


@dataclass(frozen=True)
class EffectiveLength:
    """The effective length of one curve under one threshold (``kind``: ``absolute`` | ``relative``): the length (None
    when the shortest is already below), the lengths and sample counts it rests on, and the monotonicity caution."""

    kind: str
    threshold: float
    name: str | None
    tokens: int | None
    lengths: tuple[str, ...]
    n: tuple[int | None, ...]
    caution: str | None = None

    def label(self) -> str:
        """``2k (>= 85.6 at 1k, 2k; n 25, 25)``, or ``below 85.6 at 1k`` when none."""
        counts = ", ".join("?" if n is None else str(n) for n in self.n)
        where = f"{self.threshold:g} at {', '.join(self.lengths)}; n {counts}"
        return f"{self.name} (>= {where})" if self.name else f"none (below {where})"


def _rises(points: Sequence[LengthPoint]) -> list[tuple[LengthPoint, LengthPoint]]:
    """Pairs (shorter, longer) where the longer scores above the shorter by more than ``Z95 * sqrt(se_s^2 + se_l^2)``;
    none where a standard error is unknown."""
    return [
        (short, long)
        for i, short in enumerate(points)
        for long in points[i + 1 :]
        if short.stderr is not None
        and long.stderr is not None
        and long.score - short.score > Z95 * math.sqrt(short.stderr**2 + long.stderr**2)
    ]


def effective_length(points: Sequence[LengthPoint], threshold: float, kind: str = "absolute") -> EffectiveLength:
    """The longest length whose score, and every shorter length's, is at least ``threshold``; empty: ``ValueError``."""
    curve = sorted(points)
    if not curve:
        raise ValueError("an effective length needs at least one length with a score")
    passed = None
    for point in curve:
        if point.score < threshold or math.isnan(point.score):
            break
        passed = point
    rises = _rises(curve)
    caution = None
    if rises:
        short, long = rises[0]
        caution = (
            f"not monotone: {long.name} scores {long.score:.1f} above {short.name}'s {short.score:.1f} beyond "
            "their 95 % intervals"
        )
    return EffectiveLength(
        kind,
        threshold,
        passed.name if passed else None,
        passed.tokens if passed else None,
        tuple(p.name for p in curve),
        tuple(p.n for p in curve),
        caution,
    )


def relative_effective_length(points: Sequence[LengthPoint], share: float = RELATIVE_SHARE) -> EffectiveLength:
    """:func:`effective_length` with the threshold ``share`` x the score at the shortest length."""
    curve = sorted(points)
    if not curve:
        raise ValueError("an effective length needs at least one length with a score")
    if not curve[0].score > 0:  # nothing to keep a share of: every later length would pass a threshold of 0
        return EffectiveLength(
            "relative",
            0.0,
            None,
            None,
            tuple(p.name for p in curve),
            tuple(p.n for p in curve),
            f"no relative length: {curve[0].name} scores {curve[0].score:g}",
        )
    return effective_length(curve, share * curve[0].score, "relative")


def shared_threshold(declared: Iterable[Any]) -> float:
    """The ``effective_threshold`` a curve's tasks declared (a group's: the one its tasks share), else RULER's."""
    values = set(declared)
    value = values.pop() if len(values) == 1 else None
    return float(value) if isinstance(value, (int, float)) else RULER_THRESHOLD


def curve_caution(task: str, caution: str) -> str:
    """The sentence a board and a results file give a curve's caution (:attr:`EffectiveLength.caution`)."""
    return f"{task} effective length: {caution}"


def is_curve_caution(sentence: str, task: str) -> bool:
    """Whether ``sentence`` is a caution of ``task``'s curve (:func:`curve_caution`)."""
    return sentence.startswith(curve_caution(task, ""))


def samples_at(task: str, name: str, metrics: Mapping[str, float], subtasks: Mapping[str, Sequence[str]]) -> int | None:
    """How many samples ``<task>/len_<name>`` averages: the task's ``<task>/n_len_<name>`` in ``metrics``, or the sum
    over a group's tasks (``subtasks``: group -> its tasks); None when any is unrecorded."""
    count = metrics.get(f"{task}/{COUNT_PREFIX}{LENGTH_PREFIX}{name}")
    if count is not None and math.isfinite(count):
        return int(count)
    children = subtasks.get(task)
    if not children:
        return None
    counts = [samples_at(child, name, metrics, subtasks) for child in children]
    return None if any(c is None for c in counts) else sum(c for c in counts if c is not None)


def curve_points(
    task: str,
    metrics: Mapping[str, float],
    stderrs: Mapping[str, float],
    subtasks: Mapping[str, Sequence[str]],
    tokens: Callable[[str], int],
) -> list[LengthPoint]:
    """The curve of ``task``, sorted by length: each numeric ``<task>/len_<L>`` of ``metrics``, its stderr and sample
    count; ``tokens`` reads a length's name (``4k`` -> 4096), raising ``ValueError`` for a name that is no length."""
    prefix = f"{task}/{LENGTH_PREFIX}"
    points = []
    for metric, value in metrics.items():
        if not metric.startswith(prefix) or "," in metric or math.isnan(value):
            continue
        name = metric[len(prefix) :]
        try:
            length = tokens(name)
        except ValueError:
            continue
        points.append(LengthPoint(length, name, value, stderrs.get(metric), samples_at(task, name, metrics, subtasks)))
    return sorted(points)


def effective_lengths(
    points: Sequence[LengthPoint], threshold: float = RULER_THRESHOLD
) -> tuple[EffectiveLength, EffectiveLength] | None:
    """``(absolute at threshold, relative)`` effective lengths of a curve; None when it has no point."""
    if not points:
        return None
    return effective_length(points, threshold), relative_effective_length(points)
