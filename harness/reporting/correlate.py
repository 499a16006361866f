"""``lch correlate``: do two metrics track each other across runs? Pearson, Spearman (average ranks) and Kendall
tau-b, each p (two-sided) and 95 % interval from one normal approximation, so the interval excludes 0 iff p < 0.05:
``tanh(atanh(r) +- 1.96 se)``, ``se = sqrt(1 / (n - 3))`` (Spearman: ``sqrt(1.06 / (n - 3))``); Kendall
``z = S / sqrt(Var0(S))`` (tie-corrected), ``tau +- 1.96 tau / z`` clipped to [-1, 1]. None below :data:`MIN_RUNS`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from harness.core.errors import UsageError
from harness.core.files import write_json_atomic, write_text_atomic
from harness.core.tables import markdown
from harness.reporting.labels import run_labels, split_shared
from harness.reporting.runs import Run, latest_per_configuration

METHODS = ("pearson", "spearman", "kendall")
MIN_RUNS = 5  # fewer runs: no correlation is estimable (module docstring)
Z95 = 1.959963984540054  # the standard normal's 97.5 % quantile: 95 % two-sided
SPEARMAN_VARIANCE = 1.06  # Fieller, Hartley and Pearson (1957): var(atanh(rho)) ~ 1.06 / (n - 3)


def _kendall_se(x: np.ndarray, y: np.ndarray) -> float:
    """The null standard error of tau-b, ``sqrt(Var0(S)) / sqrt((n0 - n1)(n0 - n2))``, with ties in both series (the
    variance behind ``scipy.stats.kendalltau``'s asymptotic p, which scipy does not return)."""
    n = len(x)

    def tie_terms(values: np.ndarray) -> tuple[float, float, float, float]:
        _, counts = np.unique(values, return_counts=True)
        t = counts.astype(float)
        return (
            float(np.sum(t * (t - 1) / 2)),
            float(np.sum(t * (t - 1) * (2 * t + 5))),
            float(np.sum(t * (t - 1))),
            float(np.sum(t * (t - 1) * (t - 2))),
        )

    n1, vx, ax1, ax2 = tie_terms(x)
    n2, vy, ay1, ay2 = tie_terms(y)
    n0 = n * (n - 1) / 2
    variance = (
        (n * (n - 1) * (2 * n + 5) - vx - vy) / 18
        + ax1 * ay1 / (2 * n * (n - 1))
        + ax2 * ay2 / (9 * n * (n - 1) * (n - 2))
    )
    return math.sqrt(variance) / math.sqrt((n0 - n1) * (n0 - n2))


def coefficient(method: str, x: np.ndarray, y: np.ndarray) -> dict:
    """``{"r", "p", "ci": [lo, hi]}`` of one method (module docstring) on two non-constant series of n >=
    :data:`MIN_RUNS`: the p-value and the interval come from the same statistic, so ``ci`` excludes 0 iff p < 0.05."""
    from scipy import stats

    if method in ("pearson", "spearman"):
        r = float(stats.pearsonr(x, y).statistic if method == "pearson" else stats.spearmanr(x, y).statistic)
        se = math.sqrt((1.0 if method == "pearson" else SPEARMAN_VARIANCE) / (len(x) - 3))
        if abs(r) >= 1.0:  # a perfect relation: Fisher's z is infinite, p 0, the interval the point
            return {"r": r, "p": 0.0, "ci": [r, r]}
        z = math.atanh(r)
        return {
            "r": r,
            "p": float(2 * stats.norm.sf(abs(z) / se)),
            "ci": [math.tanh(z - Z95 * se), math.tanh(z + Z95 * se)],
        }
    if method != "kendall":
        raise UsageError(f"correlation method {method!r} is unknown; allowed: {', '.join(METHODS)}")
    # The interval needs Var0(S), which scipy does not return: deriving its se as tau / z from scipy's p was tried
    # and not taken, since tau = 0 gives 0 / 0 and p underflows to 0 (z infinite) from about a thousand runs.
    found = stats.kendalltau(x, y, method="asymptotic")
    tau, se = float(found.statistic), _kendall_se(np.asarray(x, float), np.asarray(y, float))
    return {"r": tau, "p": float(found.pvalue), "ci": [max(-1.0, tau - Z95 * se), min(1.0, tau + Z95 * se)]}


def correlation(
    x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, names: tuple[str, str] = ("x", "y")
) -> dict:
    """``{"n", "undefined", "pearson": {"r", "p", "ci": [lo, hi]}, "spearman": ..., "kendall": ...}``; ``undefined``
    says why none is estimable (below :data:`MIN_RUNS` runs, a constant series), all then NaN; else it is None."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or len(x) < 2:
        raise UsageError(f"correlation needs two equally long series of at least 2 values (got {len(x)}, {len(y)})")
    why = [
        f"{name} is {values[0]:.6g} in all {len(values)} runs"
        for name, values in zip(names, (x, y))
        if np.ptp(values) == 0
    ]
    if len(x) < MIN_RUNS:
        why.insert(0, f"{len(x)} runs are too few to estimate a correlation, which needs at least {MIN_RUNS}")
    return {
        "n": int(len(x)),
        "undefined": "; ".join(why) or None,
        **{
            method: {"r": math.nan, "p": math.nan, "ci": [math.nan, math.nan]} if why else coefficient(method, x, y)
            for method in METHODS
        },
    }


def paired_values(runs: list[Run], metrics: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Labels and a [runs x metrics] array of the runs that have every metric (latest per configuration)."""
    chosen = [r for r in latest_per_configuration(runs) if all(m in r.metrics for m in metrics)]
    if len(chosen) < 2:
        raise UsageError(
            f"only {len(chosen)} runs have all of {', '.join(metrics)}; a correlation needs at least {MIN_RUNS}"
        )
    return run_labels(chosen), np.array([[r.metrics[m] for m in metrics] for r in chosen])


def label_rises(pixels: np.ndarray, lengths: Sequence[int], dpi: float, size: float = 7.0) -> list[float]:
    """Points to raise each label so none overlap: boxes ``0.6 * size`` per character by ``1.3 * size``, lowest point
    first, each raised a line at a time; ``pixels``: the points in display pixels."""
    scale = dpi / 72.0  # pixels per point
    placed: list[tuple[float, float, float]] = []  # (left, width, bottom) of each label placed
    height, rises = 1.3 * size * scale, [0.0] * len(pixels)
    for i in sorted(range(len(pixels)), key=lambda i: (pixels[i][1], pixels[i][0])):
        left, width = pixels[i][0], 0.6 * size * scale * lengths[i]
        rise = 0.0
        while any(
            abs(left - other_left) < max(width, other_width) and abs(pixels[i][1] + rise - bottom) < height
            for other_left, other_width, bottom in placed
        ):
            rise += height
        placed.append((left, width, pixels[i][1] + rise))
        rises[i] = rise / scale
    return rises


def scatter_png(
    x: np.ndarray, y: np.ndarray, labels: list[str], x_name: str, y_name: str, stats: dict, path: str | Path
) -> Path:
    from matplotlib.ticker import MaxNLocator

    from harness.reporting.plots import pyplot, save_png

    fig, ax = pyplot().subplots(figsize=(6.4, 4.8), dpi=120)
    ax.scatter(x, y, zorder=3)
    middle = (x.min() + x.max()) / 2
    shared, short = split_shared(labels)
    ax.autoscale_view()
    pixels = ax.transData.transform(np.column_stack((x, y)))
    top_half = (y.min() + y.max()) / 2
    for xi, yi, label, rise in zip(x, y, short, label_rises(pixels, [len(t) for t in short], fig.dpi)):
        right_half = xi > middle  # labels point inwards so that they stay inside the axes: left / right, and
        upper = yi > top_half  # below the points of the upper half (stacked downwards), above the others
        note = ax.annotate(
            label,
            (xi, yi),
            textcoords="offset points",
            xytext=(-5 if right_half else 5, -(11 + rise) if upper else 4 + rise),
            ha="right" if right_half else "left",
            fontsize=7,
            arrowprops={"arrowstyle": "-", "color": "0.6", "lw": 0.5} if rise else None,
        )
        note.set_in_layout(False)  # a long label must not shrink the axes
    if np.ptp(x) > 0 and not stats.get("undefined"):  # no fitted line where no correlation can be estimated
        slope, intercept = np.polyfit(x, y, 1)
        grid = np.linspace(x.min(), x.max(), 50)
        ax.plot(grid, slope * grid + intercept, linestyle="--", color="gray", zorder=2)
    p = stats["pearson"]
    verdict = (
        f"not estimable: {stats['undefined']}"
        if stats.get("undefined")
        else f"Pearson r = {p['r']:.2f} (95% CI {p['ci'][0]:.2f}..{p['ci'][1]:.2f}), n = {stats['n']}"
    )
    ax.set_title((f"{shared}\n" if shared else "") + verdict, fontsize=9)
    ax.set_xlabel(x_name)
    ax.set_ylabel(y_name)
    # at most five x ticks, turned, so that long values (perplexities to 4 decimals) do not run into each other
    ax.xaxis.set_major_locator(MaxNLocator(nbins=5))
    ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    ax.grid(alpha=0.3)
    return save_png(fig, path)


def report_markdown(
    x_name: str, y_name: str, stats: dict, labels: list[str], values: np.ndarray, png: str | None = None
) -> str:
    lines = [f"# {y_name} vs {x_name}", "", f"n = {stats['n']} runs", ""]
    if stats.get("undefined"):
        lines.append(f"Not estimable: {stats['undefined']}.")
    else:
        lines += markdown(
            ["method", "coefficient", "p-value", "95% CI (same approximation as p)"],
            [
                [m, f"{s['r']:.4f}", f"{s['p']:.3g}", f"[{s['ci'][0]:.3f}, {s['ci'][1]:.3f}]"]
                for m, s in ((m, stats[m]) for m in METHODS)
            ],
        )
    if png:
        lines += ["", f"![scatter]({png})"]
    lines += [
        "",
        *markdown(
            ["run", x_name, y_name], [[label, f"{row[0]:.6g}", f"{row[1]:.6g}"] for label, row in zip(labels, values)]
        ),
    ]
    return "\n".join(lines) + "\n"


def _json_number(value: float | list) -> float | list | None:
    if isinstance(value, list):
        return [_json_number(v) for v in value]
    return None if isinstance(value, float) and math.isnan(value) else value


def matrix_markdown(metrics: Sequence[str], values: np.ndarray, method: str = "pearson") -> str:
    """Pairwise coefficients (p-values in brackets) of every metric pair (:func:`coefficient`)."""
    rows = []
    for i, a in enumerate(metrics):
        cells = []
        for j in range(len(metrics)):
            if np.ptp(values[:, i]) == 0 or np.ptp(values[:, j]) == 0:
                cells.append("undefined (constant)")  # no correlation with a constant
                continue
            if len(values) < MIN_RUNS:
                cells.append(f"not estimable (n = {len(values)} < {MIN_RUNS})")
                continue
            found = coefficient(method, values[:, i], values[:, j]) if i != j else {"r": 1.0, "p": 0.0}
            cells.append(f"{found['r']:.3f} ({found['p']:.2g})")
        rows.append([a, *cells])
    return "\n".join(markdown(["", *metrics], rows)) + "\n"


def write_report(runs: list[Run], x_name: str, y_name: str, output: str | Path) -> tuple[Path, dict]:
    """Scatter PNG, Markdown and JSON of ``y_name`` vs ``x_name`` in ``output``; returns (PNG, stats)."""
    import re

    out = Path(output)
    labels, values = paired_values(runs, [x_name, y_name])
    stats = correlation(values[:, 0], values[:, 1], (x_name, y_name))
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{y_name}_vs_{x_name}")
    png = scatter_png(values[:, 0], values[:, 1], labels, x_name, y_name, stats, out / f"{stem}.png")
    write_text_atomic(out / f"{stem}.md", report_markdown(x_name, y_name, stats, labels, values, png.name))
    plain = {m: {k: _json_number(v) for k, v in stats[m].items()} for m in METHODS}  # NaN is not JSON: null
    write_json_atomic(out / f"{stem}.json", {"x": x_name, "y": y_name, "labels": labels, **stats, **plain}, indent=1)
    return png, stats
