"""No number that could not be computed passes a report or a gate: a results file holding NaN (lm-eval writes a NaN
aggregation as NaN), a run of ours that left a metric out with its reason (``lch_absent``), a hand-edited or damaged
baseline, a results file with no metric at all. Each ends in one line and exit 2, or, in a leaderboard, an empty
cell; nothing is written from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from tests.reporting.test_reporting import write_run

DIRS = {"ppl_govreport": {"ppl": False}, "longbench_write": {"quality": True, "length": True}}


def _run(folder: Path, ppl: float, quality: object = 50.0, date: float = 100.0, absent: dict | None = None) -> Path:
    results = {"ppl_govreport": {"ppl,none": ppl}, "longbench_write": {"length,none": 900.0}}
    if quality is not None:
        results["longbench_write"]["quality,none"] = quality
    path = write_run(folder, {"pretrained": "m"}, date, results, DIRS)
    if absent is not None:
        data = json.loads(path.read_text())
        path.write_text(json.dumps({**data, "lch_absent": absent}))
    return folder


def _error(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len([line for line in lines if line.startswith("lch: error: ")]) == 1, lines
    return lines[-1]


def test_regress_refuses_a_run_holding_nan_and_a_run_that_left_a_gated_metric_out(tmp_path, capsys):
    baseline = tmp_path / "base.json"
    assert main(["regress", str(_run(tmp_path / "good", 10.0)), "--baseline", str(baseline), "--update-baseline"]) == 0
    capsys.readouterr()
    nan_run = _run(tmp_path / "nan", 10.0, quality=float("nan"))
    assert main(["regress", str(nan_run), "--baseline", str(baseline)]) == 2
    assert _error(capsys).startswith(
        f"lch: error: {nan_run}/results_100.0.json: longbench_write/quality has no value in "
        "this run (nan in the results file (it could not be computed)): it cannot be "
        "gated"
    )
    why = "the judge at http://127.0.0.1:9/v1 answered 0 of 3 requests (http_500 x3)"
    left_out = _run(tmp_path / "absent", 10.0, quality=None, absent={"longbench_write": {"quality": why}})
    assert main(["regress", str(left_out), "--baseline", str(baseline), "--junit", str(tmp_path / "j.xml")]) == 2
    assert f"longbench_write/quality has no value in this run (not computed: {why})" in _error(capsys)
    import xml.etree.ElementTree as ET

    error = ET.parse(tmp_path / "j.xml").getroot().find("testcase/error")  # a CI reader sees why, not a pass
    assert error is not None and why in error.get("message")
    # a run that simply lacks the metric (another task list) is a regression: a gate never passes on missing data
    plain = write_run(tmp_path / "missing", {"pretrained": "m"}, 100.0, {"ppl_govreport": {"ppl,none": 10.0}}, DIRS)
    assert main(["regress", str(plain), "--baseline", str(baseline)]) == 1


def test_no_baseline_is_made_of_a_run_that_could_not_compute_a_score(tmp_path, capsys):
    for name, kwargs in (
        ("nan", {"quality": float("nan")}),
        ("absent", {"quality": None, "absent": {"longbench_write": {"quality": "judge failed"}}}),
    ):
        baseline = tmp_path / f"{name}.json"
        assert (
            main(
                [
                    "regress",
                    str(_run(tmp_path / name, 10.0, **kwargs)),
                    "--baseline",
                    str(baseline),
                    "--update-baseline",
                ]
            )
            == 2
        )
        assert "longbench_write/quality has no value in this run" in _error(capsys)
        assert not baseline.exists()


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda m: m.update(value=float("nan")), "metric 'ppl_govreport/ppl' needs a finite numeric 'value' (got nan)"),
        (lambda m: m.update(value=True), "metric 'ppl_govreport/ppl' needs a finite numeric 'value' (got True)"),
        (
            lambda m: m.update(higher_is_better="false"),
            "metric 'ppl_govreport/ppl' needs 'higher_is_better' true or false (got 'false')",
        ),
        (lambda m: m.update(stderr=-1), "metric 'ppl_govreport/ppl' has stderr -1: give a finite number >= 0 or null"),
        (lambda m: m.update(rel_tol=float("inf")), "ppl_govreport/ppl rel_tol is inf: give a finite number >= 0"),
    ],
)
def test_a_hand_edited_baseline_is_refused_naming_the_field(edit, message, tmp_path, capsys):
    """The PPL rises 81 %: a baseline whose direction became the string "false" would call it an improvement."""
    baseline = tmp_path / "base.json"
    assert main(["regress", str(_run(tmp_path / "good", 10.0)), "--baseline", str(baseline), "--update-baseline"]) == 0
    data = json.loads(baseline.read_text())
    edit(data["metrics"]["ppl_govreport/ppl"])
    baseline.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["regress", str(_run(tmp_path / "worse", 18.1)), "--baseline", str(baseline)]) == 2
    assert _error(capsys) == f"lch: error: {baseline}: {message}" + (
        "; remake the baseline with --update-baseline" if "value" in message else ""
    )


def test_reports_refuse_results_without_any_metric_and_show_nan_as_an_empty_cell(tmp_path, capsys):
    empty = write_run(tmp_path / "empty", {"pretrained": "m"}, 100.0, {}, {})
    assert main(["leaderboard", str(tmp_path / "empty"), "-o", str(tmp_path / "board.csv")]) == 2
    assert _error(capsys) == (f"lch: error: {empty}: its results hold no metric (an empty 'results' object)")
    assert not list(tmp_path.glob("board*"))
    _run(tmp_path / "nan", 10.0, quality=float("nan"))
    assert main(["leaderboard", str(tmp_path / "nan"), "-o", str(tmp_path / "board.csv")]) == 0
    text = (tmp_path / "board.csv").read_text()
    assert "nan" not in text.lower()
    header, row = text.strip().splitlines()[:2]
    cells = dict(zip(header.split(","), row.split(",")))
    assert cells["longbench_write/length"] == "900.0" and "longbench_write/quality" not in cells
