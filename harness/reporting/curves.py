"""Score-vs-length curves of a run from its results (``<task>/len_<L>``) and their effective context lengths
(:mod:`harness.metrics.context_length`) at the task's declared ``effective_threshold``, else RULER's bar."""

from __future__ import annotations

from harness.data.lengths import length_tokens
from harness.metrics.catalogue import LENGTH_PREFIX
from harness.metrics.context_length import (
    EffectiveLength,
    LengthPoint,
    curve_points,
    effective_lengths as curve_effective_lengths,
    shared_threshold,
)
from harness.reporting.runs import Run


def length_points(run: Run, task: str) -> list[LengthPoint]:
    """The run's points of ``task`` sorted by length: each ``<task>/len_<L>`` that is a number and names a length."""
    return curve_points(task, run.metrics, run.stderrs, run.subtasks, length_tokens)  # its UsageError is a ValueError


def curve_tasks(runs: list[Run]) -> list[str]:
    """The tasks and groups with per-length scores in any of ``runs``, sorted."""
    return sorted(
        {
            m.split("/", 1)[0]
            for r in runs
            for m in r.metrics
            if "/" in m and m.split("/", 1)[1].startswith(LENGTH_PREFIX) and "," not in m
        }
    )


def declared_threshold(run: Run, task: str) -> float:
    """The threshold ``task`` declared in ``run`` (a group: the one its tasks share), else RULER's."""
    return shared_threshold(
        run.configurations.get(t, {}).get("effective_threshold") for t in run.subtasks.get(task) or [task]
    )


def effective_lengths(run: Run, task: str) -> tuple[EffectiveLength, EffectiveLength] | None:
    """``(absolute, relative)`` effective lengths of the run's ``task`` curve at its declared threshold; None when it
    has no point."""
    return curve_effective_lengths(length_points(run, task), declared_threshold(run, task))
