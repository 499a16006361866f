"""``lch correlate``: do two metrics track each other across runs (papers 001 / 004, e.g. LongPPL vs
LongBench, Pearson -0.96)?

Pearson, Spearman and Kendall (tau-b) coefficients with their p-values from scipy, n, and a percentile
bootstrap 95 % CI per coefficient (pairs resampled with replacement, ``n_boot`` times, seeded;
resamples whose coefficient is undefined, e.g. a constant column, are dropped). Scatter plot with run
labels and the least-squares line; a Markdown report; a matrix mode for several metrics.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np

from harness.errors import UsageError
from harness.files import write_json_atomic, write_text_atomic
from harness.reporting.labels import run_labels, split_shared
from harness.reporting.runs import Run, latest_per_configuration

METHODS = ("pearson", "spearman", "kendall")


def _coefficient(method: str, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    from scipy import stats

    fn = {"pearson": stats.pearsonr, "spearman": stats.spearmanr, "kendall": stats.kendalltau}[method]
    result = fn(x, y)
    return float(result.statistic), float(result.pvalue)


def correlation(x: Sequence[float], y: Sequence[float], n_boot: int = 2000, seed: int = 0,
                names: tuple[str, str] = ("x", "y")) -> dict:
    """``{"n", "undefined", "pearson": {"r", "p", "ci": [lo, hi]}, "spearman": ..., "kendall": ...}``.

    A constant series has no correlation with anything: ``undefined`` then says which (``names``) and its value, and
    every coefficient is NaN (scipy is not asked, so it warns of nothing); otherwise ``undefined`` is None."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or len(x) < 3:
        raise UsageError(f"correlation needs two equally long series of at least 3 values (got {len(x)}, {len(y)})")
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(x), size=(n_boot, len(x)))
    constant = [f"{name} is {values[0]:.6g} in all {len(values)} runs" for name, values in zip(names, (x, y))
                if np.ptp(values) == 0]
    out: dict = {"n": int(len(x)), "undefined": "; ".join(constant) or None}
    for method in METHODS:
        if constant:
            out[method] = {"r": math.nan, "p": math.nan, "ci": [math.nan, math.nan]}
            continue
        r, p = _coefficient(method, x, y)
        boot = []
        for idx in draws:
            xs, ys = x[idx], y[idx]
            if np.ptp(xs) == 0 or np.ptp(ys) == 0:
                continue
            value = _coefficient(method, xs, ys)[0]
            if not math.isnan(value):
                boot.append(value)
        ci = [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))] if boot else [math.nan, math.nan]
        out[method] = {"r": r, "p": p, "ci": ci}
    return out


