"""``lch plot pic``: generation length and quality vs PIC ratio, the PIC paper, Fig. 1 (:func:`pic_points_from_runs`
or :func:`pic_points_from_samples`, then :func:`pic_series`, :func:`plot_pic`): one panel per base model and PIC
method, the ratio (s_cr or s_rr) on a log axis, length on the left axis in blue, quality on the right in red. A base
model's run without PIC is drawn at ratio 1 on each of its lines: PIC with ratio 1 is the identity for all three
methods (g(m) = m; base b * 1). Missing values are left out of a line, never drawn as zeros."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from harness.core.errors import UsageError
from harness.pic.inference import MODEL_ARGS, Inference
from harness.pic.methods import PIC_METHODS
from harness.reporting.labels import SEPARATOR, inference_of, name_of
from harness.reporting.plots import SCORE_RANGE, pyplot, save_png
from harness.reporting.runs import Run, latest_per_configuration


def _plot_methods() -> list[str]:
    """The PIC methods that get a column: every registered one that changes the model, in registry order."""
    return [name for name, entry in PIC_METHODS.items() if entry.acts]


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
