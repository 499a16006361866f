"""Score-vs-length curves of a run, read from its results: the points of a task or group (``<task>/len_<L>`` with
their stderr and sample counts) and their effective context lengths (:mod:`harness.metrics.context_length`), for
``lch plot context`` and ``lch leaderboard``."""

from __future__ import annotations

import math

from harness.data.lengths import length_tokens
from harness.metrics.catalogue import LENGTH_PREFIX
from harness.metrics.context_length import (RULER_THRESHOLD, EffectiveLength, LengthPoint, effective_length,
                                            relative_effective_length)
from harness.reporting.runs import Run


def samples_at(run: Run, task: str, name: str) -> int | None:
    """How many samples ``<task>/len_<name>`` averages: the task's ``n_len_<name>``, or the sum over a group's tasks
    (None when any is unrecorded)."""
    count = run.metrics.get(f"{task}/n_len_{name}")
    if count is not None and math.isfinite(count):
        return int(count)
    children = run.subtasks.get(task)
    if not children:
        return None
    counts = [samples_at(run, child, name) for child in children]
    return None if any(c is None for c in counts) else sum(c for c in counts if c is not None)


def length_points(run: Run, task: str) -> list[LengthPoint]:
    """The run's points of ``task`` sorted by length: each ``<task>/len_<L>`` that is a number and names a length."""
    prefix = f"{task}/{LENGTH_PREFIX}"
    points = []
    for metric, value in run.metrics.items():
        if not metric.startswith(prefix) or "," in metric or math.isnan(value):
            continue
        name = metric[len(prefix):]
        try:
            tokens = length_tokens(name)
        except ValueError:
            continue
        points.append(LengthPoint(tokens, name, value, run.stderrs.get(metric), samples_at(run, task, name)))
    return sorted(points)


def curve_tasks(runs: list[Run]) -> list[str]:
    """The tasks and groups with per-length scores in any of ``runs``, sorted."""
    return sorted({m.split("/", 1)[0] for r in runs for m in r.metrics
                   if "/" in m and m.split("/", 1)[1].startswith(LENGTH_PREFIX) and "," not in m})


def effective_lengths(run: Run, task: str, threshold: float = RULER_THRESHOLD
                      ) -> tuple[EffectiveLength, EffectiveLength] | None:
    """``(absolute, relative)`` effective lengths of the run's ``task`` curve; None when it has no point."""
    points = length_points(run, task)
    if not points:
        return None
    return effective_length(points, threshold), relative_effective_length(points)
