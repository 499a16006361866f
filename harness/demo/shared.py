"""What both demos share: run names and the reports."""

from __future__ import annotations

from pathlib import Path

COMMON_VARIANTS: list[tuple[str, dict]] = [  # both demos' first variants
    ("vanilla", {"pic": "none"}),
    ("naive s_cr=2", {"pic": "naive", "pic_ratio": 2.0}),
    ("ntk s_rr=4", {"pic": "ntk", "pic_ratio": 4.0}),
]


def slug(name: str) -> str:
    return name.replace(" ", "_").replace("=", "")


def write_reports(runs_dir: Path, out: Path, ppl_metric: str = "ppl_govreport/ppl",
                  longppl_metric: str = "longppl_govreport/longppl",
                  headline: list[str] | None = None) -> tuple[list[Path], dict]:
    """The demo's runs as a leaderboard (best LongPPL first; Markdown shows ``headline``) and a LongPPL vs PPL
    correlation report; returns the paths and the correlation statistics."""
    from harness.reporting.correlate import write_report
    from harness.reporting.leaderboard import leaderboard, write_leaderboard
    from harness.reporting.runs import load_runs

    runs, _ = load_runs([runs_dir])
    paths = write_leaderboard(leaderboard(runs, sort_by=longppl_metric), out / "leaderboard.csv", headline=headline)
    png, stats = write_report(runs, ppl_metric, longppl_metric, out / "correlation")
    return paths + [png, png.with_suffix(".md")], stats
