"""lch regress's paired gate on runs written here (results + samples files as lm-eval writes them, RULER-like: a 0/100
score per document with its len_<L> and n_len_<L>): the same samples pass, a damaged run (samples flipped from 100
to 0) fails with its interval and p in the table and the JUnit report, a small drop that is no evidence passes, a
baseline without samples keeps the tolerance gate, and bad input is one line."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from math import comb
from pathlib import Path

import pytest

from harness.cli import main
from harness.reporting.baseline import load_baseline
from harness.reporting.regress import compare
from harness.reporting.runs import read_run

STAMP = "2026-01-01T00-00-00.000001"
LENGTHS = [1024, 2048] * 50  # 100 documents, 50 of each length
BASE = [100.0] * 80 + [0.0] * 20  # 80 right: the first 80 documents


def write_samples_run(
    folder: Path,
    scores: list[float],
    lengths: list[int] = LENGTHS,
    template: str = "none",
    hashes: dict[int, str] | None = None,
    samples: bool = True,
    dtype: str = "float32",
    options: dict | None = None,
    task: str = "qa",
) -> Path:
    """A run of one per-length task: ``score``, ``len_<L>`` (means x 100 as lm-eval aggregates them) and ``n_len_<L>``
    in the results, and (``samples``) one sample per document with its doc_hash (``h<i>`` unless ``hashes``)."""
    folder.mkdir(parents=True, exist_ok=True)
    results = {"score,none": sum(scores) / len(scores), "score_stderr,none": 4.0}
    for length in sorted(set(lengths)):
        values = [s for s, x in zip(scores, lengths) if x == length]
        results[f"len_{length},none"] = sum(values) / len(values)
        results[f"n_len_{length},none"] = len(values)
    names = [k.split(",")[0] for k in results if "_stderr" not in k]
    data = {
        "results": {task: results},
        "higher_is_better": {task: {n: True for n in names}},
        "configs": {
            task: {
                "metadata": {
                    "lch_metric_roles": {n: "bookkeeping" if n.startswith("n_") else "score" for n in names},
                    "lch_configuration": {
                        "lengths": sorted(set(lengths)),
                        "chat_template": template != "none",
                        **(options or {}),
                    },
                }
            }
        },
        "config": {
            "model": "hf-pic",
            "model_args": {"pretrained": "m"},
            "lch_run": {"engine": "hf-pic", "dtype": dtype, "chat_template": template},
        },
        "date": 1.0,
    }
    (folder / f"results_{STAMP}.json").write_text(json.dumps(data))
    if samples:
        rows = [
            {
                "doc_id": i,
                "doc_hash": (hashes or {}).get(i, f"h{i}"),
                "filter": "none",
                "metrics": ["score", f"len_{x}", f"n_len_{x}"],
                "score": s,
                f"len_{x}": s,
                f"n_len_{x}": 1,
            }
            for i, (s, x) in enumerate(zip(scores, lengths))
        ]
        (folder / f"samples_{task}_{STAMP}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def flipped(indices: range | list[int]) -> list[float]:
    """The baseline's scores with the documents at ``indices`` (all right in it) scored 0."""
    return [0.0 if i in set(indices) else s for i, s in enumerate(BASE)]


def _error(capsys) -> str:
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len([line for line in lines if line.startswith("lch: error: ")]) == 1, lines
    return lines[-1]


@pytest.fixture
def paired(tmp_path, capsys):
    baseline = tmp_path / "b.json"
    assert (
        main(
            [
                "regress",
                str(write_samples_run(tmp_path / "base", BASE)),
                "--baseline",
                str(baseline),
                "--update-baseline",
                "--paired",
            ]
        )
        == 0
    )
    said = capsys.readouterr().out
    assert "paired: 3 of 3 metrics keep their per-document values" in said
    return baseline


def test_the_baseline_keeps_each_scores_samples_by_doc_id_with_doc_hash(paired):
    saved = json.loads(paired.read_text())["metrics"]
    assert sorted(saved) == ["qa/len_1024", "qa/len_2048", "qa/score"]  # n_len_<L>: bookkeeping, never gated
    assert saved["qa/score"]["samples"] == {str(i): [s, f"h{i}"] for i, s in enumerate(BASE)}
    # a per-length score keeps the documents of its length only
    assert saved["qa/len_2048"]["samples"] == {str(i): [BASE[i], f"h{i}"] for i in range(1, 100, 2)}


