"""`lch agree` on runs written here by hand (results + samples files as lm-eval writes them): every
expected number is worked out in the test from the values put in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.reporting.agreement import Tolerances, agreement

STAMP = "2026-01-01T00-00-00.000001"
ANSWERS_A = ["Paris"] * 6
ANSWERS_B = ["Paris"] + ["Rome"] * 5  # 5 of 6 differ: B is wrong where A was right


def _run(folder: Path, answers: list[str], logprobs: list[list[float]], ppl: float, model: str) -> Path:
    folder.mkdir(parents=True)
    results = {
        "results": {
            "qa": {
                "alias": "qa",
                "score,none": 100.0 * sum(a == "Paris" for a in answers) / len(answers),
                "score_stderr,none": "N/A",
            },
            "ppl_task": {"alias": "ppl_task", "ppl,none": ppl},
        },
        "config": {"model": model, "model_args": {"pretrained": "none"}, "lch_evaluated_as": "standard inference"},
        "configs": {"ppl_task": {"metadata": {"lch_metric_roles": {"ppl": "perplexity"}}}},
    }
    (folder / f"results_{STAMP}.json").write_text(json.dumps(results))
    qa = [
        {
            "doc_id": i,
            "doc_hash": f"h{i}",
            "resps": [[f"The answer is {a}."]],
            "filtered_resps": [f"The answer is {a}."],
            "metrics": ["score"],
            "score": 100.0 if a == "Paris" else 0.0,
        }
        for i, a in enumerate(answers)
    ]
    (folder / f"samples_qa_{STAMP}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in qa))
    rows = []
    for i, lp in enumerate(logprobs):
        response = {"token_ids": list(range(len(lp) + 1)), "logprobs": lp, "offsets": None}
        rows.append(
            {
                "doc_id": i,
                "doc_hash": f"d{i}",
                "resps": [[str(response)]],
                "filtered_resps": [str(response)],
                "metrics": ["ppl", "n_tokens"],
                "ppl": [-sum(lp), len(lp)],
                "n_tokens": len(lp),
            }
        )
    (folder / f"samples_ppl_task_{STAMP}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


LOGPROBS_A = [[-1.0, -2.0], [-1.5, -0.5], [-3.0, -1.0], [-2.0, -2.0], [-0.5, -0.25]]
# B: document i's second log-prob lower by 0.2 * (i + 1): per-document mean NLL higher by 0.1 * (i + 1)
LOGPROBS_B = [[a, b - 0.2 * (i + 1)] for i, (a, b) in enumerate(LOGPROBS_A)]


@pytest.fixture
def runs(tmp_path):
    a = _run(tmp_path / "a", ANSWERS_A, LOGPROBS_A, 3.0, "hf-pic")
    b = _run(tmp_path / "b", ANSWERS_B, LOGPROBS_B, 3.3, "vllm-pic")
    same = _run(tmp_path / "same", ANSWERS_A, LOGPROBS_A, 3.0, "vllm-pic")
    return a, b, same


def test_identical_runs_agree(runs):
    a, _, same = runs
    report = agreement(a, same)
    tasks = {t.task: t for t in report["tasks"]}
    assert report["agrees"] and tasks["qa"].exact_match == 1.0 and not tasks["qa"].divergences
    assert tasks["ppl_task"].max_logprob_diff == 0.0 and tasks["ppl_task"].n_paired == 5
    assert {s.metric: s.p_value for s in tasks["qa"].scores} == {"score": 1.0}


def test_differences_tests_and_verdict(runs):
    a, b, _ = runs
    report = agreement(a, b)
    qa, ppl = (next(t for t in report["tasks"] if t.task == name) for name in ("qa", "ppl_task"))
    assert not report["agrees"]
    assert qa.exact_match == pytest.approx(1 / 6) and len(qa.divergences) == 5
    first = qa.divergences[0]
    assert (first.doc_id, first.unit, first.index, first.a, first.b, first.context) == (
        1,
        "char",
        14,
        "P",
        "R",
        "The answer is ",
    )
    score = qa.scores[0]
    # McNemar, exact: 5 discordant pairs all one way -> two-sided p = 2 * 0.5 ** 5
    assert (score.metric, score.mean_a, score.mean_b, score.test) == ("score", 100.0, 100 / 6, "McNemar (exact)")
    assert score.p_value == pytest.approx(2 * 0.5**5)
    assert qa.metrics["score"]["delta"] == pytest.approx(100 / 6 - 100.0)
    # log-probs: the largest difference is document 4's, 0.2 * 5
    assert ppl.max_logprob_diff == pytest.approx(1.0) and ppl.mean_logprob_diff == pytest.approx(0.3)
    # a [nll_sum, n] pair per document is compared as its ratio and named for what it holds
    assert [s.metric for s in ppl.scores] == ["n_tokens", "ppl mean NLL"]
    ppl_score = next(s for s in ppl.scores if s.metric == "ppl mean NLL")
    # per-document mean NLL higher in B by 0.1, ..., 0.5: every sign the same -> Wilcoxon exact p = 2 / 2 ** 5
    assert ppl_score.test == "Wilcoxon signed-rank" and ppl_score.p_value == pytest.approx(2 / 32)
    assert ppl_score.delta == pytest.approx(0.3)
    assert ppl.metrics["ppl"]["rel"] == pytest.approx(0.1)
    assert any("generations identical for 16.7% of documents" in r for r in qa.reasons)
    assert any("a token log-probability differs by 1" in r for r in ppl.reasons)
    loose = agreement(a, b, Tolerances(min_exact_match=0.1, max_logprob_diff=1.5, max_rel_diff=0.9))
    assert loose["agrees"]


def test_divergence_in_tokens(runs, tiny_model_dir):
    from transformers import AutoTokenizer

    a, b, _ = runs
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    first = next(t for t in agreement(a, b, tokenizer=tok)["tasks"] if t.task == "qa").divergences[0]
    ids_a, ids_b = (
        tok.encode("The answer is Paris.", add_special_tokens=False),
        tok.encode("The answer is Rome.", add_special_tokens=False),
    )
    k = next(i for i, (x, y) in enumerate(zip(ids_a, ids_b)) if x != y)
    assert (first.unit, first.index, first.a, first.b) == (
        "token",
        k,
        tok.decode(ids_a[k : k + 1]),
        tok.decode(ids_b[k : k + 1]),
    )


def test_cli_exit_codes_and_files(runs, tmp_path, capsys):
    a, b, same = runs
    assert main(["agree", str(a), str(same), "--tokenizer", "none", "-o", str(tmp_path / "ok")]) == 0
    assert capsys.readouterr().out.startswith("# Agreement of two runs: agree")
    assert main(["agree", str(a), str(b), "--tokenizer", "none", "-o", str(tmp_path / "differ")]) == 1
    report = json.loads((tmp_path / "differ.json").read_text())
    assert report["agrees"] is False and {t["task"] for t in report["tasks"]} == {"qa", "ppl_task"}
    markdown = (tmp_path / "differ.md").read_text()
    assert "doc 1, char 14: after `'The answer is '` A has `'P'`, B has `'R'`" in markdown
    # each run named as every report names it, and what its scores rest on when that is too little
    assert f"- A: none · standard inference (`{next(a.glob('results_*.json'))}`, lm-eval model " in markdown
    results_b = next(b.glob("results_*.json"))
    data = json.loads(results_b.read_text())
    data["lch_cautions"] = {"qa": ["qa/score rests on 6 samples, fewer than 25: ..."]}
    results_b.write_text(json.dumps(data))
    assert main(["agree", str(a), str(b), "--tokenizer", "none", "-o", str(tmp_path / "differ")]) == 1
    assert "- caution (B): qa/score rests on 6 samples, fewer than 25: ...\n" in (tmp_path / "differ.md").read_text()
    assert (
        main(
            [
                "agree",
                str(a),
                str(b),
                "--tokenizer",
                "none",
                "--min-exact-match",
                "0.1",
                "--max-logprob-diff",
                "2",
                "--max-rel-diff",
                "0.9",
            ]
        )
        == 0
    )


def test_a_metric_that_could_not_be_computed_agrees_with_nothing(tmp_path):
    """A NaN perplexity in one run (or both) is no agreement: every comparison with NaN would pass a tolerance."""
    a = _run(tmp_path / "a", ANSWERS_A, LOGPROBS_A, 3.0, "hf-pic")
    for name, ppl in (("b", float("nan")), ("c", 3.0)):
        _run(tmp_path / name, ANSWERS_A, LOGPROBS_A, ppl, "vllm-pic")
    report = agreement(a, tmp_path / "b")
    ppl_task = next(t for t in report["tasks"] if t.task == "ppl_task")
    assert not report["agrees"] and ppl_task.reasons == [
        "ppl is 3.0 (A) vs nan (B): a value that could not be computed agrees with nothing"
    ]
    assert agreement(a, tmp_path / "c")["agrees"]


def test_documents_sent_as_other_prompts_do_not_agree(runs):
    """The same documents (doc_hash), the same answers, but two of them sent as other prompts (prompt_hash: cut
    otherwise, say): the task does not agree and says how many."""
    a, _, same = runs
    for folder, hashes in ((a, ["p0", "p1", "p2", "p3", "p4", "p5"]), (same, ["p0", "x1", "p2", "x3", "p4", "p5"])):
        path = folder / f"samples_qa_{STAMP}.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        path.write_text("".join(json.dumps({**row, "prompt_hash": h}) + "\n" for row, h in zip(rows, hashes)))
    report = agreement(a, same)
    qa = next(t for t in report["tasks"] if t.task == "qa")
    assert not report["agrees"] and qa.n_prompt_mismatch == 2 and qa.exact_match == 1.0
    assert qa.reasons == ["2 documents were sent as other prompts (prompt_hash)"]
