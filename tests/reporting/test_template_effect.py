"""lch template-effect on runs written here: a run without a chat template and the same run with one, paired by
document; every number worked out from the scores put in, and runs that differ in more than the template refused."""

from __future__ import annotations

import json
from math import comb

import pytest

from harness.cli import main
from harness.metrics.paired import paired_difference
from harness.reporting.template_effect import template_effect
from tests.reporting.test_regress_paired import LENGTHS, write_samples_run

TEMPLATE = "3f" * 32  # a chat template's SHA-256, as the run record holds it
# 40 documents (20 per length): raw right on the first 30; chat wrong on the first 8, right on the other 32
RAW = [100.0] * 30 + [0.0] * 10
CHAT = [0.0] * 8 + [100.0] * 32


def _error(capsys) -> str:
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len([line for line in lines if line.startswith("lch: error: ")]) == 1, lines
    return lines[-1]


@pytest.fixture
def pair(tmp_path):
    return (
        write_samples_run(tmp_path / "raw", RAW, LENGTHS[:40]),
        write_samples_run(tmp_path / "chat", CHAT, LENGTHS[:40], template=TEMPLATE),
    )


def test_the_effect_per_task_and_length_by_hand(pair, tmp_path, capsys):
    raw, chat = pair
    assert main(["template-effect", str(raw), str(chat), "-o", str(tmp_path / "effect")]) == 0
    markdown = capsys.readouterr().out
    assert markdown == (tmp_path / "effect.md").read_text()
    report = json.loads((tmp_path / "effect.json").read_text())
    (task,) = report["tasks"]
    rows = {r["metric"]: r for r in task["rows"]}
    assert list(rows) == ["score", "len_1024", "len_2048"]  # n_len_<L>: bookkeeping, not a score
    score = rows["score"]
    # means 75 and 80; discordant pairs: 8 right in raw only (docs 0-7), 10 in chat only (docs 30-39)
    assert (score["n"], score["mean_raw"], score["mean_chat"], score["delta"]) == (40, 75.0, 80.0, 5.0)
    assert score["test"] == "McNemar (exact)"
    assert score["p_value"] == pytest.approx(2 * sum(comb(18, k) for k in range(9)) / 2**18)
    expected = paired_difference(RAW, CHAT)  # the interval: the paired bootstrap, 10,000 resamples, seed 0
    assert (score["low"], score["high"]) == (expected.low, expected.high) and score["low"] < 5 < score["high"]
    # per length, the documents of that length: even ones are 1024 tokens (4 raw-only, 5 chat-only discordant)
    assert rows["len_1024"]["n"] == 20 and rows["len_1024"]["delta"] == pytest.approx(5.0)
    assert rows["len_1024"]["p_value"] == pytest.approx(1.0)
    assert report["raw"]["record"]["chat_template"] == "none" and report["chat"]["record"]["chat_template"] == TEMPLATE
    assert (
        f"| qa | score | 40 | 75 | 80 | +5 | [{expected.low:+.4g}, {expected.high:+.4g}] | "
        f"{score['p_value']:.3g} | McNemar (exact) |"
    ) in markdown
    # the chat run fitted its prompts with the template counted (task option chat_template): pairs by doc_id
    assert task["refitted"] is True


def test_refitted_documents_pair_by_doc_id_others_are_left_out(tmp_path):
    raw = write_samples_run(tmp_path / "raw", RAW, LENGTHS[:40])
    # the chat run fitted every prompt with the template counted: other documents (doc_hash), the same doc_ids
    chat = write_samples_run(
        tmp_path / "chat", CHAT, LENGTHS[:40], template=TEMPLATE, hashes={i: f"fitted{i}" for i in range(40)}
    )
    (task,) = template_effect(raw, chat, resamples=200)["tasks"]
    assert (task.refitted, task.n_paired, task.n_input_mismatch) == (True, 40, 40)
    # the same task options on both sides: a document whose doc_hash differs is another input, left out
    same_options = write_samples_run(tmp_path / "raw2", RAW, LENGTHS[:40], options={"chat_template": True})
    chat2 = write_samples_run(tmp_path / "chat2", CHAT, LENGTHS[:40], template=TEMPLATE, hashes={0: "x", 1: "y"})
    (task,) = template_effect(same_options, chat2, resamples=200)["tasks"]
    assert (task.refitted, task.n_paired, task.n_input_mismatch) == (False, 38, 2)
    assert task.rows[0].n == 38