def paired_values(runs: list[Run], metrics: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Labels and a [runs x metrics] array of the runs that have every metric (latest per configuration)."""
    chosen = [r for r in latest_per_configuration(runs) if all(m in r.metrics for m in metrics)]
    if len(chosen) < 3:
        raise UsageError(f"only {len(chosen)} runs have all of {', '.join(metrics)}; correlation needs 3 or more")
    return run_labels(chosen), np.array([[r.metrics[m] for m in metrics] for r in chosen])


def scatter_png(x: np.ndarray, y: np.ndarray, labels: list[str], x_name: str, y_name: str, stats: dict,
                path: str | Path) -> Path:
    from harness.reporting.plots import pyplot, save_png

    fig, ax = pyplot().subplots(figsize=(6.4, 4.8), dpi=120)
    ax.scatter(x, y, zorder=3)
    middle = (x.min() + x.max()) / 2
    shared, short = split_shared(labels)
    for xi, yi, label in zip(x, y, short):
        right_half = xi > middle  # labels point inwards so that they stay inside the axes
        note = ax.annotate(label, (xi, yi), textcoords="offset points", xytext=(-5 if right_half else 5, 4),
                           ha="right" if right_half else "left", fontsize=7)
        note.set_in_layout(False)  # a long label must not shrink the axes
    if np.ptp(x) > 0:
        slope, intercept = np.polyfit(x, y, 1)
        grid = np.linspace(x.min(), x.max(), 50)
        ax.plot(grid, slope * grid + intercept, linestyle="--", color="gray", zorder=2)
    p = stats["pearson"]
    verdict = (f"undefined: {stats['undefined']}" if stats.get("undefined") else
               f"Pearson r = {p['r']:.2f} (95% CI {p['ci'][0]:.2f}..{p['ci'][1]:.2f}), n = {stats['n']}")
    ax.set_title((f"{shared}\n" if shared else "") + verdict, fontsize=9)
    ax.set_xlabel(x_name)
    ax.set_ylabel(y_name)
    ax.grid(alpha=0.3)
    return save_png(fig, path)


def report_markdown(x_name: str, y_name: str, stats: dict, labels: list[str], values: np.ndarray,
                    png: str | None = None) -> str:
    lines = [f"# {y_name} vs {x_name}", "", f"n = {stats['n']} runs", ""]
    if stats.get("undefined"):
        lines.append(f"No correlation can be measured: {stats['undefined']}.")
    else:
        lines += ["| method | coefficient | p-value | bootstrap 95% CI |", "|---|---|---|---|"]
        for method in METHODS:
            s = stats[method]
            lines.append(f"| {method} | {s['r']:.4f} | {s['p']:.3g} | [{s['ci'][0]:.3f}, {s['ci'][1]:.3f}] |")
    if png:
        lines += ["", f"![scatter]({png})"]
    lines += ["", f"| run | {x_name} | {y_name} |", "|---|---|---|"]
    lines += [f"| {label} | {row[0]:.6g} | {row[1]:.6g} |" for label, row in zip(labels, values)]
    return "\n".join(lines) + "\n"


def _json_number(value: float | list) -> float | list | None:
    if isinstance(value, list):
        return [_json_number(v) for v in value]
    return None if isinstance(value, float) and math.isnan(value) else value


def matrix_markdown(metrics: Sequence[str], values: np.ndarray, method: str = "pearson") -> str:
    """Pairwise coefficients (p-values in brackets) of every metric pair."""
    lines = ["| | " + " | ".join(metrics) + " |", "|---|" + "---|" * len(metrics)]
    for i, a in enumerate(metrics):
        cells = []
        for j in range(len(metrics)):
            if np.ptp(values[:, i]) == 0 or np.ptp(values[:, j]) == 0:
                cells.append("undefined (constant)")  # no correlation with a constant; scipy would warn and say NaN
                continue
            r, p = _coefficient(method, values[:, i], values[:, j]) if i != j else (1.0, 0.0)
            cells.append(f"{r:.3f} ({p:.2g})")
        lines.append(f"| {a} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_report(runs: list[Run], x_name: str, y_name: str, output: str | Path, n_boot: int = 2000,
                 seed: int = 0) -> tuple[Path, dict]:
    """Scatter PNG, Markdown and JSON of ``y_name`` vs ``x_name`` in ``output``; returns (PNG, stats)."""
    import re

    out = Path(output)
    labels, values = paired_values(runs, [x_name, y_name])
    stats = correlation(values[:, 0], values[:, 1], n_boot, seed, (x_name, y_name))
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{y_name}_vs_{x_name}")
    png = scatter_png(values[:, 0], values[:, 1], labels, x_name, y_name, stats, out / f"{stem}.png")
    write_text_atomic(out / f"{stem}.md", report_markdown(x_name, y_name, stats, labels, values, png.name))
    plain = {m: {k: _json_number(v) for k, v in stats[m].items()} for m in METHODS}  # NaN is not JSON: null
    write_json_atomic(out / f"{stem}.json", {"x": x_name, "y": y_name, "labels": labels, **stats, **plain}, indent=1)
    return png, stats
