"""``lch plot pic``: generation length and quality vs PIC ratio (the PIC paper, Fig. 1), a panel per base model and
method; a run without PIC joins its base model's lines at ratio 1 (PIC's identity); missing values left out."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.core.errors import UsageError
from harness.pic.inference import MODEL_ARGS, Inference
from harness.pic.methods import PIC_METHODS
from harness.reporting.labels import SEPARATOR, inference_of, name_of
from harness.reporting.plots import SCORE_RANGE, pyplot
from harness.reporting.runs import Run, latest_per_configuration

if TYPE_CHECKING:
    from matplotlib.typing import LineStyleType


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


def pic_points_from_runs(
    runs: list[Run], task: str, length_metric: str = "length", quality_metric: str = "quality"
) -> list[PicPoint]:
    """Length and quality as the results report them (means over all samples), latest run per configuration."""
    points = [
        PicPoint(
            run.model_args,
            _finite(run.metrics.get(f"{task}/{length_metric}")),
            _finite(run.metrics.get(f"{task}/{quality_metric}")),
            _finite(run.metrics.get(f"{task}/corrupted_ratio")),
            run.applied,
            run.samples.get(task),
        )
        for run in latest_per_configuration(runs)
    ]
    return [p for p in points if p.length is not None or p.quality is not None]


def pic_points_from_samples(run_dirs: Sequence[str | Path], task: str, threshold: float = 0.2) -> list[PicPoint]:
    """Length and quality from logged samples, averaged as in the PIC paper, Appendix A (``lch gentable``;
    ``threshold``: the corrupted ratio below which a run averages over the shared samples)."""
    from harness.reporting.generation_table import generation_table

    return [
        PicPoint(
            row["model_args"], _finite(row["length"]), _finite(row["quality"]), row["cr"], row["applied"], row["n"]
        )
        for row in generation_table([str(d) for d in run_dirs], task, threshold)
    ]


def _pic_setting(point: PicPoint) -> tuple[str, str, float, str]:
    """(base model, method, ratio, variant) of the inference the run applied (recorded, else its model args);
    ``variant``: the method's settings besides the ratio that are not at their defaults."""
    model_args = point.model_args
    inference = inference_of(model_args, point.applied)
    name = name_of("", {k: v for k, v in model_args.items() if k not in MODEL_ARGS.values()})
    base = SEPARATOR.join([name.model, *name.extras])
    defaults = Inference()
    variant = " ".join(
        f"{name}={getattr(inference, name)}"
        for name in inference.entry.fields
        if name != "ratio" and getattr(inference, name) != getattr(defaults, name)
    )
    return base, inference.method, inference.ratio, variant


def pic_series(points: list[PicPoint]) -> dict[str, dict[str, dict[str, list[tuple[float, PicPoint]]]]]:
    """``{base model: {method: {variant: [(ratio, point)] sorted by ratio}}}``; runs without PIC join their base
    model's lines at ratio 1 unless a line has its own; a later point of the same setting replaces an earlier one."""
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


def pic_figure(series: dict, length_name: str = "length", quality_name: str = "quality", title: str = ""):
    """Rows = base models, columns = methods: blue length (left axis), red quality (right) vs ratio (log axis); a
    marker / line style per variant; n per point in the title when shared, else beside each point."""
    plt = pyplot()
    from matplotlib.lines import Line2D

    methods = [m for m in _plot_methods() if any(m in by_method for by_method in series.values())]
    fig, axes = plt.subplots(
        len(series), len(methods), figsize=(4.6 * len(methods), 3.6 * len(series)), dpi=120, squeeze=False
    )
    styles: list[tuple[str, LineStyleType]] = [("o", "-"), ("s", "--"), ("^", ":"), ("D", "-.")]
    for row, (base, by_method) in zip(axes, series.items()):
        for ax, method in zip(row, methods):
            lines = sorted(by_method.get(method, {}).items())
            counts = {p.n for _, line in lines for _, p in line}
            shared_n = next(iter(counts)) if len(counts) == 1 else None
            ax.set_title(
                f"{base}: {method} PIC" + (f" (n {shared_n} per point)" if shared_n is not None else ""), fontsize=9
            )
            if not lines:
                ax.axis("off")
                ax.text(0.5, 0.5, "no runs", ha="center", va="center", color="gray", transform=ax.transAxes)
                continue
            twin = ax.twinx()
            variants = []
            for i, (variant, line) in enumerate(lines):
                marker, style = styles[i % len(styles)]
                variants.append(
                    Line2D([], [], color="gray", marker=marker, linestyle=style, label=variant or "default")
                )
                for axis, attr, color in ((ax, "length", "tab:blue"), (twin, "quality", "tab:red")):
                    xy = [(r, getattr(p, attr)) for r, p in line if getattr(p, attr) is not None]
                    if xy:
                        axis.plot(*zip(*xy), marker=marker, linestyle=style, color=color, label=f"{attr} {variant}")
                if shared_n is None:  # the points rest on different numbers of samples: each says its own
                    for r, p in line:
                        value, axis = (p.length, ax) if p.length is not None else (p.quality, twin)
                        if p.n is not None and value is not None:
                            axis.annotate(
                                f"n={p.n}", (r, value), textcoords="offset points", xytext=(4, -9), fontsize=6
                            )
            qualities = [p.quality for _, line in lines for _, p in line if p.quality is not None]
            if qualities and all(SCORE_RANGE[0] <= q <= SCORE_RANGE[1] for q in qualities):
                margin = (SCORE_RANGE[1] - SCORE_RANGE[0]) * 0.03  # a quality out of 100 on its whole range
                twin.set_ylim(SCORE_RANGE[0] - margin, SCORE_RANGE[1] + margin)
            ax.set_xscale("log", base=2)
            ratios = sorted({r for _, line in lines for r, _ in line})
            ax.set_xticks(ratios, [f"{r:g}" for r in ratios])
            ax.minorticks_off()
            ax.set_xlabel(f"{PIC_METHODS[method].ratio_label} {PIC_METHODS[method].symbol}")
            ax.set_ylabel(length_name, color="tab:blue")
            twin.set_ylabel(quality_name, color="tab:red")
            ax.grid(alpha=0.3)
            if len(variants) > 1:  # colours are told by the axis labels; the legend tells variants apart
                ax.legend(handles=variants, fontsize=7, loc="best")
    if title:
        fig.suptitle(title, fontsize=10)
    return fig