def test_runs_that_differ_in_more_than_the_template_are_refused(pair, tmp_path, capsys):
    raw, chat = pair
    assert main(["template-effect", str(raw), str(raw)]) == 3
    assert "applied the same chat template (none)" in _error(capsys)
    assert main(["template-effect", str(chat), str(raw)]) == 2
    assert _error(capsys).endswith("none: give the run without a template first (lch template-effect RUN_RAW RUN_CHAT)")
    bf16 = write_samples_run(tmp_path / "bf16", CHAT, LENGTHS[:40], template=TEMPLATE, dtype="bfloat16")
    assert main(["template-effect", str(raw), str(bf16)]) == 3
    assert _error(capsys) == (
        "lch: error: not comparable: dtype float32 (raw) vs bfloat16 (chat) (compare runs made "
        "alike, or pass --allow dtype to compare them anyway)"
    )
    assert main(["template-effect", str(raw), str(bf16), "--allow", "dtype"]) == 0
    capsys.readouterr()
    other = write_samples_run(tmp_path / "other", CHAT, LENGTHS[:40], template=TEMPLATE, options={"seed": 7})
    assert main(["template-effect", str(raw), str(other)]) == 3
    assert "task configuration qa: seed unset (raw) vs 7 (chat)" in _error(capsys)


def test_bad_input_is_one_line_and_leaves_nothing(pair, tmp_path, capsys):
    raw, chat = pair
    plain = write_samples_run(tmp_path / "plain", CHAT, LENGTHS[:40], template=TEMPLATE, samples=False)
    out = tmp_path / "out"
    assert main(["template-effect", str(raw), str(plain), "-o", str(out)]) == 2
    assert "--log_samples" in _error(capsys) and not list(tmp_path.glob("out.*"))
    assert main(["template-effect", str(raw), str(tmp_path / "nowhere")]) == 2
    assert "nowhere does not exist" in _error(capsys)
    assert main(["template-effect", str(raw), str(chat), "--resamples", "0"]) == 2
    assert "--resamples 0: give a count from 1" in _error(capsys)
    assert main(["template-effect", str(raw), str(chat), "--seed", "-1"]) == 2
    assert "--seed -1" in _error(capsys)
    unrecorded = write_samples_run(tmp_path / "unrecorded", CHAT, LENGTHS[:40], template=TEMPLATE)
    results = next(unrecorded.glob("results_*.json"))
    data = json.loads(results.read_text())
    del data["config"]["lch_run"]["chat_template"]
    results.write_text(json.dumps(data))
    assert main(["template-effect", str(raw), str(unrecorded)]) == 2
    assert "the run recorded no chat template" in _error(capsys)


def test_depth_cells_are_left_out_of_the_report():
    """A depth x length cell is a breakdown of its length on a few documents: the report gives the task's scores and
    lengths, not the cells."""
    from harness.reporting.template_effect import compare_task

    def rows(scores):
        return [
            {
                "doc_id": i,
                "doc_hash": f"h{i}",
                "metrics": ["score", "len_1024", "depth_0_len_1024"],
                "score": s,
                "len_1024": s,
                "depth_0_len_1024": s,
                "filter": "none",
            }
            for i, s in enumerate(scores)
        ]

    found = compare_task("t", rows([100.0, 0.0]), rows([100.0, 100.0]), {}, False, 0.95, 200, 0, "percentile")
    assert [r.metric for r in found.rows] == ["score", "len_1024"]
    assert [r.delta for r in found.rows] == [50.0, 50.0]
