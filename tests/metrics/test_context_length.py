"""Effective context length (harness/metrics/context_length.py) on constructed score curves, computed by hand."""

from __future__ import annotations

import pytest

from harness.metrics.context_length import RULER_THRESHOLD, LengthPoint, effective_length, relative_effective_length

# 1k 95, 2k 90, 4k 80, 8k 88: the prefix rule stops at 4k (80 < 85.6) and does not count 8k's 88
CURVE = [
    LengthPoint(8192, "8k", 88.0, 4.0, 25),
    LengthPoint(1024, "1k", 95.0, 2.0, 25),
    LengthPoint(4096, "4k", 80.0, 4.0, 25),
    LengthPoint(2048, "2k", 90.0, 3.0, 25),
]


def test_absolute_effective_length_is_the_longest_prefix_at_or_above_rulers_threshold():
    found = effective_length(CURVE, RULER_THRESHOLD)
    assert (found.kind, found.threshold, found.name, found.tokens) == ("absolute", 85.6, "2k", 2048)
    assert found.lengths == ("1k", "2k", "4k", "8k") and found.n == (25, 25, 25, 25)
    # 8k - 4k = 8 points; their 95 % interval is 1.96 x sqrt(4^2 + 4^2) = 11.09: within it, no caution
    assert found.caution is None
    assert found.label() == "2k (>= 85.6 at 1k, 2k, 4k, 8k; n 25, 25, 25, 25)"
    assert effective_length(CURVE, 90.0).name == "2k" and effective_length(CURVE, 90.1).name == "1k"


def test_relative_effective_length_keeps_85_percent_of_the_shortest_lengths_score():
    found = relative_effective_length(CURVE)
    # 0.85 x 95 = 80.75: 4k's 80 is below it
    assert found.kind == "relative" and found.threshold == pytest.approx(80.75) and found.name == "2k"
    assert relative_effective_length(CURVE, share=0.84).name == "8k"  # 79.8: every length passes


def test_a_curve_below_the_threshold_at_its_shortest_length_has_none():
    found = effective_length([LengthPoint(1024, "1k", 50.0)], RULER_THRESHOLD)
    assert found.name is None and found.tokens is None
    assert found.label() == "none (below 85.6 at 1k; n ?)"
    with pytest.raises(ValueError):
        effective_length([], RULER_THRESHOLD)


def test_a_rise_beyond_the_intervals_is_a_caution():
    # 4k 80 +- 2, 8k 88 +- 2: the difference 8 is beyond 1.96 x sqrt(8) = 5.54
    curve = [LengthPoint(1024, "1k", 95.0, 2.0), LengthPoint(4096, "4k", 80.0, 2.0), LengthPoint(8192, "8k", 88.0, 2.0)]
    found = effective_length(curve, RULER_THRESHOLD)
    assert found.name == "1k"
    assert found.caution == "not monotone: 8k scores 88.0 above 4k's 80.0 beyond their 95 % intervals"
    # without standard errors nothing can be said about noise: no caution
    bare = [LengthPoint(p.tokens, p.name, p.score) for p in curve]
    assert effective_length(bare, RULER_THRESHOLD).caution is None


def test_no_relative_length_when_the_shortest_length_scores_nothing():
    """85 % of 0 is 0, which every length passes: a curve at 0 everywhere has no relative length, and says why."""
    zeros = [LengthPoint(1024, "1k", 0.0, 0.0, 4), LengthPoint(2048, "2k", 0.0, 0.0, 4)]
    found = relative_effective_length(zeros)
    assert (found.name, found.tokens, found.caution) == (None, None, "no relative length: 1k scores 0")
    assert effective_length(zeros, RULER_THRESHOLD).name is None
