"""The PIC paper, Table 1 from runs: corrupted ratio and Appendix-A averaging over shared clean samples.

The canned judge grades every sample differently (six LongBench-Write dimension scores per run and
sample), so that which samples a quality average runs over shows in its value. Per-sample quality is
``mean over the six dimensions of 25 (score - 1)``; a sample whose six scores are all ``k`` has quality
``25 (k - 1)`` (1 -> 0, 2 -> 25, 3 -> 50, 4 -> 75, 5 -> 100). Expected values below are worked out by hand
in the comments."""

import json
import re
from pathlib import Path

import pytest

from harness.judges.stage import judge_samples_file
from harness.reporting.generation_table import format_table, generation_table
from tests.judge_servers import UNPARSABLE, CannedJudge, longbench_write_reply

DIMS = {"Relevance": 5, "Accuracy": 5, "Coherence": 3, "Clarity": 3, "Breadth and Depth": 5, "Reading Experience": 3}
NAMES = ("Relevance", "Accuracy", "Coherence", "Clarity", "Breadth and Depth", "Reading Experience")


def dims(*scores: int) -> dict:
    """Six scores in the order of NAMES; one number means all six."""
    return dict(zip(NAMES, scores * 6 if len(scores) == 1 else scores))


def grader(grades: dict):
    """``CannedJudge`` grade function: the response ``text <i> <pic>`` picks ``grades[(pic, i)]`` (None:
    an unparsable reply)."""

    def grade(prompt: str, body: dict) -> str:
        m = re.search(r"/ text (\d+) (\w+)", prompt)
        chosen = grades[(m.group(2), int(m.group(1)))]
        return UNPARSABLE if chosen is None else longbench_write_reply(chosen)

    return grade


def _run(folder, pic, lengths, corrupted, judge, prompt):
    folder.mkdir()
    (folder / "results_1.json").write_text(
        json.dumps({"config": {"model_args": {"pretrained": "/m/tiny", "pic": pic, "pic_ratio": 2}}})
    )
    rows = []
    for i, (length, bad) in enumerate(zip(lengths, corrupted)):
        item = {
            "instruction": f"write {i}",
            "response": f"text {i} {pic}",
            "length_score": 50.0,
            "judge": judge,
            "prompt_path": str(prompt),
        }
        rows.append(
            {"doc_id": i, "length": length, "n_tokens": 2 * length, "corrupted_ratio": float(bad), "quality": item}
        )
    samples = folder / "samples_longbench_write_1.jsonl"
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    judge_samples_file(samples)  # the judge stage writes judgements_longbench_write_1.jsonl beside it
    return str(folder)


def _judged_quality(run: str) -> list:
    rows = [json.loads(line) for line in (Path(run) / "judgements_longbench_write_1.jsonl").read_text().splitlines()]
    return [row["quality"] for row in sorted(rows, key=lambda r: r["doc_id"])]


def _judge(canned, tmp_path, policy="drop"):
    return {
        "base_url": canned.base_url,
        "model": "canned",
        "policy": policy,
        "temperature": 0.5,
        "max_tokens": 64,
        "concurrency": 4,
        "cache_dir": str(tmp_path / "cache"),
    }


def _prompt(tmp_path):
    prompt = tmp_path / "judge.txt"
    prompt.write_text("Judge this. $INST$ / $RESPONSE$")
    return prompt


# per-sample quality:     0: 100   1: 0   2: 75   3: 50   4: (100+75+50+25+0+50)/6 = 50
GRADES_NONE = [dims(5), dims(1), dims(4), dims(3), dims(5, 4, 3, 2, 1, 3)]
# per-sample quality:     0: 25   1: 100 (corrupted)   2: (50+25+50+25+50+25)/6 = 37.5   3: 300/6 = 50   4: 75
GRADES_NAIVE = [dims(2), dims(5), dims(3, 2, 3, 2, 3, 2), dims(1, 2, 3, 4, 5, 3), dims(4)]