def test_identical_samples_pass_and_a_damaged_run_fails_with_interval_and_p(paired, tmp_path, capsys):
    assert main(["regress", str(write_samples_run(tmp_path / "same", BASE)), "--baseline", str(paired)]) == 0
    out = capsys.readouterr().out
    assert "95% interval" in out and "MDE" in out and out.rstrip().endswith("OK")
    damaged = write_samples_run(tmp_path / "damaged", flipped(range(30)))  # 30 right answers lost, 15 per length
    junit = tmp_path / "junit.xml"
    assert main(["regress", str(damaged), "--baseline", str(paired), "--junit", str(junit)]) == 1
    out = capsys.readouterr().out
    score = next(line for line in out.splitlines() if line.startswith("qa/score"))
    assert score.split()[3] == "-30" and score.endswith("regressed") and " 100 " in score
    rows = {r.metric: r for r in compare(read_run(next(damaged.glob("results_*.json"))), load_baseline(paired))}
    d = rows["qa/score"].paired
    # exact McNemar: 30 discordant pairs, all one way: p = 2 * 0.5^30
    assert (d.n, d.delta, d.test, d.p_value) == (100, -30.0, "McNemar (exact)", pytest.approx(2 * 0.5**30))
    assert d.low < -30 < d.high < 0
    assert (rows["qa/len_1024"].paired.n, rows["qa/len_1024"].paired.delta) == (50, -30.0)
    suite = ET.parse(junit).getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("3", "3")
    case = next(c for c in suite.iter("testcase") if c.get("name") == "qa/score")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert float(props["p_value"]) == pytest.approx(2 * 0.5**30, rel=1e-5) and props["n"] == "100"
    assert float(props["ci_low"]) == pytest.approx(d.low) and float(props["ci_high"]) == pytest.approx(d.high)
    message = case.find("failure").get("message")
    assert "paired delta -30" in message and f"[{d.low:+.4g}, {d.high:+.4g}]" in message and "p=1.86e-09" in message


def test_a_small_insignificant_drop_passes_and_a_significant_one_within_tolerance_passes(paired, tmp_path, capsys):
    # 2 right answers lost: -2 points, McNemar p = 2 * 0.5^2 = 0.5: no evidence of a regression
    small = write_samples_run(tmp_path / "small", flipped([0, 1]))
    assert main(["regress", str(small), "--baseline", str(paired)]) == 0
    row = next(
        r
        for r in compare(read_run(next(small.glob("results_*.json"))), load_baseline(paired))
        if r.metric == "qa/score"
    )
    assert (row.paired.delta, row.paired.p_value, row.status) == (-2.0, pytest.approx(0.5), "ok")
    # 6 lost and 1 gained: two-sided exact p = 2 * (1 + 7) / 2^7 = 0.125 > 0.05: ok at alpha 0.05, fails at 0.2
    mixed = flipped(range(6))
    mixed[80] = 100.0
    run = write_samples_run(tmp_path / "mixed", mixed)
    assert main(["regress", str(run), "--baseline", str(paired)]) == 0
    rows = {r.metric: r for r in compare(read_run(next(run.glob("results_*.json"))), load_baseline(paired), alpha=0.2)}
    assert rows["qa/score"].paired.p_value == pytest.approx(2 * (comb(7, 0) + comb(7, 1)) / 2**7)
    assert main(["regress", str(run), "--baseline", str(paired), "--alpha", "0.2"]) == 1
    # a significant drop (30 points) within a declared tolerance of 40 points passes
    wide = tmp_path / "wide.json"
    assert (
        main(
            [
                "regress",
                str(tmp_path / "base"),
                "--baseline",
                str(wide),
                "--update-baseline",
                "--paired",
                "--abs-tol",
                "40",
            ]
        )
        == 0
    )
    assert (
        main(["regress", str(write_samples_run(tmp_path / "damaged", flipped(range(30)))), "--baseline", str(wide)])
        == 0
    )
    capsys.readouterr()


