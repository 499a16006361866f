"""Long-form generation scores against hand-computed cases and the released HelloBench files."""

import json
import math

import numpy as np
import pytest

from harness.data.longform import load_hellobench_weights
from harness.data.words import nltk_length
from harness.judges.parsing import parse_checklist_judgement
from harness.metrics.generation import (
    corrupted_ratio,
    distinct_n,
    has_consecutive_loop,
    has_paragraph_cycle,
    hellobench_rescale,
    hellobench_sample_score,
    hellobench_task_score,
    is_corrupted,
    longbench_write_length,
    longbench_write_length_score,
    longbench_write_quality,
    longbench_write_total,
    rep_n,
    shared_clean_average,
    shows_repetition,
)
from tests.conftest import SHARED_DATA

HELLO = SHARED_DATA / "hellobench"
needs_shared = pytest.mark.skipif(not HELLO.exists(), reason="../shared/data not present")


def _jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_longbench_write_length_and_score_hand_computed():
    assert longbench_write_length("Hello, world! 你好吗") == 5
    assert longbench_write_length("don't stop-2 me") == 4  # \\b[a-zA-Z]+\\b: don, t, stop, me
    cases = {1000: 100.0, 2500: 50.0, 4000: 0.0, 7000: 0.0, 500: 50.0, 250: 0.0, 800: 87.5}  # 1 - (1.25 - 1)/2
    for produced, expected in cases.items():
        assert longbench_write_length_score(1000, produced) == pytest.approx(expected)
    assert longbench_write_length_score(1000, 0) == 0.0 and longbench_write_length_score(1000, "") == 0.0
    with pytest.raises(ValueError):
        longbench_write_length_score(0, 10)


def test_longbench_write_quality_and_total():
    dims = ["Relevance", "Accuracy", "Coherence", "Clarity", "Breadth and Depth", "Reading Experience"]
    assert longbench_write_quality([dict.fromkeys(dims, 5)]) == 100.0
    assert longbench_write_quality([dict.fromkeys(dims, 1)]) == 0.0
    rows = [dict.fromkeys(dims, 3), {**dict.fromkeys(dims, 4), "Accuracy": 2}]
    # per dimension 25 * (mean - 1): five dims at 3.5 -> 62.5, Accuracy at 2.5 -> 37.5
    assert longbench_write_quality(rows) == pytest.approx((5 * 62.5 + 37.5) / 6)
    assert longbench_write_total(80.0, 60.0) == 70.0


def test_nltk_length_counts_punctuation():
    assert nltk_length("Hello, world. It works!") == 7


@needs_shared
def test_hellobench_sample_score_hand_computed():
    weights = load_hellobench_weights(HELLO / "weighted_scores.txt")
    assert set(weights) >= {
        "argumentative_writing",
        "keyword_writing",
        "roleplaying_writing",
        "screenplay_writing",
        "story_writing",
    }
    assert sum(weights["argumentative_writing"]) == pytest.approx(100.0)
    score = hellobench_sample_score("argumentative_writing", [0.75, 0.75, 0.5, 0.5, 0.5], weights)
    expected = (
        0.75 * 18.302865025230115
        + 0.75 * 24.50501277580138
        + 0.5 * (20.483643154138807 + 14.552018259438853 + 22.15646078539085)
    )
    assert score == pytest.approx(expected) and hellobench_rescale(score) == pytest.approx(4 * (expected - 75))


@needs_shared
def test_hellobench_score_recomputed_from_released_judgements():
    weights = load_hellobench_weights(HELLO / "weighted_scores.txt")
    category = {row["id"]: row["category"] for row in _jsonl(HELLO / "heuristic_text_generation_2k.jsonl")}
    judged = _jsonl(HELLO / "judgements_llama31_70b_htg_2k.jsonl")
    samples = [
        (
            category[r["id"]],
            [e["evaluation_score"] for e in sorted(r["checklist_wise_evaluation"], key=lambda e: e["checklist_id"])],
        )
        for r in judged
    ]
    got = hellobench_task_score(samples, weights)
    # the reference aggregation written out: dot(weights[category], scores) per sample, mean over samples
    reference = np.mean([np.dot(weights[c], s) for c, s in samples])
    assert got["n_valid"] == got["n_total"] == 123
    assert got["score"] == pytest.approx(reference, rel=1e-12)
    rescaled = hellobench_task_score(samples, weights, rescale=True)["score"]
    assert rescaled == pytest.approx(np.mean([(np.dot(weights[c], s) - 75) * 4 for c, s in samples]))
    dropped = hellobench_task_score(samples[:2] + [("story_writing", None)], weights)
    assert dropped["n_valid"] == 2 and dropped["n_total"] == 3


