"""``lch plot``: the figures people expect from runs, as PNG (matplotlib, Agg).

* Score vs context length (:func:`context_curves`, :func:`plot_context`): one line per configuration, and in the
  legend's title each line's effective context lengths (:mod:`harness.metrics.context_length`: absolute at the task's declared bar (RULER's 85.6 by default),
  relative at 85 % of its shortest length's score; said where the curve is not monotone within its intervals)
  (latest run; the legend drops the words all configurations share, the title shows them), one panel
  per task or group, from the per-length metrics ``<task>/len_<L>`` that the RULER
  (token counts) and BABILong (k-labels, 1k = 1024 tokens) tasks and groups report. Bars are 95 % confidence
  intervals, ``1.96 x`` lm-eval's stderr (a normal approximation) cut to the score's range; each point's n (the
  samples it averages: ``<task>/n_len_<L>``, summed over a group's tasks) is written under its length when all
  lines share it, else beside the point. Lengths sit at evenly spaced positions in token order (they usually double, so this
  is a log2 axis that can also hold BABILong's ``0k``), labelled with the task's own names.
* Generation length and quality vs PIC ratio, the PIC paper, Fig. 1 (:func:`pic_points_from_runs` or
  :func:`pic_points_from_samples`, then :func:`pic_series`, :func:`plot_pic`): one panel per base model
  and PIC method, the ratio (s_cr or s_rr) on a log axis, length on the left axis in blue, quality on the
  right in red. A base model's run without PIC is drawn at ratio 1 on each of its lines: PIC with ratio 1
  is the identity for all three methods (g(m) = m; base b * 1).
* Depth x length (:func:`depth_grids`, :func:`plot_depth`): one heat map per configuration of one task's
  ``<task>/depth_<D>_len_<L>`` (with ``n_depth_<D>_len_<L>``): length across, depth bucket down, the score as colour.

Missing values are left out of a line, never drawn as zeros.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from harness.metrics.context_length import (RELATIVE_SHARE, RULER_THRESHOLD, Z95, LengthPoint, effective_length,
                                            relative_effective_length)
from harness.core.errors import UsageError
from harness.core.files import savefig_atomic
from harness.pic.inference import MODEL_ARGS, Inference
from harness.pic.methods import PIC_METHODS
from harness.reporting.labels import SEPARATOR, name_of, run_labels, split_shared
from harness.reporting.labels import inference_of
from harness.data.depth import read_cell_metric
from harness.reporting.curves import length_points
from harness.reporting.runs import Run, latest_per_configuration


def _plot_methods() -> list[str]:
    """The PIC methods that get a column: every registered one that changes the model, in registry order."""
    return [name for name, entry in PIC_METHODS.items() if entry.acts]




def context_curves(runs: list[Run], task: str) -> dict[str, list[LengthPoint]]:
    """``{run label: points sorted by length}`` from ``<task>/len_<L>`` of the latest run of each configuration;
    runs without any such metric are left out; labels from :mod:`harness.reporting.labels` (whole names: the figure
    moves what they share into its title). Raises ``UsageError`` when no run has one."""
    curves = latest_having(runs, lambda run: length_points(run, task))
    if not curves:
        raise UsageError(f"no run has per-length metrics {task}/len_<length> (RULER / BABILong tasks and groups report them)")
    return curves


def latest_having(runs: list[Run], read: Callable[[Run], list]) -> dict[str, list]:
    """``{run label: read(run)}`` of the latest run of each configuration for which ``read`` finds something, labels
    from :mod:`harness.reporting.labels`."""
    chosen, found = [], []
    for run in latest_per_configuration(runs):
        items = read(run)
        if items:
            chosen.append(run)
            found.append(items)
    return dict(zip(run_labels(chosen), found))


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


def plot_context(curves_by_task: dict[str, dict[str, list[LengthPoint]]], path: str | Path,
                 thresholds: dict[str, float] | None = None) -> Path:
    """Writes :func:`context_figure` as PNG."""
    return save_png(context_figure(curves_by_task, thresholds), path)


def context_figure(curves_by_task: dict[str, dict[str, list[LengthPoint]]], thresholds: dict[str, float] | None = None):
    """One panel per task: score (y) vs context length (x), one line per configuration, 95 % CI bars, n per point
    (module docstring); ``thresholds``: each task's declared effective-length bar (RULER's where none)."""
    plt = pyplot()
    n = len(curves_by_task)
    fig, axes = plt.subplots(1, n, figsize=(5.5 * n, 4.2), dpi=120, squeeze=False)
    for ax, (task, curves) in zip(axes[0], curves_by_task.items()):
        names = {p.tokens: p.name for points in curves.values() for p in points}
        order = sorted(names)
        where = {tokens: i for i, tokens in enumerate(order)}
        shared, short = split_shared(list(curves))
        scores = [p.score for points in curves.values() for p in points]
        bounded = bool(scores) and all(SCORE_RANGE[0] <= v <= SCORE_RANGE[1] for v in scores)
        # n under a length when every line has the same there, else beside each point
        counts = {t: {p.n for points in curves.values() for p in points if p.tokens == t} for t in order}
        common_n = {t: next(iter(c)) for t, c in counts.items() if len(c) == 1}
        # equal scores would draw one series over another: each series is shifted a little along x and has
        # its own marker and line style, so every one stays visible
        dodge = 0.04 if len(curves) > 1 else 0.0
        bar = (thresholds or {}).get(task, RULER_THRESHOLD)
        effective = []  # each line's effective lengths: absolute (the task's bar) and relative, written in the panel
        for i, (label, points) in enumerate(zip(short, curves.values())):
            found = (effective_length(points, bar), relative_effective_length(points))
            effective.append(f"{label or 'run'}: {found[0].name or 'none'} / {found[1].name or 'none'}"
                             + (" (not monotone within 95% CIs)" if found[0].caution else ""))
            shift = (i - (len(curves) - 1) / 2) * dodge
            xs = [where[p.tokens] + shift for p in points]
            low, high = confidence_bars(points, bounded)
            ax.errorbar(xs, [p.score for p in points], yerr=[low, high] if any(low + high) else None,
                        marker=_MARKERS[i % len(_MARKERS)], linestyle=_LINES[i % len(_LINES)], capsize=3,
                        label=label, alpha=0.85)
            for x, p in zip(xs, points):
                if p.tokens not in common_n and p.n is not None:
                    ax.annotate(f"n={p.n}", (x, p.score), textcoords="offset points", xytext=(4, -9), fontsize=6)
        ax.set_xticks(range(len(order)), [names[t] + (f"\nn={common_n[t]}" if common_n.get(t) is not None else "")
                                          for t in order])
        known_n = any(p.n is not None for points in curves.values() for p in points)
        barred = any(p.stderr is not None and math.isfinite(p.stderr) and p.stderr > 0
                     for points in curves.values() for p in points)
        # a point without a bar says why: no standard error (one sample, or results without one) or a zero one
        bare = any(not (p.stderr is not None and math.isfinite(p.stderr) and p.stderr > 0)
                   for points in curves.values() for p in points)
        notes = [*(["n: samples per point"] if known_n else []), *(["bars: 95% CI"] if barred else []),
                 *(["no bar: n = 1, samples alike or no stderr"] if bare else [])]

        ax.set_xlabel("context length (tokens)" + ("\n" + "; ".join(notes) if notes else ""), fontsize=8)
        if bounded:
            # per-length scores are points out of 100 (RULER, BABILong): the axis shows the whole range, so that
            # 95 vs 100 is not drawn as a collapse; the margin keeps markers at 0 and 100 visible
            low, high = SCORE_RANGE
            margin = (high - low) * 0.03
            ax.set_ylim(low - margin, high + margin)
            ax.set_ylabel(f"score ({low:g}-{high:g})")
        else:
            ax.set_ylabel("score")
        ax.set_title(task + (f"\n{shared}" if shared else ""), fontsize=10)
        ax.grid(alpha=0.3)
        # the legend's title: each line's effective lengths (absolute / relative), its entries the lines
        ax.legend(fontsize=7, title_fontsize=6, title=f"effective length (>= {bar:g} / >= "
                  f"{RELATIVE_SHARE:.0%} of the shortest's):\n" + "\n".join(effective))
    return fig


def confidence_bars(points: Sequence[LengthPoint], bounded: bool) -> tuple[list[float], list[float]]:
    """``(below, above)``: each point's 95 % interval ``score -/+ 1.96 stderr`` as distances, cut to
    :data:`SCORE_RANGE` when the scores are bounded (an accuracy's interval does not pass 100); 0 without a
    stderr (n = 1)."""
    below, above = [], []
    for p in points:
        half = Z95 * p.stderr if p.stderr is not None and math.isfinite(p.stderr) else 0.0
        below.append(min(half, p.score - SCORE_RANGE[0]) if bounded else half)
        above.append(min(half, SCORE_RANGE[1] - p.score) if bounded else half)
    return below, above


@dataclass(frozen=True)
class PicPoint:
    model_args: dict
    length: float | None
    quality: float | None
    corrupted_ratio: float | None = None  # printed beside the figure; a point with CR near 1 says little
    applied: dict | None = None  # the inference the run applied (``config.lch_inference``), if recorded
    n: int | None = None  # the samples the point averages (None: not recorded)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def pic_points_from_runs(runs: list[Run], task: str, length_metric: str = "length",
                         quality_metric: str = "quality") -> list[PicPoint]:
    """Length and quality as the results files report them (``<task>/length``: mean over all samples;
    ``<task>/quality``: the judged mean), latest run per configuration."""
    out = []
    for run in latest_per_configuration(runs):
        length = _finite(run.metrics.get(f"{task}/{length_metric}"))
        quality = _finite(run.metrics.get(f"{task}/{quality_metric}"))
        if length is not None or quality is not None:
            out.append(PicPoint(run.model_args, length, quality, _finite(run.metrics.get(f"{task}/corrupted_ratio")),
                                run.applied, run.samples.get(task)))
    return out


def pic_points_from_samples(run_dirs: Sequence[str | Path], task: str, threshold: float = 0.2) -> list[PicPoint]:
    """Length and quality with the PIC paper's, Appendix-A averaging (over non-corrupted samples shared by the
    compared runs when their corrupted ratio is below ``threshold``), from logged samples; see
    :func:`harness.reporting.generation_table.generation_table`."""
    from harness.reporting.generation_table import generation_table

    rows = generation_table([str(d) for d in run_dirs], task, threshold)
    return [PicPoint(row["model_args"], _finite(row["length"]), _finite(row["quality"]), row["cr"], row["applied"],
                     row["n"]) for row in rows]


def _pic_setting(point: PicPoint) -> tuple[str, str, float, str]:
    """(base model, method, ratio, variant): the inference the run applied (recorded by our models, so a checkpoint
    whose variant file applied Dynamic PIC is on the Dynamic PIC line; else from its model args); variant names
    the settings besides the ratio that the method uses and the run did not leave at their defaults (so that a
    run that leaves one at its default and a run that spells it out fall on the same line)."""
    model_args = point.model_args
    inference = inference_of(model_args, point.applied)
    name = name_of("", {k: v for k, v in model_args.items() if k not in MODEL_ARGS.values()})
    base = SEPARATOR.join([name.model, *name.extras])
    defaults = Inference()
    variant = " ".join(f"{name}={getattr(inference, name)}" for name in inference.entry.fields
                       if name != "ratio" and getattr(inference, name) != getattr(defaults, name))
    return base, inference.method, inference.ratio, variant


def pic_series(points: list[PicPoint]) -> dict[str, dict[str, dict[str, list[tuple[float, PicPoint]]]]]:
    """``{base model: {method: {variant: [(ratio, point)] sorted by ratio}}}``.

    Runs without PIC join every line of their base model at ratio 1 unless the line has its own ratio-1
    run. A later point of the same (base, method, variant, ratio) replaces an earlier one."""
    lines: dict[tuple[str, str, str], dict[float, PicPoint]] = {}
    vanilla: dict[str, PicPoint] = {}
    for point in points:
        base, method, ratio, variant = _pic_setting(point)
        if not PIC_METHODS[method].acts:
            vanilla[base] = point
        else:
            lines.setdefault((base, method, variant), {})[ratio] = point
    if not lines:
        raise UsageError("no run used PIC (model_args pic=naive|ntk|dynamic); nothing to plot against the ratio")
    out: dict = {}
    for (base, method, variant), by_ratio in lines.items():
        if base in vanilla:
            by_ratio.setdefault(1.0, vanilla[base])
        out.setdefault(base, {}).setdefault(method, {})[variant] = sorted(by_ratio.items(), key=lambda kv: kv[0])
    return out


def plot_pic(series: dict, path: str | Path, length_name: str = "length", quality_name: str = "quality",
             title: str = "") -> Path:
    """Writes :func:`pic_figure` as PNG."""
    return save_png(pic_figure(series, length_name, quality_name, title), path)


def pic_figure(series: dict, length_name: str = "length", quality_name: str = "quality", title: str = ""):
    """The PIC paper, Fig. 1 (bottom): rows = base models, columns = PIC methods; blue length (left axis),
    red quality (right axis; a quality out of 100 on its whole range) vs ratio (log axis); one marker / line style
    per Dynamic PIC variant, named in a legend when a panel has several; n per point in the panel's title when every
    point has the same, else beside each point; panels without runs say so."""
    plt = pyplot()
    from matplotlib.lines import Line2D

    methods = [m for m in _plot_methods() if any(m in by_method for by_method in series.values())]
    fig, axes = plt.subplots(len(series), len(methods), figsize=(4.6 * len(methods), 3.6 * len(series)),
                             dpi=120, squeeze=False)
    styles = [("o", "-"), ("s", "--"), ("^", ":"), ("D", "-.")]
    for row, (base, by_method) in zip(axes, series.items()):
        for ax, method in zip(row, methods):
            lines = sorted(by_method.get(method, {}).items())
            counts = {p.n for _, line in lines for _, p in line}
            shared_n = next(iter(counts)) if len(counts) == 1 else None
            ax.set_title(f"{base}: {method} PIC" + (f" (n {shared_n} per point)" if shared_n is not None else ""),
                         fontsize=9)
            if not lines:
                ax.axis("off")
                ax.text(0.5, 0.5, "no runs", ha="center", va="center", color="gray", transform=ax.transAxes)
                continue
            twin = ax.twinx()
            variants = []
            for i, (variant, line) in enumerate(lines):
                marker, style = styles[i % len(styles)]
                variants.append(Line2D([], [], color="gray", marker=marker, linestyle=style, label=variant or "default"))
                for axis, attr, color in ((ax, "length", "tab:blue"), (twin, "quality", "tab:red")):
                    xy = [(r, getattr(p, attr)) for r, p in line if getattr(p, attr) is not None]
                    if xy:
                        axis.plot(*zip(*xy), marker=marker, linestyle=style, color=color, label=f"{attr} {variant}")
                if shared_n is None:  # the points rest on different numbers of samples: each says its own
                    for r, p in line:
                        value, axis = (p.length, ax) if p.length is not None else (p.quality, twin)
                        if p.n is not None and value is not None:
                            axis.annotate(f"n={p.n}", (r, value), textcoords="offset points", xytext=(4, -9),
                                          fontsize=6)
            qualities = [p.quality for _, line in lines for _, p in line if p.quality is not None]
            if qualities and all(SCORE_RANGE[0] <= q <= SCORE_RANGE[1] for q in qualities):
                margin = (SCORE_RANGE[1] - SCORE_RANGE[0]) * 0.03  # a quality out of 100 on its whole range
                twin.set_ylim(SCORE_RANGE[0] - margin, SCORE_RANGE[1] + margin)
            ax.set_xscale("log", base=2)
            ratios = sorted({r for _, line in lines for r, _ in line})
            ax.set_xticks(ratios, [f"{r:g}" for r in ratios])
            ax.minorticks_off()
            ax.set_xlabel(f"{PIC_METHODS[method].ratio_words} {PIC_METHODS[method].symbol}")
            ax.set_ylabel(length_name, color="tab:blue")
            twin.set_ylabel(quality_name, color="tab:red")
            ax.grid(alpha=0.3)
            if len(variants) > 1:  # colours are told by the axis labels; the legend tells variants apart
                ax.legend(handles=variants, fontsize=7, loc="best")
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


# ---------------------------------------------------------------------------------------------------------------------
# lch plot depth: the score of each needle-depth bucket at each context length (harness/data/depth.py), as a heat map


@dataclass(frozen=True)
class DepthCell:
    """One cell of a depth x length grid: the depth bucket (percent), the length in tokens and as the task names it,
    the score (0-100), the samples it averages (``n_depth_<D>_len_<L>``; None: not recorded) and its stderr."""

    depth: int
    tokens: int
    length: str
    score: float
    n: int | None = None
    stderr: float | None = None


def depth_tasks(runs: list[Run]) -> list[str]:
    """The tasks with per-depth scores (``<task>/depth_<D>_len_<L>``) in any of ``runs``, sorted."""
    return sorted({m.split("/", 1)[0] for r in runs for m in r.metrics
                   if "/" in m and "," not in m and read_cell_metric(m.split("/", 1)[1]) is not None})


def run_depth_cells(run: Run, task: str) -> list[DepthCell]:
    """The run's cells of ``task``, by depth then length: each ``<task>/depth_<D>_len_<L>`` that is a number and
    names a length, with its count ``<task>/n_depth_<D>_len_<L>``."""
    from harness.data.lengths import length_tokens
    from harness.metrics.catalogue import COUNT_PREFIX

    cells = []
    for metric, value in run.metrics.items():
        owner, _, name = metric.partition("/")
        found = read_cell_metric(name) if owner == task and "," not in name else None
        if found is None or not math.isfinite(value):
            continue
        try:
            tokens = length_tokens(found[1])
        except ValueError:
            continue
        n = run.metrics.get(f"{task}/{COUNT_PREFIX}{name}")
        cells.append(DepthCell(found[0], tokens, found[1], value,
                               int(n) if n is not None and math.isfinite(n) else None, run.stderrs.get(metric)))
    return sorted(cells, key=lambda c: (c.depth, c.tokens))


def depth_grids(runs: list[Run], task: str) -> dict[str, list[DepthCell]]:
    """``{run label: cells}`` of ``task`` for the latest run of each configuration that has any (labels from
    :mod:`harness.reporting.labels`). Raises ``UsageError`` naming the task and the tasks that have depths when no
    run has a cell of it."""
    grids = latest_having(runs, lambda run: run_depth_cells(run, task))
    if not grids:
        have = depth_tasks(runs)
        raise UsageError(f"{task} has no per-depth metrics ({task}/depth_<D>_len_<L>) in these runs; "
                         + (f"tasks with depths here: {', '.join(have)}" if have else "no task here has them")
                         + " (RULER niah_* tasks and BABILong with source=synthetic record needle depths)")
    return grids


def _depth_axes(grids: dict[str, list[DepthCell]]) -> tuple[list[int], dict[int, str]]:
    """The rows (every bucket of :data:`harness.data.depth.DEPTH_BUCKETS` and any other found) and the columns
    (lengths in token order, with the task's names) that all panels share."""
    from harness.data.depth import DEPTH_BUCKETS

    cells = [c for found in grids.values() for c in found]
    return sorted(set(DEPTH_BUCKETS) | {c.depth for c in cells}), {c.tokens: c.length for c in sorted(cells, key=lambda c: c.tokens)}


def depth_table(task: str, grids: dict[str, list[DepthCell]]) -> list[str]:
    """The cells as text, one table per run: a row per depth bucket, a column per length, ``score (n=N)``, ``-``
    where the run has no sample."""
    depths, lengths = _depth_axes(grids)
    lines = []
    for label, cells in grids.items():
        at = {(c.depth, c.tokens): c for c in cells}
        rows = [["depth", *lengths.values()]]
        for depth in depths:
            row = [f"{depth}%"]
            for tokens in lengths:
                c = at.get((depth, tokens))
                row.append("-" if c is None else f"{c.score:.4g}" + (f" (n={c.n})" if c.n is not None else ""))
            rows.append(row)
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines.append(f"{task} | {label}")
        lines += ["  ".join(text.ljust(w) for text, w in zip(r, widths)).rstrip() for r in rows]
    return lines


def plot_depth(grids: dict[str, list[DepthCell]], task: str, path: str | Path) -> Path:
    """Writes :func:`depth_figure` as PNG."""
    return save_png(depth_figure(grids, task), path)


def depth_figure(grids: dict[str, list[DepthCell]], task: str):
    """One heat map per run: context length (x, token order, the task's names), depth bucket (y, 0 % at the top),
    colour the score on 0-100; each cell says its score and n; a cell without samples is grey and empty. The title
    names the task and what all runs share, each panel what is its own."""
    import numpy as np

    plt = pyplot()
    depths, lengths = _depth_axes(grids)
    columns = {tokens: i for i, tokens in enumerate(lengths)}
    cmap = plt.get_cmap("RdYlGn").with_extremes(bad="lightgrey")  # a cell without samples: grey, no text
    shared, short = split_shared(list(grids))
    width = 1.1 * len(lengths) + 2.2
    # the colour bar gets a narrow column of its own, so that every panel is as wide
    fig, axes = plt.subplots(1, len(grids) + 1, figsize=(width * len(grids) + 0.8, 0.55 * len(depths) + 2.2),
                             dpi=120, squeeze=False, gridspec_kw={"width_ratios": [1.0] * len(grids) + [0.06]})
    image = None
    for ax, label, cells in zip(axes[0][:-1], short, grids.values()):
        grid = np.full((len(depths), len(lengths)), np.nan)
        for c in cells:
            grid[depths.index(c.depth), columns[c.tokens]] = c.score
        image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=SCORE_RANGE[0], vmax=SCORE_RANGE[1],
                          aspect="auto")
        for c in cells:
            red, green, blue, _ = cmap((c.score - SCORE_RANGE[0]) / (SCORE_RANGE[1] - SCORE_RANGE[0]))
            dark = 0.299 * red + 0.587 * green + 0.114 * blue < 0.5
            ax.text(columns[c.tokens], depths.index(c.depth),
                    f"{c.score:.3g}" + (f"\nn={c.n}" if c.n is not None else ""), ha="center", va="center",
                    fontsize=7, color="white" if dark else "black")
        ax.set_xticks(range(len(lengths)), list(lengths.values()))
        ax.set_yticks(range(len(depths)), [f"{d}%" for d in depths])
        ax.set_xlabel("context length (tokens)", fontsize=8)
        ax.set_ylabel("needle depth (bucket, % of the haystack)", fontsize=8)
        ax.set_title(label or "run", fontsize=9)
    fig.colorbar(image, cax=axes[0][-1], label=f"score ({SCORE_RANGE[0]:g}-{SCORE_RANGE[1]:g})")
    fig.suptitle(task + (f"\n{shared}" if shared else ""), fontsize=10)
    return fig
