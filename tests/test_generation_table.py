"""Paper 000 Table 1 from runs: corrupted ratio and Appendix-A averaging over shared clean samples."""

import json

import pytest

from harness.judges.stage import judge_samples_file
from harness.reporting.generation_table import format_table, generation_table
from tests.judge_servers import CannedJudge

DIMS = {"Relevance": 5, "Accuracy": 5, "Coherence": 3, "Clarity": 3, "Breadth and Depth": 5, "Reading Experience": 3}


def _run(folder, pic, lengths, corrupted, judge, prompt):
    folder.mkdir()
    (folder / "results_1.json").write_text(json.dumps(
        {"config": {"model_args": {"pretrained": "/m/tiny", "pic": pic, "pic_ratio": 2}}}))
    rows = []
    for i, (length, bad) in enumerate(zip(lengths, corrupted)):
        item = {"instruction": f"write {i}", "response": f"text {i} {pic}", "length_score": 50.0,
                "judge": judge, "prompt_path": str(prompt)}
        rows.append({"doc_id": i, "length": length, "n_tokens": 2 * length, "corrupted_ratio": float(bad), "quality": item})
    samples = folder / "samples_longbench_write_1.jsonl"
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    judge_samples_file(samples)  # the judge stage writes judgements_longbench_write_1.jsonl beside it
    return str(folder)


def test_table_uses_shared_clean_samples(tmp_path):
    prompt = tmp_path / "judge.txt"
    prompt.write_text("Judge this. $INST$ / $RESPONSE$")
    with CannedJudge(0.5, DIMS) as canned:
        judge = {"base_url": canned.base_url, "model": "canned", "policy": "drop", "temperature": 0.5,
                 "max_tokens": 64, "concurrency": 4, "cache_dir": str(tmp_path / "cache")}
        clean = _run(tmp_path / "a", "none", [100, 200, 300, 400, 500], [False] * 5, judge, prompt)
        # 1 of 5 corrupted (20 %): this run averages over its own clean samples
        broken = _run(tmp_path / "b", "naive", [10, 20, 30, 40, 50], [False, True, False, False, False], judge, prompt)
        rows = generation_table([clean, broken], "longbench_write")
    a, b = rows
    assert a["cr"] == 0 and b["cr"] == pytest.approx(0.2)
    assert a["length"] == pytest.approx((100 + 300 + 400 + 500) / 4)  # shared clean samples: 0, 2, 3, 4
    assert a["length_own"] == pytest.approx(300)
    assert b["length"] == b["length_own"] == pytest.approx((10 + 30 + 40 + 50) / 4)
    assert a["tokens"] == pytest.approx(2 * a["length"])
    expected_q = sum(25 * (v - 1) for v in DIMS.values()) / 6
    assert a["quality"] == pytest.approx(expected_q) and b["quality"] == pytest.approx(expected_q)
    assert "pic=naive s=2" in format_table(rows) and "20.0%" in format_table(rows)
