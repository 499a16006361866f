"""Runs that scored different samples: the board's caution, and ``lch leaderboard --common`` recomputing each score on
the samples every run scored (hand-computed below), by the pooling and group weighting a run of ours records, and for
another package's file (which records neither) by the rule that reproduces its reported values."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from harness.cli import main
from harness.metrics.common_samples import (
    group_leaves,
    group_stderr,
    group_value,
    mean_stderr,
    pooled_value,
    scored_digest,
    scored_values,
)
from harness.metrics.support import SAMPLES_WHY, samples_support
from harness.plugin.finish_results import record_scored
from tests.reporting.test_reporting import markdown_tables, read_csv

DIRS = {
    "t1": {"score": True, "len_1024": True, "len_2048": True},
    "t2": {"score": True, "rouge1": True},
    "ppl_govreport": {"ppl": False},
    "grp": {"score": True},
}
# per document: (length, score) of t1; None: left unscored (truncation=skip)
T1 = {
    "A": [(1024, 100.0), (1024, 0.0), (2048, 100.0), (2048, 100.0)],
    "B": [(1024, 100.0), (1024, 100.0), (2048, 0.0), (2048, None)],
}
T2 = {"A": [100.0, 100.0], "B": [0.0, 100.0]}
NLL = {"A": [[10.0, 5], [6.0, 5]], "B": [[8.0, 4], [9.0, 6]]}  # ppl_govreport: [summed NLL, tokens] per document


def _t1_rows(run: str) -> list[dict]:
    rows = []
    for doc, (length, score) in enumerate(T1[run]):
        row = {
            "doc_id": doc,
            "doc_hash": f"{run}{doc}",
            "filter": "none",
            "n_skipped": int(score is None),
            "metrics": ["n_skipped"],
        }
        if score is not None:
            row.update({"score": score, f"len_{length}": score})
            row["metrics"] += ["score", f"len_{length}"]
        rows.append(row)
    return rows


def _results(run: str) -> dict:
    """t1's, t2's and the perplexity's aggregates as lm-eval would report them from the rows (worked by hand), and
    the group ``grp`` = the plain mean of t1's and t2's scores (A: (75 + 100) / 2; B: (200 / 3 + 50) / 2)."""
    if run == "A":
        t1 = {
            "score,none": 75.0,
            "score_stderr,none": 25.0,
            "len_1024,none": 50.0,
            "len_2048,none": 100.0,
            "n_len_1024,none": 2,
            "n_len_2048,none": 2,
            "n_skipped,none": 0,
        }
        t2 = {"score,none": 100.0, "score_stderr,none": 0.0, "rouge1,none": 61.0}
        ppl, group = math.exp(16.0 / 10), 87.5
    else:
        t1 = {
            "score,none": 200.0 / 3,
            "score_stderr,none": 100.0 / 3,
            "len_1024,none": 100.0,
            "len_2048,none": 0.0,
            "n_len_1024,none": 2,
            "n_len_2048,none": 1,
            "n_skipped,none": 1,
        }
        t2 = {"score,none": 50.0, "score_stderr,none": 50.0, "rouge1,none": 12.0}
        ppl, group = math.exp(17.0 / 10), (200.0 / 3 + 50.0) / 2
    return {"t1": t1, "t2": t2, "ppl_govreport": {"ppl,none": ppl}, "grp": {"score,none": group}}


def write_runs(root: Path, log_samples: bool = True) -> list[Path]:
    """Runs A (model m1) and B (model m2) of t1, t2, a perplexity and the group grp; B skipped t1's document 3."""
    folders = []
    for run, date in (("A", 100.0), ("B", 200.0)):
        folder = root / run
        folder.mkdir(parents=True)
        samples = {
            "t1": _t1_rows(run),
            "t2": [
                {"doc_id": d, "doc_hash": f"{run}{d}", "score": s, "rouge1": 50.0, "metrics": ["score", "rouge1"]}
                for d, s in enumerate(T2[run])
            ],
            "ppl_govreport": [
                {"doc_id": d, "doc_hash": "h", "ppl": pair, "metrics": ["ppl"]} for d, pair in enumerate(NLL[run])
            ],
        }
        data = {
            "results": _results(run),
            "higher_is_better": DIRS,
            "date": date,
            "config": {"model": "hf-pic", "model_args": {"pretrained": f"m{run}"}},
            "group_subtasks": {"grp": ["t1", "t2"]},
            "configs": {"t1": {"metadata": {"lch_support": [samples_support("score").to_json()]}}},
            "lch_cautions": {
                "t1": [f"t1/score rests on {4 if run == 'A' else 3} samples, fewer than 25: {SAMPLES_WHY}"]
            },
            "n-samples": {
                "t1": {"original": 4, "effective": 4},
                "t2": {"original": 2, "effective": 2},
                "ppl_govreport": {"original": 2, "effective": 2},
            },
        }
        if log_samples:
            data["lch_scored"] = record_scored({"samples": samples})  # what a run of ours records
            for task, rows in samples.items():
                (folder / f"samples_{task}_{date}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (folder / f"results_{date}.json").write_text(json.dumps(data))
        folders.append(folder)
    return folders


def test_another_packages_pooling_is_found_by_reproducing_the_reported_value():
    from harness.reporting.common import pooling_rule, reproducing

    def rule_of(values: list, reported: float) -> str | None:  # a task that declares no pooling (None)
        return pooling_rule(None, "score,none", values, reported)

    assert rule_of([100.0, 0.0, 100.0], 200.0 / 3) == "mean"
    assert rule_of([(10.0, 5), (6.0, 5)], 1.6) == "pooled"
    assert rule_of([(10.0, 5), (6.0, 5)], math.exp(1.6)) == "pooled_exp"
    # a mean of per-document log-perplexities (2 and 3) is not the pooled 16 / 7
    assert rule_of([(10.0, 5), (6.0, 2)], math.exp((2.0 + 3.0) / 2)) is None
    assert rule_of([1.0, 3.0], 2.5) is None  # a weighted mean (a judge's category weights)
    assert rule_of([], 1.0) is None
    # a task of ours is read as it declared, whatever the numbers would suggest
    assert pooling_rule({"score": None}, "score,none", [100.0, 0.0, 100.0], 200.0 / 3) is None
    assert pooling_rule({"score": "mean"}, "score,none", [1.0, 3.0], 2.5) == "mean"
    assert reproducing({False: 87.5, True: 500.0 / 6}, 87.5 * (1 + 1e-12)) is False
    assert reproducing({False: 87.5, True: 500.0 / 6}, 85.0) is None
    assert pooled_value([(10.0, 5)], "pooled_exp") == math.exp(2.0)
    # sd of (100, 0, 100) with n - 1: sqrt(2 * (100/3)^2 + (200/3)^2) / sqrt(2) = 57.735; / sqrt(3) = 33.333
    assert mean_stderr([100.0, 0.0, 100.0]) == pytest.approx(100.0 / 3, rel=1e-12)
    assert mean_stderr([5.0]) is None
    assert group_value([75.0, 100.0], [4, 2], False) == 87.5
    assert group_value([75.0, 100.0], [4, 2], True) == pytest.approx(500.0 / 6)
    assert group_leaves("g", {"g": ["a", "h"], "h": ["b", "c"]}) == ["a", "b", "c"]


def test_group_formulas_equal_lm_evals_where_its_release_has_them():
    """A group's value and stderr are written here (lm-eval's main lacks ``unweighted_mean_stderr``); by hand, and
    equal to the installed lm-eval's functions where it has them."""
    from lm_eval.api import metrics as lm_eval_metrics

    # se 3 and 4 averaged plainly: sqrt(9 + 16) / 2 = 2.5; pooled by size 4 and 2:
    # (3 * 9 * 4 + 1 * 16 * 2) / (6 - 2) = 35, sqrt(35 / 6)
    assert group_stderr([3.0, 4.0], [4, 2], False) == pytest.approx(2.5, rel=1e-12)
    assert group_stderr([3.0, 4.0], [4, 2], True) == pytest.approx(math.sqrt(35.0 / 6), rel=1e-12)
    cases = [([75.0, 100.0, 12.5], [4, 2, 9], [3.0, 4.0, 0.5]), ([1.0, 2.0], [10, 10], [0.2, 0.1])]
    for values, sizes, stderrs in cases:
        for weighted in (False, True):
            assert group_value(values, sizes, weighted) == pytest.approx(
                lm_eval_metrics.aggregate_subtask_metrics(values, sizes, weighted), rel=1e-12
            )
        assert group_stderr(stderrs, sizes, True) == pytest.approx(
            float(lm_eval_metrics.pooled_sample_stderr(stderrs, sizes)), rel=1e-12
        )
        unweighted = getattr(lm_eval_metrics, "unweighted_mean_stderr", None)
        if unweighted is not None:
            assert group_stderr(stderrs, sizes, False) == pytest.approx(float(unweighted(stderrs)), rel=1e-12)


def test_a_run_records_which_documents_each_score_rests_on():
    """``lch_scored``: per task and results key the documents with a number (bookkeeping counts left out), by a
    digest of their ids that is the same whatever their order."""
    rows_b = _t1_rows("B")
    recorded = record_scored({"samples": {"t1": rows_b}})["t1"]
    assert sorted(recorded) == ["len_1024,none", "len_2048,none", "score,none"]
    assert [recorded[k]["n"] for k in ("score,none", "len_1024,none", "len_2048,none")] == [3, 2, 1]
    assert recorded["score,none"]["digest"] == scored_digest([2, 0, 1]) != scored_digest([0, 1, 2, 3])
    assert (
        scored_values([{"doc_id": 7, "score": True, "em": [1.0, 0], "f1": "x", "metrics": ["score", "em", "f1"]}]) == {}
    )
    assert record_scored({}) == {}  # no samples logged: nothing recorded


def test_the_default_board_says_once_that_the_runs_scored_different_samples(tmp_path):
    a, b = write_runs(tmp_path)
    out = tmp_path / "board.csv"
    assert main(["leaderboard", str(a), str(b), "-o", str(out)]) == 0
    sentence = (
        "t1: the runs scored different samples (len_2048 on 1 to 2 documents; score on 3 to 4 documents; "
        "n_skipped 0 to 1); `lch leaderboard --common` compares them on the samples every run scored"
    )
    assert all(sentence in row["cautions"] for row in read_csv(out))
    text = out.with_suffix(".md").read_text()
    assert text.count(sentence) == 1 and f"- {sentence} (every run)" in text
    assert "t2: the runs" not in text and "ppl_govreport: the runs" not in text  # same documents: nothing to say


def test_common_recomputes_each_score_on_the_samples_every_run_scored(tmp_path):
    a, b = write_runs(tmp_path)
    out = tmp_path / "common.csv"
    assert main(["leaderboard", str(a), str(b), "-o", str(out), "--common"]) == 0
    rows = {json.loads(r["model_args"])["pretrained"]: r for r in read_csv(out)}
    value = lambda run, column: float(rows[run][column])  # noqa: E731
    # t1's score on documents 0-2 (B skipped 3): A (100 + 0 + 100) / 3, its stderr 100 / 3; B as it reported
    assert value("mA", "t1/score") == pytest.approx(200.0 / 3) and value("mA", "t1/score_stderr") == pytest.approx(
        100.0 / 3
    )
    assert value("mB", "t1/score") == 200.0 / 3 and value("mB", "t1/score_stderr") == 100.0 / 3
    assert value("mA", "t1/n_score") == value("mB", "t1/n_score") == 3
    # per length: 1024 held by both (as reported), 2048 on document 2 only: A 100, B 0, one sample each
    assert (value("mA", "t1/len_1024"), value("mB", "t1/len_1024")) == (50.0, 100.0)
    assert (value("mA", "t1/len_2048"), value("mB", "t1/len_2048")) == (100.0, 0.0)
    assert value("mA", "t1/n_len_2048") == value("mB", "t1/n_len_2048") == 1
    # the group: the plain mean of its tasks (the rule that reproduces 87.5, not the size-weighted 83.3), recomputed
    assert value("mA", "grp/score") == pytest.approx((200.0 / 3 + 100.0) / 2)
    assert value("mB", "grp/score") == pytest.approx((200.0 / 3 + 50.0) / 2)
    assert value("mA", "grp/n_score") == 5
    # the pooled perplexity on the same documents: as reported
    assert value("mA", "ppl_govreport/ppl") == math.exp(1.6) and value("mB", "ppl_govreport/ppl") == math.exp(1.7)
    # rouge1's logged values (50, 50) do not make its reported 61 / 12: left out, and the totals of the whole runs
    assert "t2/rouge1" not in rows["mA"] and "t1/n_skipped" not in rows["mA"]
    text = out.with_suffix(".md").read_text()
    assert text.splitlines()[0].endswith("(on common samples)")
    assert "Left out (no pooling of its logged per-sample values reproduces its reported value): t2/rouge1." in text
    assert "scored different samples" not in text  # the board compares on common samples: nothing differs
    # what the score rests on, said from the common samples (3), not as each run recorded it (4, 3)
    assert f"- t1/score rests on 3 samples, fewer than 25: {SAMPLES_WHY} (every run)" in text
    assert "rests on 4 samples" not in text
    diagnostics = markdown_tables(text)["Diagnostics"]
    assert ["t1/n_len_2048", "1", "1"] in diagnostics and ["t1/n_score", "3", "3"] in diagnostics


def test_common_refuses_runs_without_logged_samples_in_one_line(tmp_path, capsys):
    a, b = write_runs(tmp_path, log_samples=False)
    out = tmp_path / "common.csv"
    assert main(["leaderboard", str(a), str(b), "-o", str(out), "--common"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--log_samples" in err and str(a) in err
    assert not out.exists()


def test_agree_compares_aggregates_on_the_samples_both_runs_scored(tmp_path):
    """``lch agree``: t1's aggregates on documents 0-2 (B skipped 3), with their n; t2's as reported (the same
    documents)."""
    a, b = write_runs(tmp_path)
    out = tmp_path / "agree"
    assert main(["agree", str(a), str(b), "-o", str(out)]) == 1  # the runs differ: exit 1, report written
    tasks = {t["task"]: t for t in json.loads(out.with_suffix(".json").read_text())["tasks"]}
    score = tasks["t1"]["metrics"]["score"]
    assert (score["a"], score["b"], score["n_common"]) == (pytest.approx(200.0 / 3), 200.0 / 3, 3)
    length = tasks["t1"]["metrics"]["len_2048"]
    assert (length["a"], length["b"], length["n_common"]) == (100.0, 0.0, 1)
    assert tasks["t2"]["metrics"]["rouge1"] == {"a": 61.0, "b": 12.0, "delta": -49.0, "rel": 49.0 / 61.0}
    text = out.with_suffix(".md").read_text()
    assert "| score (on the 3 samples both scored) |" in text


def test_common_recomputes_judged_quality_from_lch_judges_judgements(tmp_path):
    """A judged task logs each sample's judge item (no number); ``lch judge`` writes each sample's quality beside the
    samples (None: the judge's reply was unparsable and dropped). A: 50, 70, 90 (mean 70); B: 40, unparsed, 80
    (mean 60). On documents 0 and 2: A (50 + 90) / 2 = 70, B 60, n 2."""
    for run, date, qualities, reported in (
        ("A", 100.0, [50.0, 70.0, 90.0], 70.0),
        ("B", 200.0, [40.0, None, 80.0], 60.0),
    ):
        folder = tmp_path / run
        folder.mkdir()
        rows = [
            {
                "doc_id": d,
                "quality": {"kind": "longbench_write", "instruction": "i", "response": "r"},
                "metrics": ["quality"],
            }
            for d in range(3)
        ]
        (folder / f"samples_jt_{date}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (folder / f"judgements_jt_{date}.jsonl").write_text(
            "".join(
                json.dumps({"doc_id": d, "judge": "j", "parsed": None if q is None else {}, "quality": q}) + "\n"
                for d, q in enumerate(qualities)
            )
        )
        (folder / f"results_{date}.json").write_text(
            json.dumps(
                {
                    "results": {"jt": {"quality,none": reported}},
                    "higher_is_better": {"jt": {"quality": True}},
                    "date": date,
                    "config": {"model": "hf-pic", "model_args": {"pretrained": f"m{run}"}},
                }
            )
        )
    out = tmp_path / "common.csv"
    assert main(["leaderboard", str(tmp_path / "A"), str(tmp_path / "B"), "-o", str(out), "--common"]) == 0
    rows = {json.loads(r["model_args"])["pretrained"]: r for r in read_csv(out)}
    assert (float(rows["mA"]["jt/quality"]), float(rows["mB"]["jt/quality"])) == (70.0, 60.0)
    assert float(rows["mA"]["jt/n_quality"]) == float(rows["mB"]["jt/n_quality"]) == 2


def test_common_and_agree_pool_as_the_tasks_declare_not_as_the_numbers_suggest(tmp_path):
    """A task of ours records how each metric pools (``lch_metric_pooling``): t2's rouge1 declared not poolable is left
    out even where its logged values would reproduce a mean (both 50 here), and t1's score declared a mean is
    recomputed as a mean (A on documents 0-2: 200 / 3)."""
    a, b = write_runs(tmp_path)
    for folder in (a, b):
        path = next(folder.glob("results_*.json"))
        data = json.loads(path.read_text())
        data["results"]["t2"]["rouge1,none"] = 50.0  # a mean of its logged values, which the old guess would take
        data["configs"]["t1"]["metadata"]["lch_metric_pooling"] = {
            "score": "mean",
            "len_1024": "mean",
            "len_2048": "mean",
            "n_skipped": "sum",
        }
        data["configs"]["t2"] = {"metadata": {"lch_metric_pooling": {"score": "mean", "rouge1": None}}}
        path.write_text(json.dumps(data))
    out = tmp_path / "common.csv"
    assert main(["leaderboard", str(a), str(b), "-o", str(out), "--common"]) == 0
    rows = {json.loads(r["model_args"])["pretrained"]: r for r in read_csv(out)}
    assert float(rows["mA"]["t1/score"]) == pytest.approx(200.0 / 3) and "t2/rouge1" not in rows["mA"]
    assert "Left out (its task declares no pooling of its per-sample values over documents): t2/rouge1." in (
        out.with_suffix(".md").read_text()
    )
    agreed = tmp_path / "agree"
    assert main(["agree", str(a), str(b), "-o", str(agreed)]) == 1
    tasks = {t["task"]: t for t in json.loads(agreed.with_suffix(".json").read_text())["tasks"]}
    assert tasks["t1"]["metrics"]["score"]["n_common"] == 3


def test_common_recomputes_a_group_by_the_weighting_the_run_recorded(tmp_path):
    """A run of ours records how its groups weight their tasks (``lch_group_weighting``): recorded weighted by size,
    grp is recomputed so even though its reported 87.5 is the plain mean: A (200 / 3 x 3 + 100 x 2) / 5 = 80,
    B (200 / 3 x 3 + 50 x 2) / 5 = 60 on the common documents (t1: 3, t2: 2)."""
    a, b = write_runs(tmp_path)
    for folder in (a, b):
        path = next(folder.glob("results_*.json"))
        data = json.loads(path.read_text())
        data["lch_group_weighting"] = {"grp": True}
        path.write_text(json.dumps(data))
    out = tmp_path / "common.csv"
    assert main(["leaderboard", str(a), str(b), "-o", str(out), "--common"]) == 0
    rows = {json.loads(r["model_args"])["pretrained"]: r for r in read_csv(out)}
    assert float(rows["mA"]["grp/score"]) == pytest.approx(80.0)
    assert float(rows["mB"]["grp/score"]) == pytest.approx(60.0)
