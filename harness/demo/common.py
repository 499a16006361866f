"""What both demos share: saving an lm-eval results dict as ``--output_path`` would, and the reports."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path


def save_run(results: dict, run_dir: Path) -> Path:
    """Write ``results`` as ``<run_dir>/results_<date>.json`` (lm-eval's layout, so ``lch`` reports read it)."""
    from lm_eval.utils import handle_non_serializable

    run_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.fromtimestamp(results["date"]).strftime("%Y-%m-%dT%H-%M-%S.%f")
    path = run_dir / f"results_{stamp}.json"
    path.write_text(json.dumps(results, indent=2, default=handle_non_serializable), encoding="utf-8")
    return path


def slug(name: str) -> str:
    return name.replace(" ", "_").replace("=", "")


def write_reports(runs_dir: Path, out: Path, ppl_metric: str = "ppl_govreport/ppl",
                  longppl_metric: str = "longppl_govreport/longppl") -> tuple[list[Path], dict]:
    """The demo's runs as a leaderboard (CSV / Markdown / HTML, best LongPPL first) and a correlation
    report of LongPPL vs PPL across the variants (scatter PNG, Markdown, JSON). Returns the paths and the
    correlation statistics."""
    from harness.reporting.correlate import write_report
    from harness.reporting.leaderboard import leaderboard, write_leaderboard
    from harness.reporting.runs import load_runs

    runs, _ = load_runs([runs_dir])
    paths = write_leaderboard(*leaderboard(runs, sort_by=longppl_metric), out / "leaderboard.csv")
    png, stats = write_report(runs, ppl_metric, longppl_metric, out / "correlation")
    return paths + [png, png.with_suffix(".md")], stats
