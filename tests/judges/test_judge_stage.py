"""The judge stage (harness.judges.stage) against a canned loopback judge whose grades vary per sample:
HelloEval category weights, and the parse-failure policies drop / zero / rejudge.

Expected values are computed here by hand: HelloEval weights are read from the published
``REGRESSION_DICT = {...}`` file with ``ast.literal_eval`` (not the library's parser); LongBench-Write
per-sample quality is the mean over six dimensions of ``25 (score - 1)``."""

from __future__ import annotations

import ast
import json
import re
from collections import Counter

import pytest

from harness.judges.stage import judge, judge_samples_file, sample_quality, task_scores
from tests.conftest import SHARED_DATA
from tests.judge_servers import UNPARSABLE, CannedJudge, checklist_reply, longbench_write_reply

HELLOBENCH = SHARED_DATA / "hellobench"
NAMES = ("Relevance", "Accuracy", "Coherence", "Clarity", "Breadth and Depth", "Reading Experience")
needs_hellobench = pytest.mark.skipif(not HELLOBENCH.is_dir(), reason=f"needs {HELLOBENCH}")


def published_weights() -> dict:
    text = (HELLOBENCH / "weighted_scores.txt").read_text(encoding="utf-8")
    assert text.lstrip().startswith("REGRESSION_DICT")
    return ast.literal_eval(text.split("=", 1)[1].strip())


def marker(prompt: str) -> int:
    """Sample index from the ``[[s<i>]]`` marker the tests put in each response."""
    return int(re.search(r"\[\[s(\d+)\]\]", prompt).group(1))


def dims(*scores: int) -> dict:
    return dict(zip(NAMES, scores * 6 if len(scores) == 1 else scores))


def judge_settings(canned: CannedJudge, tmp_path, policy: str) -> dict:
    return {
        "base_url": canned.base_url,
        "model": "canned",
        "policy": policy,
        "temperature": 0.5,
        "max_tokens": 64,
        "concurrency": 4,
        "cache_dir": str(tmp_path / f"cache-{policy}"),
    }


def write_samples(path, items: list[dict]):
    path.write_text("".join(json.dumps({"doc_id": i, "quality": item}) + "\n" for i, item in enumerate(items)))
    return path


