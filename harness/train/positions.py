"""Training positions and splits (pure): Dynamic PIC-SFT's answer segments (the PIC paper, Fig. 2) and LongRecipe's
transformation (docs/formulas.md §7): ``pos(s_1) = 0``, ``pos(s_i) = pos(s_{i-1}) + |s_{i-1}| + g_i + 1``."""

from __future__ import annotations

import random

from harness.core.errors import UsageError

LAYER = "pure"  # harness/devtools/layers.py


def dynamic_sft_segments(n_answer: int, segment_length: int) -> list[tuple[int, int]]:
    """``[(start, end), ...]`` answer-token ranges, first to last, cut from the end: the last segment
    ends at ``n_answer``, each is ``segment_length`` long except the first (the remainder)."""
    if segment_length < 1:
        raise UsageError(f"segment length must be >= 1, got {segment_length}")
    return [(max(0, end - segment_length), end) for end in range(n_answer, 0, -segment_length)][::-1]


def auto_max_skip(segment_lengths: list[int], target_length: int) -> int:
    """The ``M`` whose mean skip spreads the segments over the target: the ``N - 1`` gaps of mean
    ``M / 2 + 1`` add up to ``target_length - sum(|s_i|)`` (0 when nothing is left to spread)."""
    spare = target_length - sum(segment_lengths)
    gaps = len(segment_lengths) - 1
    if gaps < 1 or spare <= gaps:
        return 0
    return max(0, int(2 * spare / gaps) - 2)


def skip_positions(
    segment_lengths: list[int], max_skip: int, target_length: int, rng: random.Random
) -> tuple[int, list[int]]:
    """``(n_segments_kept, their tokens' positions)``, ``g_i ~ U{0..max_skip}`` drawn for each segment after the first;
    a segment whose last position would reach ``target_length`` ends the example."""
    if max_skip < 0:
        raise UsageError(f"max skip M must be >= 0, got {max_skip}")
    positions: list[int] = []
    start = 0
    kept = 0
    for i, length in enumerate(segment_lengths):
        if i > 0:
            start = start + segment_lengths[i - 1] + rng.randint(0, max_skip) + 1
        if start + length - 1 >= target_length:
            break
        positions.extend(range(start, start + length))
        kept += 1
    return kept, positions
