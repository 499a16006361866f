"""What both demos share: the real demo's grid (whose first variants the tiny demo runs too), run names, reports."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

DEMO_SWEEP = Path(__file__).with_name("demo_sweep.yaml")  # the real demo's grid: variants, tasks, lengths, documents


@functools.cache
def demo_grid() -> dict[str, Any]:
    """The real demo's sweep as :data:`DEMO_SWEEP` declares it (before the run-time paths are added)."""
    import yaml

    return yaml.safe_load(DEMO_SWEEP.read_text(encoding="utf-8"))


def variants() -> list[tuple[str, dict]]:
    """The real demo's PIC variants, in order: ``(name, model args)``; the tiny demo runs the first three too."""
    return list(demo_grid()["variants"].items())


def slug(name: str) -> str:
    return name.replace(" ", "_").replace("=", "")


def write_reports(
    runs_dir: Path,
    out: Path,
    ppl_metric: str = "ppl_govreport/ppl",
    longppl_metric: str = "longppl_govreport/longppl",
    headline: list[str] | None = None,
) -> tuple[list[Path], dict]:
    """The demo's runs as a leaderboard (best LongPPL first; Markdown shows ``headline``) and a LongPPL vs PPL
    correlation report; returns the paths and the correlation statistics."""
    from harness.reporting.correlate import write_report
    from harness.reporting.leaderboard import leaderboard, write_leaderboard
    from harness.reporting.runs import load_runs

    runs, _ = load_runs([runs_dir])
    paths = write_leaderboard(leaderboard(runs, sort_by=longppl_metric), out / "leaderboard.csv", headline=headline)
    png, stats = write_report(runs, ppl_metric, longppl_metric, out / "correlation")
    return paths + [png, png.with_suffix(".md")], stats