def read_judgements(path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return sorted(rows, key=lambda r: r["doc_id"])


# ------------------------------------------------------------------------------------------- HelloBench


def hellobench_items(picks: list[tuple[str, int]], judge: dict, rescale: bool = False) -> list[dict]:
    """Items as the hellobench task logs them, for the ``n``-th real row of each ``category``."""
    rows = [json.loads(line) for line in (HELLOBENCH / "heuristic_text_generation_2k.jsonl").read_text().splitlines()]
    items = []
    for i, (category, nth) in enumerate(picks):
        row = [r for r in rows if r["category"] == category][nth]
        items.append(
            {
                "instruction": row["instruction"],
                "response": f"An essay [[s{i}]] of some words .",
                "checklists": list(row["checklists"]),
                "category": row["category"],
                "weights_file": str(HELLOBENCH / "weighted_scores.txt"),
                "rescale": rescale,
                "judge": judge,
            }
        )
    return items


HB_PICKS = [
    ("argumentative_writing", 0),
    ("story_writing", 0),
    ("roleplaying_writing", 0),
    ("argumentative_writing", 1),
]
HB_GRADES = [[0, 0.25, 1, 0, 0.5], [1, 0, 0, 0.5, 1], [0, 0.75, 0.25, 1, 0.5], [0.25] * 5]


@needs_hellobench
def test_hellobench_quality_uses_each_categorys_weights(tmp_path):
    """Three categories, per-item grades that vary. s_i = sum_j w_{category, j} a_ij with the published
    weights: about 37.6881 (argumentative), 58.5156 (story), 53.1995 (roleplaying), 25 (argumentative, 0.25
    everywhere, weights sum to 100); mean 43.6008; rescaled 4 (s - 75): mean -125.5967. The grades are
    chosen so that another category's weights would move each of the first three s_i by more than 3."""
    w = published_weights()
    expected = [
        sum(wj * aj for wj, aj in zip(w[category], grades)) for (category, _), grades in zip(HB_PICKS, HB_GRADES)
    ]
    assert expected == pytest.approx([37.68813, 58.51561, 53.19952, 25.0], abs=1e-4)
    for (category, _), grades, s in zip(HB_PICKS[:3], HB_GRADES[:3], expected):  # weights of the wrong category
        for other in {c for c, _ in HB_PICKS} - {category}:
            assert abs(sum(wj * aj for wj, aj in zip(w[other], grades)) - s) > 3

    def grade(prompt: str, body: dict) -> str:
        assert "CHECKLIST (5 items)" in prompt
        return checklist_reply(HB_GRADES[marker(prompt)])

    with CannedJudge(grade=grade) as canned:
        settings = judge_settings(canned, tmp_path, "drop")
        samples = write_samples(tmp_path / "samples_hellobench_htg_2k_1.jsonl", hellobench_items(HB_PICKS, settings))
        out = judge_samples_file(samples)
        assert canned.requests == 4
        # rescale on: the same requests (answered from the cache), s_i rescaled before the mean
        rescaled_items = hellobench_items(HB_PICKS, settings, rescale=True)
        rescaled_judged = judge(rescaled_items)
        rescaled = task_scores(rescaled_items, rescaled_judged)
        assert canned.requests == 4
    assert out["n_valid"] == 4 and out["n_total"] == 4
    assert out["quality"] == pytest.approx(sum(expected) / 4)
    assert out["quality"] == pytest.approx(43.60081, abs=1e-4)
    rows = read_judgements(tmp_path / "judgements_hellobench_htg_2k_1.jsonl")
    assert [r["parsed"] for r in rows] == HB_GRADES
    assert [r["quality"] for r in rows] == pytest.approx(expected)  # per-sample s_i (rescale off)
    assert sample_quality(rescaled_items, rescaled_judged) == pytest.approx([4 * (s - 75) for s in expected])
    assert rescaled["n_valid"] == 4
    assert rescaled["quality"] == pytest.approx(sum(4 * (s - 75) for s in expected) / 4)
    assert rescaled["quality"] == pytest.approx(-125.59674, abs=1e-4)


@needs_hellobench
def test_hellobench_policy_zero_scores_an_unparsed_judgement_as_all_zero(tmp_path):
    """Sample 1's reply does not parse: policy zero scores it 0 on each item (s = 0, rescaled -300) and
    keeps it in the mean; n_valid counts the 2 parsed ones."""
    w = published_weights()
    picks = HB_PICKS[:3]
    grades = [HB_GRADES[0], None, HB_GRADES[2]]
    s0 = sum(wj * aj for wj, aj in zip(w["argumentative_writing"], grades[0]))
    s2 = sum(wj * aj for wj, aj in zip(w["roleplaying_writing"], grades[2]))

    def grade(prompt: str, body: dict) -> str:
        chosen = grades[marker(prompt)]
        return UNPARSABLE if chosen is None else checklist_reply(chosen)

    with CannedJudge(grade=grade) as canned:
        settings = judge_settings(canned, tmp_path, "zero")
        samples = write_samples(tmp_path / "samples_hellobench_htg_2k_1.jsonl", hellobench_items(picks, settings))
        out = judge_samples_file(samples)
        rescaled_items = hellobench_items(picks, settings, rescale=True)
        rescaled = task_scores(rescaled_items, judge(rescaled_items))
        assert canned.requests == 3
    assert out["n_valid"] == 2 and out["n_total"] == 3
    assert out["quality"] == pytest.approx((s0 + 0.0 + s2) / 3)
    assert out["quality"] == pytest.approx(30.29588, abs=1e-4)  # (37.6881 + 0 + 53.1995) / 3
    rows = read_judgements(tmp_path / "judgements_hellobench_htg_2k_1.jsonl")
    assert rows[1]["parsed"] is None and rows[1]["quality"] == 0.0
    assert rescaled["quality"] == pytest.approx((4 * (s0 - 75) - 300 + 4 * (s2 - 75)) / 3)
    assert rescaled["quality"] == pytest.approx(-178.81648, abs=1e-4)


# ---------------------------------------------------------------------------------------- LongBench-Write

LBW_GRADES = [dims(5, 4, 3, 2, 1, 3), dims(2), dims(4), dims(1, 2, 3, 4, 5, 5), dims(3)]
LBW_Q = [50.0, 25.0, 75.0, (0 + 25 + 50 + 75 + 100 + 100) / 6, 50.0]  # per-sample quality, by hand
LENGTH_SCORES = [10.0, 20.0, 40.0, 80.0, 100.0]  # S_l = 250 / 5 = 50


def lbw_items(tmp_path, judge: dict) -> list[dict]:
    prompt = tmp_path / "judge.txt"
    prompt.write_text("Judge this. $INST$ / $RESPONSE$")
    return [
        {
            "instruction": f"write {i}",
            "response": f"text [[s{i}]]",
            "length_score": s,
            "judge": judge,
            "prompt_path": str(prompt),
        }
        for i, s in enumerate(LENGTH_SCORES)
    ]


def test_longbench_write_varying_grades_give_the_mean_of_sample_qualities(tmp_path):
    with CannedJudge(grade=lambda prompt, body: longbench_write_reply(LBW_GRADES[marker(prompt)])) as canned:
        items = lbw_items(tmp_path, judge_settings(canned, tmp_path, "drop"))
        judged = judge(items)
        assert canned.requests == 5
    assert judged.parsed == [{k: float(v) for k, v in g.items()} for g in LBW_GRADES]
    assert sample_quality(items, judged) == pytest.approx(LBW_Q)
    scores = task_scores(items, judged)
    s_q = sum(LBW_Q) / 5  # (50 + 25 + 75 + 58.33 + 50) / 5 = 51.67
    assert scores == {
        "quality": pytest.approx(s_q),
        "score": pytest.approx((50 + s_q) / 2),
        "length_score": pytest.approx(50.0),
        "n_valid": 5,
    }


def judge_with_sample_2_unparsable(tmp_path, policy: str) -> dict:
    """`judge_samples_file` over the five LongBench-Write samples, sample 2's reply unparsable; policies
    drop and zero ask each sample once."""

    def grade(prompt: str, body: dict) -> str:
        i = marker(prompt)
        return UNPARSABLE if i == 2 else longbench_write_reply(LBW_GRADES[i])

    with CannedJudge(grade=grade) as canned:
        samples = write_samples(
            tmp_path / "samples_longbench_write_1.jsonl", lbw_items(tmp_path, judge_settings(canned, tmp_path, policy))
        )
        out = judge_samples_file(samples)
        assert canned.requests == 5
    return out


def test_policy_drop_leaves_an_unparsed_sample_out(tmp_path):
    """Sample 2's reply does not parse: out of S_q (the mean of the 4 others), n_valid 4; S_l still over
    all 5 samples; quality None in the judgements file."""
    out = judge_with_sample_2_unparsable(tmp_path, "drop")
    s_q = (LBW_Q[0] + LBW_Q[1] + LBW_Q[3] + LBW_Q[4]) / 4  # (50 + 25 + 58.33 + 50) / 4 = 45.83
    assert out["n_valid"] == 4 and out["n_total"] == 5
    assert out["quality"] == pytest.approx(s_q) and out["length_score"] == pytest.approx(50.0)
    assert out["score"] == pytest.approx((50 + s_q) / 2)
    rows = read_judgements(tmp_path / "judgements_longbench_write_1.jsonl")
    assert rows[2]["parsed"] is None and rows[2]["quality"] is None
    assert [r["quality"] for r in rows if r["quality"] is not None] == pytest.approx([LBW_Q[i] for i in (0, 1, 3, 4)])


def test_policy_zero_scores_an_unparsed_sample_as_the_lowest_grade(tmp_path):
    """Sample 2's reply does not parse: scored 1 on every dimension (quality 0) and kept in the mean;
    n_valid counts the 4 parsed samples."""
    out = judge_with_sample_2_unparsable(tmp_path, "zero")
    s_q = (LBW_Q[0] + LBW_Q[1] + 0.0 + LBW_Q[3] + LBW_Q[4]) / 5  # 183.33 / 5 = 36.67
    assert out["n_valid"] == 4 and out["n_total"] == 5
    assert out["quality"] == pytest.approx(s_q) and out["score"] == pytest.approx((50 + s_q) / 2)
    rows = read_judgements(tmp_path / "judgements_longbench_write_1.jsonl")
    assert rows[2]["parsed"] is None and rows[2]["quality"] == 0.0


def test_policy_rejudge_asks_only_the_failed_samples_again_with_a_new_seed(tmp_path):
    """Replies: sample 1 parses from seed 1 on, sample 3 only at seed 2, sample 4 never; the others at
    once. Requests: 5 (first pass, no seed) + 3 (samples 1, 3, 4 with seed 1) + 2 (samples 3, 4 with
    seed 2) = 10. Sample 4 is dropped after the third try: n_valid 4."""
    parses_from = {0: 0, 1: 1, 2: 0, 3: 2, 4: 99}

    def grade(prompt: str, body: dict) -> str:
        i, seed = marker(prompt), body.get("seed", 0)
        return longbench_write_reply(LBW_GRADES[i]) if seed >= parses_from[i] else UNPARSABLE

    with CannedJudge(grade=grade) as canned:
        items = lbw_items(tmp_path, judge_settings(canned, tmp_path, "rejudge"))
        judged = judge(items)
        asked = [(marker(b["messages"][-1]["content"]), b.get("seed")) for b in canned.bodies]
        assert canned.requests == 10
    assert Counter(seed for _, seed in asked) == {None: 5, 1: 3, 2: 2}
    assert sorted(i for i, seed in asked if seed == 1) == [1, 3, 4]
    assert sorted(i for i, seed in asked if seed == 2) == [3, 4]
    assert judged.parsed[:4] == [{k: float(v) for k, v in g.items()} for g in LBW_GRADES[:4]]
    assert judged.parsed[4] is None and judged.n_valid == 4
    assert judged.provenance["policy"] == "rejudge"
    scores = task_scores(items, judged)
    s_q = sum(LBW_Q[:4]) / 4  # (50 + 25 + 75 + 58.33) / 4 = 52.08
    assert scores["n_valid"] == 4 and scores["quality"] == pytest.approx(s_q)
    assert scores["score"] == pytest.approx((50 + s_q) / 2)
    assert sample_quality(items, judged) == pytest.approx([*LBW_Q[:4], None])
    # a second run re-asks nothing: every answer (each seed's) is cached
    with CannedJudge(grade=grade) as again:
        items = lbw_items(tmp_path, {**judge_settings(again, tmp_path, "rejudge")})
        assert judge(items).parsed == judged.parsed and again.requests == 0


def test_judge_config_owns_its_defaults_and_items_say_their_kind():
    import pytest

    from harness.core.errors import DataFormatError, UsageError
    from harness.core.options import parse_options
    from harness.judges.config import JudgeConfig, JudgeOptions
    from harness.judges.stage import item_kind

    def judge_settings_from_metadata(meta: dict, temperature: float, max_tokens: int) -> dict | None:
        return parse_options(JudgeOptions, meta).settings(temperature, max_tokens)  # as a task reads them

    meta = {"judge_base_url": "http://x/v1", "judge_model": "m"}
    assert judge_settings_from_metadata(meta, 0.5, 1024) == {
        "base_url": "http://x/v1",
        "model": "m",
        "policy": "drop",
        "temperature": 0.5,
        "max_tokens": 1024,
        "concurrency": 8,
        "cache_dir": None,
        "timeout": 600.0,
        "max_attempts": 4,
        "idle_timeout": 60.0,
    }
    assert (
        judge_settings_from_metadata({**meta, "judge_timeout": "2.5", "judge_max_attempts": "1"}, 0.5, 1024)["timeout"]
        == 2.5
    )
    assert judge_settings_from_metadata({**meta, "judge_idle_timeout": "5"}, 0.5, 1024)["idle_timeout"] == 5.0
    with pytest.raises(UsageError, match="judge_idle_timeout must be between 0.001 and 86400"):
        judge_settings_from_metadata({**meta, "judge_idle_timeout": 0}, 0.5, 1024)
    with pytest.raises(UsageError, match="judge idle_timeout must be a number of seconds > 0, got -1"):
        JudgeConfig(idle_timeout=-1)
    with pytest.raises(UsageError, match="judge_max_attempts must be between 1 and 100, got 0"):
        judge_settings_from_metadata({**meta, "judge_max_attempts": 0}, 0.5, 1024)
    assert JudgeConfig.from_json({"model": "m", "unknown": 1}) == JudgeConfig(model="m")
    with pytest.raises(UsageError, match="judge_policy 'maybe' is unknown; allowed: drop, zero, rejudge"):
        judge_settings_from_metadata({**meta, "judge_policy": "maybe"}, 0.0, 10)
    assert item_kind([{"kind": "hellobench"}]) == "hellobench"
    assert item_kind([{"kind": "longbench_write", "checklists": []}]) == "longbench_write"  # the kind decides
    assert item_kind([{"checklists": [1]}]) == "hellobench"  # logged before items said their kind
    with pytest.raises(DataFormatError, match="judged item kind 'essay' is unknown"):
        item_kind([{"kind": "essay"}])