def test_table_uses_shared_clean_samples(tmp_path):
    prompt = _prompt(tmp_path)
    grades = {
        **{("none", i): g for i, g in enumerate(GRADES_NONE)},
        **{("naive", i): g for i, g in enumerate(GRADES_NAIVE)},
    }
    with CannedJudge(0.5, DIMS, grade=grader(grades)) as canned:
        judge = _judge(canned, tmp_path)
        clean = _run(tmp_path / "a", "none", [100, 200, 300, 400, 500], [False] * 5, judge, prompt)
        # 1 of 5 corrupted (20 %): this run averages over its own clean samples
        broken = _run(tmp_path / "b", "naive", [10, 20, 30, 40, 50], [False, True, False, False, False], judge, prompt)
        rows = generation_table([clean, broken], "longbench_write")
        assert canned.requests == 10  # one request per sample
    assert _judged_quality(clean) == pytest.approx([100, 0, 75, 50, 50])
    assert _judged_quality(broken) == pytest.approx([25, 100, 37.5, 50, 75])
    a, b = rows
    assert a["cr"] == 0 and b["cr"] == pytest.approx(0.2)
    assert a["length"] == pytest.approx((100 + 300 + 400 + 500) / 4)  # shared clean samples: 0, 2, 3, 4
    assert a["length_own"] == pytest.approx(300)
    assert b["length"] == b["length_own"] == pytest.approx((10 + 30 + 40 + 50) / 4)
    assert a["tokens"] == pytest.approx(2 * a["length"])
    # Was `a["quality"] == b["quality"] == expected_q`, true only because every sample had the same grades.
    # a (CR 0 %) uses the shared clean samples 0, 2, 3, 4: (100 + 75 + 50 + 50) / 4 = 68.75, not its own
    # five: (100 + 0 + 75 + 50 + 50) / 5 = 55.
    assert a["quality"] == a["quality_shared"] == pytest.approx(68.75)
    assert a["quality_own"] == pytest.approx(55.0)
    # b (CR 20 %) uses its own clean samples 0, 2, 3, 4 (here also the shared ones): (25 + 37.5 + 50 + 75) / 4
    # = 46.875; its corrupted sample 1 (quality 100) is in neither: with it the mean would be 57.5.
    assert b["quality"] == b["quality_own"] == b["quality_shared"] == pytest.approx(46.875)
    assert "| tiny · Naive PIC (s_cr 2) | 32.5 | 65.0 | 46.88 | 20.0% | 4 |" in format_table(
        rows
    ) and "20.0%" in format_table(rows)
    assert "| 68.75 |" in format_table(rows) and "| 46.88 |" in format_table(rows)


def test_table_picks_shared_or_own_per_run(tmp_path):
    """Three runs of 10 samples where, for every run, the shared and own clean averages differ:
    a clean (CR 0 %, shared), b corrupts samples 1 and 2 (CR 20 %, own), c corrupts sample 5 (CR 10 %,
    shared). Shared clean samples: 0, 3, 4, 6, 7, 8, 9."""
    prompt = _prompt(tmp_path)
    q_a = [5, 1, 4, 3, 2, 5, 4, 3, 2, 1]  # all six dimensions = k: quality 100, 0, 75, 50, 25, 100, 75, 50, 25, 0
    q_b = [2, 5, 5, 4, 4, 3, 3, 2, 2, 1]  # 25, 100, 100, 75, 75, 50, 50, 25, 25, 0
    q_c = [3, 3, 3, 3, 3, 1, 5, 5, 5, 5]  # 50, 50, 50, 50, 50, 0, 100, 100, 100, 100
    grades = {(pic, i): dims(k) for pic, ks in (("none", q_a), ("naive", q_b), ("ntk", q_c)) for i, k in enumerate(ks)}
    lengths = [10 * (i + 1) for i in range(10)]
    with CannedJudge(grade=grader(grades)) as canned:
        judge = _judge(canned, tmp_path)
        a = _run(tmp_path / "a", "none", lengths, [False] * 10, judge, prompt)
        b = _run(tmp_path / "b", "naive", lengths, [i in (1, 2) for i in range(10)], judge, prompt)
        c = _run(tmp_path / "c", "ntk", lengths, [i == 5 for i in range(10)], judge, prompt)
        rows = generation_table([a, b, c], "longbench_write")
        assert canned.requests == 30
    ra, rb, rc = rows
    assert (ra["cr"], rb["cr"], rc["cr"]) == (0.0, pytest.approx(0.2), pytest.approx(0.1))
    # a: shared (100 + 50 + 25 + 75 + 50 + 25 + 0) / 7 = 325 / 7; own 500 / 10 = 50
    assert ra["quality"] == ra["quality_shared"] == pytest.approx(325 / 7)
    assert ra["quality_own"] == pytest.approx(50.0)
    # b: own (samples 0, 3-9) (25 + 75 + 75 + 50 + 50 + 25 + 25 + 0) / 8 = 40.625; shared (no 5) 275 / 7
    assert rb["quality"] == rb["quality_own"] == pytest.approx(40.625)
    assert rb["quality_shared"] == pytest.approx(275 / 7)
    # c: shared (50 + 50 + 50 + 4 * 100) / 7 = 550 / 7; own (all but 5) 650 / 9
    assert rc["quality"] == rc["quality_shared"] == pytest.approx(550 / 7)
    assert rc["quality_own"] == pytest.approx(650 / 9)
    # lengths follow the same rule: shared (10 + 40 + 50 + 70 + 80 + 90 + 100) / 7 = 440 / 7
    assert ra["length"] == rc["length"] == pytest.approx(440 / 7)
    assert rb["length"] == pytest.approx((550 - 20 - 30) / 8)


