"""LongRecipe's impactful-token analysis (the LongRecipe paper, §4.1, Eq. 3-4) on per-token scores
``delta_t = |S_H'(x_t | x_<t) - S_H(x_t | x_<t)|`` (base model H, extended H': :mod:`harness.train.impactful`):
(1) per document the top ``fraction`` of positions by ``delta`` are marked; (2) each token type v scores ``Delta(v)``,
the sum of delta over its marked positions in all documents; (3) the anchors are the top ``fraction`` of marked types
by ``Delta(v)``; (4) a document keeps the sentences holding an anchor, highest sum of anchor ``Delta(v)`` first,
within ``budget`` tokens, in document order. Token ids stand in for the paper's part-of-speech types."""

from __future__ import annotations

import math
from collections.abc import Sequence


def marked_positions(deltas: Sequence[float], fraction: float = 0.2) -> list[int]:
    """Indices of the top ``ceil(fraction * n)`` values of ``deltas`` (ties: the earlier position)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    n = math.ceil(fraction * len(deltas))
    return sorted(sorted(range(len(deltas)), key=lambda i: (-deltas[i], i))[:n])


def anchor_types(documents: Sequence[tuple[Sequence[int], Sequence[float]]], fraction: float = 0.2) -> dict[int, float]:
    """``{token id: Delta(v)}`` of the anchor types from ``(target ids, deltas)`` pairs (steps 1-3)."""
    scores: dict[int, float] = {}
    for ids, deltas in documents:
        if len(ids) != len(deltas):
            raise ValueError(f"{len(ids)} token ids but {len(deltas)} deltas")
        for i in marked_positions(deltas, fraction) if len(deltas) else []:
            scores[ids[i]] = scores.get(ids[i], 0.0) + float(deltas[i])
    keep = math.ceil(fraction * len(scores))
    return dict(sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:keep])


def select_sentences(sentences: Sequence[Sequence[int]], anchors: dict[int, float], budget: int) -> list[int]:
    """Indices (in document order) of the sentences kept for training (step 4): only sentences with an
    anchor token, best first, while their total length stays within ``budget`` tokens."""
    scored = [
        (-sum(anchors.get(tok, 0.0) for tok in sentence), i)
        for i, sentence in enumerate(sentences)
        if any(tok in anchors for tok in sentence)
    ]
    chosen, used = [], 0
    for _, i in sorted(scored):
        if used + len(sentences[i]) <= budget:
            chosen.append(i)
            used += len(sentences[i])
    return sorted(chosen)


def sentence_ranges(token_texts: Sequence[str], delimiters: str = ".!?\n") -> list[tuple[int, int]]:
    """Token ranges ``[(start, end), ...]`` of sentences: a sentence ends after a token whose text holds
    one of ``delimiters`` (the LongRecipe paper, Algorithm 1 splits on ``. ! ? \\n``)."""
    ranges, start = [], 0
    for i, text in enumerate(token_texts):
        if any(d in text for d in delimiters):
            ranges.append((start, i + 1))
            start = i + 1
    if start < len(token_texts):
        ranges.append((start, len(token_texts)))
    return ranges
