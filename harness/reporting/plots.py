"""``lch plot context`` (score vs context length, as PNG) and what every figure shares: :func:`pyplot`,
:func:`save_png`, :data:`SCORE_RANGE`, :func:`latest_having`. Missing values are left out, never drawn as zeros."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

from harness.core.errors import UsageError
from harness.core.files import savefig_atomic
from harness.metrics.context_length import (
    RELATIVE_SHARE,
    RULER_THRESHOLD,
    Z95,
    LengthPoint,
    effective_length,
    relative_effective_length,
)
from harness.reporting.curves import length_points
from harness.reporting.labels import run_labels, split_shared
from harness.reporting.runs import Run, latest_per_configuration


def context_curves(runs: list[Run], task: str) -> dict[str, list[LengthPoint]]:
    """``{run label: points sorted by length}`` from ``<task>/len_<L>`` of the latest run of each configuration that
    has any; ``UsageError`` when none has."""
    curves = latest_having(runs, lambda run: length_points(run, task))
    if not curves:
        raise UsageError(
            f"no run has per-length metrics {task}/len_<length> (RULER / BABILong tasks and groups report them)"
        )
    return curves


def latest_having(runs: list[Run], read: Callable[[Run], list]) -> dict[str, list]:
    """``{run label: read(run)}`` of the latest run of each configuration where ``read`` finds something."""
    found = [(run, items) for run in latest_per_configuration(runs) if (items := read(run))]
    return dict(zip(run_labels([run for run, _ in found]), [items for _, items in found]))


def pyplot():
    """matplotlib's pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_png(fig, path: str | Path) -> Path:
    """Lays out, writes and closes ``fig``; parent folders are created."""
    fig.tight_layout()
    path = savefig_atomic(fig, path)
    pyplot().close(fig)
    return path


_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


_LINES = ("-", "--", "-.", ":")


SCORE_RANGE = (0.0, 100.0)  # the range of a per-length score (<task>/len_<L>: points out of 100)


def plot_context(
    curves_by_task: dict[str, dict[str, list[LengthPoint]]],
    path: str | Path,
    thresholds: dict[str, float] | None = None,
) -> Path:
    """Writes :func:`context_figure` as PNG."""
    return save_png(context_figure(curves_by_task, thresholds), path)


def context_figure(curves_by_task: dict[str, dict[str, list[LengthPoint]]], thresholds: dict[str, float] | None = None):
    """One panel per task: score vs context length (evenly spaced in token order, the task's names), a line per
    configuration with 95 % bars (:func:`confidence_bars`) and each point's n; the legend's title gives each line's
    effective lengths, absolute (at ``thresholds[task]``, RULER's where none) and relative."""
    plt = pyplot()
    n = len(curves_by_task)
    fig, axes = plt.subplots(1, n, figsize=(5.5 * n, 4.2), dpi=120, squeeze=False)
    for ax, (task, curves) in zip(axes[0], curves_by_task.items()):
        every = [p for points in curves.values() for p in points]
        names = {p.tokens: p.name for p in every}
        order = sorted(names)
        where = {tokens: i for i, tokens in enumerate(order)}
        shared, short = split_shared(list(curves))
        bounded = bool(every) and all(SCORE_RANGE[0] <= p.score <= SCORE_RANGE[1] for p in every)
        # n under a length when every line has the same there, else beside each point
        counts = {t: {p.n for p in every if p.tokens == t} for t in order}
        common_n = {t: next(iter(c)) for t, c in counts.items() if len(c) == 1}
        # a small x shift and a marker / line style per series keep series with equal scores visible
        dodge = 0.04 if len(curves) > 1 else 0.0
        bar = (thresholds or {}).get(task, RULER_THRESHOLD)
        effective = []  # each line's effective lengths: absolute (the task's bar) and relative, written in the panel
        for i, (label, points) in enumerate(zip(short, curves.values())):
            found = (effective_length(points, bar), relative_effective_length(points))
            effective.append(
                f"{label or 'run'}: {found[0].name or 'none'} / {found[1].name or 'none'}"
                + (" (not monotone within 95% CIs)" if found[0].caution else "")
            )
            shift = (i - (len(curves) - 1) / 2) * dodge
            xs = [where[p.tokens] + shift for p in points]
            low, high = confidence_bars(points, bounded)
            ax.errorbar(
                xs,
                [p.score for p in points],
                yerr=[low, high] if any(low + high) else None,
                marker=_MARKERS[i % len(_MARKERS)],
                linestyle=_LINES[i % len(_LINES)],
                capsize=3,
                label=label,
                alpha=0.85,
            )
            for x, p in zip(xs, points):
                if p.tokens not in common_n and p.n is not None:
                    ax.annotate(f"n={p.n}", (x, p.score), textcoords="offset points", xytext=(4, -9), fontsize=6)
        ax.set_xticks(
            range(len(order)), [names[t] + (f"\nn={common_n[t]}" if common_n.get(t) is not None else "") for t in order]
        )
        barred = [p.stderr is not None and math.isfinite(p.stderr) and p.stderr > 0 for p in every]
        # a point without a bar says why: no standard error (one sample, or results without one) or a zero one
        notes = [
            *(["n: samples per point"] if any(p.n is not None for p in every) else []),
            *(["bars: 95% CI"] if any(barred) else []),
            *(["no bar: n = 1, samples alike or no stderr"] if not all(barred) else []),
        ]

        ax.set_xlabel("context length (tokens)" + ("\n" + "; ".join(notes) if notes else ""), fontsize=8)
        if bounded:
            # the whole 0-100 range, so that 95 vs 100 is not drawn as a collapse; the margin keeps 0 and 100 visible
            bottom, top = SCORE_RANGE
            margin = (top - bottom) * 0.03
            ax.set_ylim(bottom - margin, top + margin)
            ax.set_ylabel(f"score ({bottom:g}-{top:g})")
        else:
            ax.set_ylabel("score")
        ax.set_title(task + (f"\n{shared}" if shared else ""), fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(
            fontsize=7,
            title_fontsize=6,
            title=f"effective length (>= {bar:g} / >= "
            f"{RELATIVE_SHARE:.0%} of the shortest's):\n" + "\n".join(effective),
        )
    return fig


def confidence_bars(points: Sequence[LengthPoint], bounded: bool) -> tuple[list[float], list[float]]:
    """``(below, above)``: each point's 95 % interval ``score -/+ 1.96 stderr`` as distances, cut to
    :data:`SCORE_RANGE` when ``bounded``; 0 without a stderr."""
    below, above = [], []
    for p in points:
        half = Z95 * p.stderr if p.stderr is not None and math.isfinite(p.stderr) else 0.0
        below.append(min(half, p.score - SCORE_RANGE[0]) if bounded else half)
        above.append(min(half, SCORE_RANGE[1] - p.score) if bounded else half)
    return below, above