def test_per_length_metrics_pair_on_their_own_documents(paired, tmp_path):
    # only 2048-token documents damaged (every odd index among the first 80 -> 40 of them): len_1024 unchanged
    run = write_samples_run(tmp_path / "long", flipped(range(1, 80, 2)))
    rows = {r.metric: r for r in compare(read_run(next(run.glob("results_*.json"))), load_baseline(paired))}
    assert (rows["qa/len_1024"].paired.n, rows["qa/len_1024"].paired.delta, rows["qa/len_1024"].status) == (
        50,
        0.0,
        "ok",
    )
    assert (rows["qa/len_2048"].paired.n, rows["qa/len_2048"].paired.delta) == (50, -80.0)
    assert rows["qa/len_2048"].status == "regressed" and rows["qa/score"].status == "regressed"


def test_other_documents_are_not_comparable_unless_allowed(paired, tmp_path, capsys):
    other = write_samples_run(tmp_path / "other", BASE, hashes={3: "changed", 7: "changed"})
    assert main(["regress", str(other), "--baseline", str(paired)]) == 3
    # documents 3 and 7 are of 2048 tokens: len_1024 pairs whole, len_2048 is the first metric refused
    assert _error(capsys) == (
        "lch: error: not comparable: qa/len_2048: 2 of the baseline's 50 documents are other inputs in the run "
        "(doc_hash differs; first doc_id 3) (compare runs of the same documents, or pass --allow-mismatch to gate on "
        "the others)"
    )
    assert main(["regress", str(other), "--baseline", str(paired), "--allow-mismatch"]) == 0
    out = capsys.readouterr().out
    assert "note: qa/score: 2 documents left out (doc_hash differs from the baseline's)" in out
    rows = {
        r.metric: r
        for r in compare(read_run(next(other.glob("results_*.json"))), load_baseline(paired), allow_mismatch=True)
    }
    assert rows["qa/score"].paired.n == 98 and rows["qa/len_2048"].paired.n == 48


def test_a_run_without_samples_is_gated_on_aggregates_with_a_note(paired, tmp_path, capsys):
    capsys.readouterr()
    assert (
        main(["regress", str(write_samples_run(tmp_path / "plain", BASE, samples=False)), "--baseline", str(paired)])
        == 0
    )
    out = capsys.readouterr().out
    assert "note: qa/score: the run logged no samples of qa: gated on the aggregate" in out
    assert "95% interval" not in out and out.rstrip().endswith("OK")  # no row paired: the tolerance gate's table
    # aggregate gate: the score 78 vs 80 within 2 x sqrt(4^2 + 4^2) = 11.3; len_<L> (no stderr) 78 vs 80 beyond 0.008
    assert (
        main(
            [
                "regress",
                str(write_samples_run(tmp_path / "small", flipped([0, 1]), samples=False)),
                "--baseline",
                str(paired),
            ]
        )
        == 1
    )
    assert capsys.readouterr().out.rstrip().endswith("REGRESSION")
    # the tolerance gate on a paired baseline, asked for: the same verdicts as without samples
    damaged = write_samples_run(tmp_path / "damaged", flipped(range(30)))
    assert main(["regress", str(damaged), "--baseline", str(paired), "--aggregate-only"]) == 1
    out = capsys.readouterr().out
    assert "95% interval" not in out and "REGRESSION" in out


def test_a_baseline_without_samples_keeps_the_tolerance_gate(tmp_path, capsys):
    baseline = tmp_path / "old.json"
    assert (
        main(
            [
                "regress",
                str(write_samples_run(tmp_path / "base", BASE)),
                "--baseline",
                str(baseline),
                "--update-baseline",
            ]
        )
        == 0
    )
    assert all("samples" not in spec for spec in json.loads(baseline.read_text())["metrics"].values())
    capsys.readouterr()
    # 2 points down, stderr 4 each side: tolerance 2 x sqrt(32) = 11.3 on the score; no stderr per length, 0 tolerance
    assert (
        main(["regress", str(write_samples_run(tmp_path / "small", flipped([0, 1]))), "--baseline", str(baseline)]) == 1
    )
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["metric", "baseline", "run", "delta", "tolerance", "status"]
    assert [line.split()[-1] for line in out[1:4]] == ["regressed", "regressed", "ok"]