def test_checklist_parser_official_format_and_fallbacks():
    official = (
        '```json\n[{"checklist_id": "0", "reason": "ok", "evaluation_score": "0.75"},\n'
        '{"checklist_id": 1, "reason": "a \\\\ b", "evaluation_score": 1}]\n```'
    )
    assert parse_checklist_judgement(official, 2) == [0.75, 1.0]
    chatty = (
        "Here you go:\n[{'checklist_id': 1, 'reason': 'x', 'evaluation_score': 0.25}, "
        "{'checklist_id': 0, 'reason': 'y', 'evaluation_score': 0.5}]\nThanks!"
    )
    assert parse_checklist_judgement(chatty, 2) == [0.5, 0.25]  # Python literal, ordered by id
    assert parse_checklist_judgement(official, 3) is None  # wrong number of items
    assert parse_checklist_judgement('[{"checklist_id": 0, "reason": "", "evaluation_score": 2}]', 1) is None
    assert parse_checklist_judgement("no idea", 1) is None


def test_repetition_rules_hand_built():
    unit = "the model keeps saying this. "
    assert has_consecutive_loop("Intro text. " + unit * 4)
    assert not has_consecutive_loop("Intro text. " + unit * 3)
    assert not has_consecutive_loop("-" * 200)  # a loop without word characters
    para = "This paragraph is long enough to count as a repeated paragraph in the cycle rule here."
    assert has_paragraph_cycle("\n\n".join([para, "other", para, "more", para]))
    assert not has_paragraph_cycle("\n\n".join([para, "other", para]))
    assert is_corrupted(unit * 5, ended_with_eos=False) and not is_corrupted(unit * 5, ended_with_eos=True)
    assert not is_corrupted("A clean ending.", ended_with_eos=False)
    assert rep_n("a b c a b c", 3) == pytest.approx(1 - 3 / 4) and distinct_n("a b a b", 2) == pytest.approx(2 / 3)


@needs_shared
def test_corrupted_rule_calibration_on_released_generations():
    suri = _jsonl(HELLO / "generations_suri_7b_htg.jsonl")
    llama = _jsonl(HELLO / "generations_llama31_8b_htg.jsonl")
    assert sum(has_consecutive_loop(r["response"]) for r in suri) == 23
    assert sum(shows_repetition(r["response"]) for r in suri) == 45
    assert sum(shows_repetition(r["response"]) for r in llama) == 0


def test_shared_clean_average_follows_appendix_a():
    values = {"a": {1: 10.0, 2: 20.0, 3: 30.0}, "b": {1: 1.0, 2: 2.0, 3: 3.0}}
    corrupted = {"a": {1: False, 2: False, 3: False}, "b": {1: False, 2: True, 3: False}}
    out = shared_clean_average(values, corrupted)
    assert out["a"]["shared"] == 20.0 and out["a"]["used"] == 20.0 and out["a"]["n_used"] == 2  # 1, 3 shared by both
    # b's CR 1/3 is over the threshold: its own clean samples 1 and 3
    assert out["b"]["corrupted_ratio"] == pytest.approx(1 / 3) and out["b"]["used"] == out["b"]["own"] == 2.0
    assert out["b"]["n_used"] == 2
    # a corrupted on 3 too: only sample 1 is clean for both; over the threshold each run keeps its own two
    both = {"a": {1: False, 2: False, 3: True}, "b": corrupted["b"]}
    assert {m: v["n_used"] for m, v in shared_clean_average(values, both).items()} == {"a": 2, "b": 2}
    assert {m: (v["n_used"], v["used"]) for m, v in shared_clean_average(values, both, threshold=0.5).items()} == {
        "a": (1, 10.0),
        "b": (1, 1.0),
    }
    assert corrupted_ratio([True, False, False, False]) == 0.25 and math.isnan(corrupted_ratio([]))
