"""Positions and selections of the trained variants, against hand-computed cases (the PIC paper, Fig. 2,
the LongRecipe paper, Eq. 4 / Eq. 7, docs/formulas.md §7)."""

from __future__ import annotations

import random

import pytest

from harness.core.errors import UsageError
from harness.metrics.impactful import anchor_types, marked_positions, select_sentences, sentence_ranges
from harness.train.positions import auto_max_skip, dynamic_sft_segments, skip_positions


def test_dynamic_split_cuts_equal_segments_from_the_end():
    # 10 answer tokens, segments of 4 from the end: [6, 10), [2, 6), and the remainder [0, 2) first
    assert dynamic_sft_segments(10, 4) == [(0, 2), (2, 6), (6, 10)]
    assert dynamic_sft_segments(8, 4) == [(0, 4), (4, 8)]
    assert dynamic_sft_segments(3, 4) == [(0, 3)]
    assert dynamic_sft_segments(0, 4) == []
    with pytest.raises(UsageError, match="segment length must be >= 1"):
        dynamic_sft_segments(5, 0)


def test_skip_positions_follow_eq7_with_the_skips_drawn():
    # M = 0: every later segment starts at pos(prev) + |prev| + 0 + 1 (docs/formulas.md §7 as written)
    kept, pos = skip_positions([3, 2, 4], 0, 100, random.Random(0))
    assert kept == 3 and pos == [0, 1, 2, 4, 5, 7, 8, 9, 10]
    # M = 5: the same recursion with g_i drawn from 0..5 in segment order (one draw per later segment)
    draws = random.Random(7)
    g2, g3 = draws.randint(0, 5), draws.randint(0, 5)
    start2 = 0 + 3 + g2 + 1
    start3 = start2 + 2 + g3 + 1
    expected = [0, 1, 2, start2, start2 + 1] + list(range(start3, start3 + 4))
    assert skip_positions([3, 2, 4], 5, 100, random.Random(7)) == (3, expected)


def test_skip_positions_stop_before_the_target_length():
    # positions 0-2, then 4-5, then 7-10: a target of 10 keeps two segments (10 is not < 10)
    assert skip_positions([3, 2, 4], 0, 10, random.Random(0)) == (2, [0, 1, 2, 4, 5])
    assert skip_positions([3, 2, 4], 0, 11, random.Random(0))[0] == 3
    with pytest.raises(UsageError, match="max skip M must be >= 0"):
        skip_positions([1], -1, 10, random.Random(0))


def test_auto_max_skip_spreads_the_mean_gap_over_the_target():
    # 100 tokens in 5 segments over 1000 positions: 4 gaps of 900 / 4 = 225 on average = M/2 + 1 -> M = 448
    assert auto_max_skip([20] * 5, 1000) == 448
    assert auto_max_skip([20], 1000) == 0  # one segment: nothing to spread
    assert auto_max_skip([500, 500], 1000) == 0  # no room left


def test_marked_positions_are_the_top_fifth():
    assert marked_positions([0.1, 5.0, 0.3, 2.0, 0.0, 0.2, 0.1, 0.0, 0.4, 9.0]) == [1, 9]
    assert marked_positions([1.0, 1.0, 1.0], 0.2) == [0]  # ceil(0.6) = 1, ties go to the earlier


def test_anchor_types_sum_deltas_of_marked_positions_and_keep_the_top_fifth():
    # doc A (10 tokens) marks ceil(2.0) = 2 positions: 9 and 1 (tokens 19 and 11); doc B (5 tokens) marks
    # ceil(1.0) = 1: position 0 (token 11). Delta(11) = 5 + 4 = 9, Delta(19) = 9: two marked types, ceil(0.4)
    # = 1 kept, the tie going to the smaller id
    doc_a = ([10, 11, 12, 13, 14, 15, 16, 17, 18, 19], [0.1, 5.0, 0.3, 2.0, 0.0, 0.2, 0.1, 0.0, 0.4, 9.0])
    doc_b = ([11, 40, 41, 30, 42], [4.0, 0.0, 0.1, 3.0, 0.2])
    assert anchor_types([doc_a, doc_b]) == {11: 9.0}
    # with half the positions marked: A marks 9, 1, 3, 8, 2 and B marks 0, 3, 4 -> 8 types, 4 kept
    assert anchor_types([doc_a, doc_b], fraction=0.5) == {11: 9.0, 19: 9.0, 30: 3.0, 13: 2.0}


def test_select_sentences_keeps_anchored_ones_best_first_within_the_budget():
    sentences = [[1, 2, 3], [4, 5], [7, 7, 7, 7], [6, 8], [9]]
    anchors = {7: 1.0, 8: 5.0, 9: 0.5}
    # scores: s2 = 4 (four 7s), s3 = 5, s4 = 0.5; s0 and s1 hold no anchor
    assert select_sentences(sentences, anchors, budget=6) == [2, 3]
    assert select_sentences(sentences, anchors, budget=3) == [3, 4]  # s2 (4 tokens) does not fit after s3
    assert select_sentences(sentences, {}, budget=100) == []


def test_sentence_ranges_split_after_delimiter_tokens():
    tokens = ["The", " cat", ".", " It", " ran", "!\n", " Why", "?", " end"]
    assert sentence_ranges(tokens) == [(0, 3), (3, 6), (6, 8), (8, 9)]
