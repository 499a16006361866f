"""Scoring windows for texts longer than an engine's limit: every token from 1 on scored exactly once,
with at least window - stride tokens of context (cases written out by hand)."""

import pytest

from harness.engines.windows import ScoringWindow, scoring_windows


def test_a_text_that_fits_is_one_window():
    assert scoring_windows(10, 10) == [ScoringWindow(0, 10, 1)]
    assert scoring_windows(1, 10) == [] and scoring_windows(0, 10) == []


def test_long_text_by_hand():
    # window 10, stride 5: [0,10) scores 1..9; [5,15) scores 10..14; the last ends at 18 and starts at 8
    assert scoring_windows(18, 10) == [ScoringWindow(0, 10, 1), ScoringWindow(5, 15, 10), ScoringWindow(8, 18, 15)]
    assert scoring_windows(20, 10, stride=8) == [
        ScoringWindow(0, 10, 1),
        ScoringWindow(8, 18, 10),
        ScoringWindow(10, 20, 18),
    ]


@pytest.mark.parametrize("n, window, stride", [(100, 16, None), (97, 16, 3), (33, 32, 31), (1000, 255, 127)])
def test_each_token_once_with_enough_context(n, window, stride):
    windows = scoring_windows(n, window, stride)
    scored = [t for w in windows for t in range(w.first_target, w.stop)]
    assert scored == list(range(1, n))
    step = stride or window // 2
    for w in windows:
        assert w.stop - w.start <= window and w.start <= w.first_target
        assert w.start == 0 or w.first_target - w.start >= window - step


def test_bad_windows():
    with pytest.raises(ValueError, match="at least 2 tokens"):
        scoring_windows(10, 1)
    with pytest.raises(ValueError, match=r"stride must be in 1..9"):
        scoring_windows(100, 10, stride=10)