def test_unparsed_judgement_is_dropped_and_corrupts_quality_only(tmp_path):
    """Policy drop: run a's judgement of sample 2 does not parse. The stage leaves it out of S_q (n_valid
    9 of 10) and writes quality None for it; the table treats it as corrupted for the quality average
    only (its length still counts), and not in the corrupted ratio."""
    prompt = _prompt(tmp_path)
    k_a = [5, 1, None, 4, 3, 2, 5, 4, 3, 2]  # quality 100, 0, -, 75, 50, 25, 100, 75, 50, 25
    k_b = [1, 2, 5, 4, 5, 1, 2, 3, 4, 5]  # quality 0, 25, 100, 75, 100, 0, 25, 50 (corrupted), 75, 100
    grades = {
        (pic, i): (None if k is None else dims(k))
        for pic, ks in (("none", k_a), ("naive", k_b))
        for i, k in enumerate(ks)
    }
    with CannedJudge(grade=grader(grades)) as canned:
        judge = _judge(canned, tmp_path, policy="drop")
        a = _run(tmp_path / "a", "none", [100 * (i + 1) for i in range(10)], [False] * 10, judge, prompt)
        b = _run(tmp_path / "b", "naive", [10 * (i + 1) for i in range(10)], [i == 7 for i in range(10)], judge, prompt)
        stage = judge_samples_file(tmp_path / "a" / "samples_longbench_write_1.jsonl")  # again: all cached
        rows = generation_table([a, b], "longbench_write")
        assert canned.requests == 20
    # the stage: S_q over the 9 parsed samples = 500 / 9; S_l = 50 (every length_score 50)
    assert stage["n_valid"] == 9 and stage["n_total"] == 10
    assert stage["quality"] == pytest.approx(500 / 9)
    assert stage["score"] == pytest.approx((50 + 500 / 9) / 2)
    judged = [
        json.loads(line) for line in (tmp_path / "a" / "judgements_longbench_write_1.jsonl").read_text().splitlines()
    ]
    assert [r["doc_id"] for r in judged if r["parsed"] is None] == [2]
    assert [r["quality"] for r in judged] == pytest.approx([100, 0, None, 75, 50, 25, 100, 75, 50, 25])
    ra, rb = rows
    assert ra["cr"] == 0.0 and rb["cr"] == pytest.approx(0.1)  # an unparsed judgement is no corruption
    # length: shared clean samples are all but 7 (sample 2 counts): (5500 - 800) / 9 and (550 - 80) / 9
    assert ra["length"] == pytest.approx(4700 / 9) and rb["length"] == pytest.approx(470 / 9)
    # quality: shared over all but 2 and 7: a (100+0+75+50+25+100+50+25) / 8 = 53.125;
    # b (0+25+75+100+0+25+75+100) / 8 = 50 (with b's sample 2, quality 100, it would be 500 / 9)
    assert ra["quality"] == pytest.approx(53.125) and rb["quality"] == pytest.approx(50.0)


def test_unparsed_judgements_do_not_change_the_runs_corrupted_ratio_rule(tmp_path):
    """a: no corrupted sample (CR 0 %), its judgement of sample 2 unparsed; b: sample 4 corrupted (CR 20 %).
    Quality samples clean for both: 0, 1, 3. a must use them (CR 0 % < 20 %): (100 + 0 + 75) / 3 = 58.33;
    its own parsed clean samples 0, 1, 3, 4 give (100 + 0 + 75 + 50) / 4 = 56.25."""
    prompt = _prompt(tmp_path)
    k_a = [5, 1, None, 4, 3]  # quality 100, 0, -, 75, 50
    k_b = [2, 2, 2, 2, 2]
    grades = {
        (pic, i): (None if k is None else dims(k))
        for pic, ks in (("none", k_a), ("naive", k_b))
        for i, k in enumerate(ks)
    }
    with CannedJudge(grade=grader(grades)) as canned:
        judge = _judge(canned, tmp_path, policy="drop")
        a = _run(tmp_path / "a", "none", [100] * 5, [False] * 5, judge, prompt)
        b = _run(tmp_path / "b", "naive", [10] * 5, [i == 4 for i in range(5)], judge, prompt)
        ra, rb = generation_table([a, b], "longbench_write")
    assert ra["cr"] == 0.0
    assert ra["quality_shared"] == pytest.approx(175 / 3) and ra["quality_own"] == pytest.approx(56.25)
    assert ra["quality"] == pytest.approx(175 / 3)  # got 56.25 (own)