def test_bad_input_is_one_line(paired, tmp_path, capsys):
    capsys.readouterr()
    # --paired on a run that logged no samples
    plain = write_samples_run(tmp_path / "plain", BASE, samples=False)
    assert main(["regress", str(plain), "--baseline", str(tmp_path / "p.json"), "--update-baseline", "--paired"]) == 2
    assert "--paired needs the run's samples" in _error(capsys) and not (tmp_path / "p.json").exists()
    # a damaged samples field names the metric and the field
    data = json.loads(paired.read_text())
    data["metrics"]["qa/len_1024"]["samples"]["0"] = ["x", "h0"]
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(data))
    assert main(["regress", str(write_samples_run(tmp_path / "same", BASE)), "--baseline", str(broken)]) == 2
    assert _error(capsys).endswith(
        "metric 'qa/len_1024' field 'samples' has ['x', 'h0'] for doc_id 0: give [finite "
        "value, doc_hash]; remake the baseline with --update-baseline --paired"
    )
    data["metrics"]["qa/len_1024"]["samples"]["0"] = [100.0, "h0"]
    data["metrics"]["qa/score"]["samples"] = []
    broken.write_text(json.dumps(data))
    assert main(["regress", str(tmp_path / "same"), "--baseline", str(broken)]) == 2
    assert "metric 'qa/score' field 'samples' must be a non-empty object" in _error(capsys)
    assert main(["regress", str(tmp_path / "same"), "--baseline", str(paired), "--alpha", "1.5"]) == 2
    assert "--alpha 1.5: give a significance level in (0, 1)" in _error(capsys)


def test_a_task_without_samples_keeps_the_tolerance_gate_beside_paired_ones(tmp_path, capsys):
    def two_tasks(folder: Path, scores: list[float], other: float) -> Path:
        write_samples_run(folder, scores)
        results = next(folder.glob("results_*.json"))
        data = json.loads(results.read_text())
        data["results"]["other"] = {"score,none": other}
        data["higher_is_better"]["other"] = {"score": True}
        results.write_text(json.dumps(data))
        return folder

    baseline = tmp_path / "b.json"
    assert (
        main(
            [
                "regress",
                str(two_tasks(tmp_path / "base", BASE, 50.0)),
                "--baseline",
                str(baseline),
                "--update-baseline",
                "--paired",
            ]
        )
        == 0
    )
    assert "note: other/score: no samples of other logged: gated on its aggregate" in capsys.readouterr().out
    assert "samples" not in json.loads(baseline.read_text())["metrics"]["other/score"]
    assert main(["regress", str(two_tasks(tmp_path / "worse", BASE, 40.0)), "--baseline", str(baseline)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "95% interval" in lines[0]
    assert lines[1].startswith("other/score") and lines[1].endswith("regressed (aggregate)")
    assert next(line for line in lines if line.startswith("qa/score")).endswith(" ok")


def test_a_baseline_leaves_the_depth_cells_out_unless_asked(tmp_path):
    """The depth x length cells break len_<L> down on a few samples each: a default baseline gates len_<L>, not them."""
    from harness.reporting.baseline import baseline_from_run
    from harness.reporting.runs import read_run

    path = tmp_path / "results_1.json"
    path.write_text(
        json.dumps(
            {
                "results": {
                    "t": {
                        "len_1024,none": 90.0,
                        "depth_0_len_1024,none": 100.0,
                        "depth_50_len_1024,none": 80.0,
                        "n_len_1024,none": 10,
                    }
                },
                "higher_is_better": {
                    "t": {"len_1024": True, "depth_0_len_1024": True, "depth_50_len_1024": True, "n_len_1024": True}
                },
                "configs": {
                    "t": {
                        "metadata": {
                            "lch_metric_roles": {
                                "len_1024": "score",
                                "depth_0_len_1024": "score",
                                "depth_50_len_1024": "score",
                                "n_len_1024": "bookkeeping",
                            }
                        }
                    }
                },
                "date": 1.0,
                "config": {"model": "hf-pic", "model_args": {}},
            }
        )
    )
    run = read_run(path)
    assert list(baseline_from_run(run, "b")["metrics"]) == ["t/len_1024"]
    assert list(baseline_from_run(run, "b", all_metrics=True)["metrics"]) == [
        "t/depth_0_len_1024",
        "t/depth_50_len_1024",
        "t/len_1024",
        "t/n_len_1024",
    ]
    assert list(baseline_from_run(run, "b", metrics=["t/depth_50_len_1024"])["metrics"]) == ["t/depth_50_len_1024"]
