"""What a sweep prints and writes around its cells: the plan table before, the outcome table after, the sweep's
cost, one leaderboard over its cells, and for a checkpoint series each metric by training step (table and plot)
and the gate of the newest checkpoint against the previous one or a named baseline."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.core.sizes import in_words
from harness.core.tables import csv_text, markdown
from harness.plan.report import duration, table

SWEEP_FILE = "sweep.json"
PLAN_COLUMNS = ("cell", "step", "status", "tokens", "memory", "estimate", "asks", "where")
OUTCOME_COLUMNS = ("cell", "result", "seconds", "node", "attempts", "why")


def _text(name: str, value: Any) -> str:
    if value is None or value == "":
        return "-"
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def plan_table(prepared: Sequence[Any], cluster: Sequence[Any]) -> str:
    """Every cell's plan and where it may run, before anything runs."""
    counts = {s: sum(p.status == s for p in prepared) for s in ("to run", "skipped", "failed")}
    rows = [
        {
            "cell": p.cell.label,
            "step": p.cell.step,
            "status": p.status if p.status != "skipped" else "done before",
            "tokens": p.tokens or None,
            "memory": in_words(p.planned) if p.planned else None,
            "estimate": duration(p.seconds) if p.seconds is not None else None,
            "asks": p.need.words() if p.need else None,
            "where": p.where or None,
        }
        for p in prepared
    ]
    nodes = ", ".join(
        f"{n.name} ({n.cpus:g} CPU{f', {n.gpus:g} GPU' if n.gpus else ''}, {in_words(int(n.memory))})" for n in cluster
    )
    on = f"; on {len(cluster)} node(s): {nodes}" if cluster else ""
    head = (
        f"lch sweep: {len(prepared)} cells, {counts['to run']} to run, {counts['skipped']} done before "
        f"(skipped), {counts['failed']} refused by their plan{on}"
    )
    lines = [
        head,
        "",
        table(rows, PLAN_COLUMNS, {c: c for c in PLAN_COLUMNS}, _text, ("cell", "status", "asks", "where")),
    ]
    lines += [f"{p.cell.label}: {p.line}" for p in prepared if p.status == "failed"]
    return "\n".join(lines)


def outcome_table(prepared: Sequence[Any]) -> str:
    """Done / skipped (done before) / failed, with each failed cell's one line."""
    rows = [
        {
            "cell": p.cell.label,
            "result": p.status,
            "seconds": f"{p.outcome.seconds:.1f}" if p.outcome and p.status != "failed" else None,
            "node": p.outcome.node if p.outcome else None,
            "attempts": p.outcome.attempt if p.outcome else None,
            "why": p.line or None,
        }
        for p in prepared
    ]
    counts = {s: sum(p.status == s for p in prepared) for s in ("done", "skipped", "failed")}
    return "\n".join(
        [
            table(rows, OUTCOME_COLUMNS, {c: c for c in OUTCOME_COLUMNS}, _text, ("cell", "result", "node", "why")),
            "",
            f"{counts['done']} done, {counts['skipped']} skipped (already done), {counts['failed']} failed",
        ]
    )


def cell_run(folder: Path) -> Any:
    """The latest run in a cell's folder (:class:`harness.reporting.runs.Run`), or None."""
    from harness.reporting.runs import RunError, load_runs

    try:
        return load_runs([folder])[0][-1]
    except RunError:
        return None


def sweep_cost(prepared: Sequence[Any]) -> dict[str, Any]:
    """The sweep's ``lch_cost``: per cell its device seconds and peak memory (as its run recorded them), and totals."""
    cells = {}
    for p in prepared:
        run = cell_run(p.folder) if p.status in ("done", "skipped") else None
        if run is None:
            continue
        cost = run.cost or {}
        peak = (cost.get("peak_memory") or {}).get("bytes")
        cells[p.cell.label] = {
            "device": cost.get("device"),
            "device_seconds": cost.get("wall_seconds"),
            "peak_memory": peak,
            "planned_memory": p.planned,
        }
    seconds = [c["device_seconds"] for c in cells.values() if isinstance(c["device_seconds"], (int, float))]
    peaks = [c["peak_memory"] for c in cells.values() if isinstance(c["peak_memory"], int)]
    return {"cells": cells, "device_seconds": round(sum(seconds), 2), "peak_memory": max(peaks, default=None)}


def leaderboard(out: Path) -> list[Path]:
    """One leaderboard over the sweep's cells (what ``lch leaderboard <out>/cells`` writes)."""
    from harness.reporting.leaderboard import leaderboard as board, write_leaderboard
    from harness.reporting.runs import load_runs
    from harness.sweep.worker import CELLS

    runs, _ = load_runs([out / CELLS], on_error="skip")
    return write_leaderboard(board(runs, all_runs=True), out / "leaderboard.csv")


