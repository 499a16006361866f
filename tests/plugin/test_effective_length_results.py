"""The effective context length written into a run's results (harness/plugin/finish_results.py
``record_effective_lengths``), on a constructed lm-eval results object whose answers are worked out by hand."""

from __future__ import annotations

import pytest

from harness.core import results as keys
from harness.plugin.finish_results import record_effective_lengths


def task(scores: dict[str, float], stderr: float, n: int) -> dict:
    out = {"alias": "x"}
    for name, score in scores.items():
        out[f"len_{name},none"] = score
        out[f"len_{name}_stderr,none"] = stderr
        out[f"n_len_{name},none"] = n
    return out


def results(threshold_a: float | None = None) -> dict:
    # a: 1k 95, 2k 84, 4k 82, 8k 60; b: 1k 85, 2k 86, 4k 40, 8k 30 (25 samples a length each)
    # the group g = mean of a and b: 1k 90, 2k 85, 4k 61, 8k 45 (lm-eval's group score, written here by hand)
    meta_a = {} if threshold_a is None else {"effective_threshold": threshold_a}
    return {
        "results": {
            "a": task({"1k": 95.0, "2k": 84.0, "4k": 82.0, "8k": 60.0}, 2.0, 25),
            "b": task({"1k": 85.0, "2k": 86.0, "4k": 40.0, "8k": 30.0}, 2.0, 25),
            "g": {"len_1k,none": 90.0, "len_2k,none": 85.0, "len_4k,none": 61.0, "len_8k,none": 45.0},
            "ppl_task": {"ppl,none": 3.0},
        },
        "group_subtasks": {"g": ["a", "b"]},
        "configs": {"a": {"metadata": meta_a}, "b": {"metadata": {}}},
    }


def test_every_curve_gets_its_absolute_and_relative_length_with_what_it_rests_on():
    data = results()
    found = record_effective_lengths(data)
    assert data[keys.EFFECTIVE_LENGTH] is found and sorted(found) == ["a", "b", "g"]  # ppl_task has no curve
    a = found["a"]
    # 85.6 (RULER's bar): 1k 95 passes, 2k 84 does not -> 1k; relative 0.85 x 95 = 80.75: 1k, 2k, 4k pass -> 4k
    assert (a["absolute"]["name"], a["absolute"]["tokens"], a["absolute"]["threshold"]) == ("1k", 1024, 85.6)
    assert (a["relative"]["name"], a["relative"]["threshold"]) == ("4k", pytest.approx(80.75))
    assert a["absolute"]["lengths"] == ("1k", "2k", "4k", "8k") and a["absolute"]["n"] == (25, 25, 25, 25)
    # b: 85 < 85.6 at 1k -> none; relative 0.85 x 85 = 72.25: 1k and 2k pass -> 2k
    assert found["b"]["absolute"]["name"] is None and found["b"]["relative"]["name"] == "2k"
    # the group: its samples are its tasks' (50 a length), its stderr unrecorded; 90 and 85 -> 1k at 85.6
    assert found["g"]["absolute"]["name"] == "1k" and found["g"]["absolute"]["n"] == (50, 50, 50, 50)


def test_the_threshold_a_task_declares_is_the_one_read():
    found = record_effective_lengths(results(threshold_a=80.0))
    # at 80: 95, 84, 82 pass, 60 does not -> 4k; the group's tasks do not share one declared bar: RULER's
    assert found["a"]["absolute"]["name"] == "4k" and found["a"]["absolute"]["threshold"] == 80.0
    assert found["g"]["absolute"]["threshold"] == 85.6


def test_a_curve_that_rises_beyond_its_intervals_is_a_caution_of_the_run():
    data = results()
    data["results"]["b"]["len_8k,none"] = 70.0  # 4k 40 -> 8k 70: 30 points > 1.96 x sqrt(2^2 + 2^2) = 5.5
    record_effective_lengths(data)
    assert data[keys.CAUTIONS]["b"] == [
        "b effective length: not monotone: 8k scores 70.0 above 4k's 40.0 beyond their 95 % intervals"
    ]
    assert "a" not in data[keys.CAUTIONS]