def gated_metrics(run: Any) -> list[str]:
    """A run's scores and perplexities (what the gate and the per-step table show): directed, not bookkeeping."""
    from harness.reporting.baseline import _cell

    return sorted(
        m for m in run.metrics if m in run.higher_is_better and run.roles.get(m) != "bookkeeping" and not _cell(m)
    )


def series(prepared: Sequence[Any]) -> dict[str, list[tuple[int, Any]]]:
    """Each variant's checkpoints with a result, by training step: ``{variant: [(step, run), ...]}``."""
    found: dict[str, list[tuple[int, Any]]] = {}
    for p in prepared:
        if p.cell.step is None or p.status not in ("done", "skipped"):
            continue
        run = cell_run(p.folder)
        if run is not None:
            found.setdefault(p.cell.variant, []).append((p.cell.step, run))
    return {v: sorted(items, key=lambda item: item[0]) for v, items in found.items() if len(items) > 1}


def step_reports(out: Path, by_variant: dict[str, list[tuple[int, Any]]]) -> list[Path]:
    """``by_step.csv`` / ``.md`` (a row per variant and step, a column per metric) and ``by_step.png``."""
    from harness.core.files import write_text_atomic
    from harness.reporting.plots import pyplot, save_png

    metrics = sorted({m for items in by_variant.values() for _, run in items for m in gated_metrics(run)})
    rows = [
        {"variant": v, "step": step, **{m: run.metrics.get(m) for m in metrics}}
        for v, items in by_variant.items()
        for step, run in items
    ]
    columns = ("variant", "step", *metrics)

    def text(value: Any, short: bool) -> str:  # the CSV keeps every digit, the Markdown six
        return "" if value is None else f"{value:.6g}" if short and isinstance(value, float) else str(value)

    csv = csv_text(columns, [[text(row.get(c), False) for c in columns] for row in rows])
    md = markdown(columns, [[text(row.get(c), True) for c in columns] for row in rows])
    paths = [write_text_atomic(out / "by_step.csv", csv), write_text_atomic(out / "by_step.md", "\n".join(md) + "\n")]
    plt = pyplot()
    cols = min(3, len(metrics)) or 1
    fig, axes = plt.subplots(
        math.ceil(len(metrics) / cols) or 1,
        cols,
        figsize=(4.5 * cols, 3.2 * math.ceil(len(metrics) / cols) or 1),
        squeeze=False,
    )
    for ax, metric in zip(axes.flat, metrics):
        for variant, items in by_variant.items():
            points = [(step, run.metrics[metric]) for step, run in items if metric in run.metrics]
            ax.plot([s for s, _ in points], [v for _, v in points], marker="o", label=variant)
        ax.set_title(metric, fontsize=9)
        ax.set_xlabel("training step")
    for ax in list(axes.flat)[len(metrics) :]:
        ax.set_visible(False)
    if len(by_variant) > 1:
        axes.flat[0].legend(fontsize=8)
    return paths + [save_png(fig, out / "by_step.png")]


def gate(
    by_variant: dict[str, list[tuple[int, Any]]], baseline: str | None, allow_mismatch: bool = False
) -> tuple[int, str]:
    """``lch regress`` of each variant's newest checkpoint against its previous one (``baseline`` None) or the
    baseline file: the exit code (0 ok, 1 a regression) and the tables."""
    from harness.reporting.baseline import baseline_from_run, load_baseline
    from harness.reporting.gate_report import format_table
    from harness.reporting.regress import compare, exit_code

    code, text = 0, []
    for variant, items in by_variant.items():
        (step, newest), (before, previous) = items[-1], items[-2]
        against = load_baseline(baseline) if baseline else baseline_from_run(previous, f"step {before}")
        rows = compare(newest, against, allow_mismatch)
        found = exit_code(rows)
        code = max(code, found)
        name = baseline if baseline else f"step {before}"
        text += [
            f"gate, {variant}: step {step} against {name}: {'REGRESSION' if found else 'OK'}",
            format_table(rows),
            "",
        ]
    return code, "\n".join(text)


def record(out: Path, spec: Any, outcome: Any) -> Path:
    """``sweep.json``: the sweep as run."""
    from harness.core.files import write_json_atomic

    return write_json_atomic(
        out / SWEEP_FILE,
        {
            "spec": spec.model_dump(),
            "cells": [p.row() for p in outcome.prepared],
            "seconds": round(outcome.seconds, 2),
            "ray_seconds": round(outcome.ray_seconds, 2),
            "lch_cost": sweep_cost(outcome.prepared),
        },
        indent=2,
    )
