"""EPL position layouts: docs/formulas.md §5's fixture table (the paper's Tables 1-3) cell by cell, the partial
last chunk, and the two properties that define UPL and CPL."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest

from harness.compressor.positions import chunk_lengths, decoder_positions, encoder_positions, uniform_positions

K, L, M, P, X = 2, 510, 102, 1020, 2040


def r(a: int, b: int, step: int = 1) -> list[int]:
    return list(range(a, b + 1, step))


@pytest.mark.parametrize(
    "layout, carrier, enc, dec_memory, ae, lm",
    [
        (
            "dpl",
            "icae",
            [(r(0, 509), r(510, 611)), (r(0, 509), r(510, 611))],
            r(0, 203),
            (204, r(205, 1224)),
            (204, r(205, 1224)),
        ),
        (
            "dpl",
            "500x",
            [(r(0, 509), r(510, 611)), (r(0, 509), r(510, 611))],
            r(510, 611) * 2,
            (204, r(205, 1224)),
            (204, r(205, 1224)),
        ),
        (
            "epl",
            "icae",
            [(r(1, 510), r(3, 508, 5)), (r(511, 1020), r(513, 1018, 5))],
            r(3, 508, 5) + r(513, 1018, 5),
            (0, r(1, 1020)),
            (1020, r(1021, 2040)),
        ),
        (
            "epl",
            "500x",
            [(r(1, 510), r(3, 508, 5)), (r(511, 1020), r(513, 1018, 5))],
            r(3, 508, 5) + r(513, 1018, 5),
            (0, r(1, 1020)),
            (1020, r(1021, 2040)),
        ),
    ],
)
def test_spec_fixture_table(layout, carrier, enc, dec_memory, ae, lm):
    chunks = encoder_positions(P, L, M, layout)
    assert [(c.context, c.memory) for c in chunks] == enc
    for task, (special, following) in (("ae", ae), ("lm", lm)):
        got = decoder_positions(P, L, M, layout, carrier, task, n_follow=P if task == "ae" else X - P)
        assert got.memory == dec_memory and got.special == special and got.following == following


def test_upl_only_changes_the_encoder_memory():
    chunks = encoder_positions(P, L, M, "upl")
    assert [c.context for c in chunks] == [r(0, 509)] * 2
    assert [c.memory for c in chunks] == [r(2, 507, 5)] * 2  # U(0, 509): linspace(2, 507, 102)
    assert decoder_positions(P, L, M, "upl", "icae", "lm", 5).all() == r(0, 203) + r(204, 209)
    assert decoder_positions(P, L, M, "upl", "500x", "lm", 5).memory == r(2, 507, 5) * 2


def _upl_reference(v1: int, v_last: int, m: int) -> list[int]:
    """Algorithm 1 in exact rational arithmetic, Python's round-half-even."""
    rr = Fraction(v_last - v1 + 1, m)
    o = (rr - 1) / 2
    lo, hi = v1 + o, v_last - o
    return [round(lo + (hi - lo) * Fraction(i, m - 1)) if m > 1 else round(lo) for i in range(m)]


def test_partial_last_chunk_and_qa():
    p = 1100  # chunks of 510, 510, 80
    assert chunk_lengths(p, L) == [510, 510, 80]
    chunks = encoder_positions(p, L, M, "epl")
    assert chunks[2].context == r(1021, 1100)
    assert chunks[2].memory == _upl_reference(1021, 1100, M)  # r < 1: memories share ids
    assert len(chunks[2].memory) == M and chunks[2].memory[0] == 1021 and chunks[2].memory[-1] == 1100
    dpl = encoder_positions(p, L, M, "dpl")
    assert dpl[2].context == r(0, 79) and dpl[2].memory == r(80, 181)
    qa = decoder_positions(p, L, M, "epl", "500x", "qa", n_follow=12)  # question + answer after [LM] at p
    assert qa.special == p and qa.following == r(p + 1, p + 12)
    assert decoder_positions(p, L, M, "dpl", "icae", "qa", 3).all() == r(0, 3 * M + 3)


def _max_gap(context: list[int], memory: list[int]) -> int:
    return max(min(abs(v - u) for u in memory) for v in context)


@pytest.mark.parametrize("n, m", [(n, m) for n in range(1, 13) for m in range(1, 5) if m <= n])
def test_upl_minimises_the_largest_distance(n, m):
    """max over context ids of the distance to the nearest memory id is the smallest any integer layout
    can reach (brute force over every set of m ids in the context range), and UPL matches Algorithm 1."""
    context = list(range(5, 5 + n))
    upl = uniform_positions(context[0], context[-1], m)
    assert upl == _upl_reference(context[0], context[-1], m)
    best = min(_max_gap(context, list(c)) for c in itertools.combinations(context, m))
    assert _max_gap(context, upl) == best


@pytest.mark.parametrize("p", [7, 510, 1020, 1337])
@pytest.mark.parametrize("carrier", ["icae", "500x"])
def test_cpl_keeps_causal_order(p, carrier):
    chunks = encoder_positions(p, 64, 16, "epl")
    flat = [v for c in chunks for v in c.context]
    assert flat == r(1, p)  # context ids in causal order across chunks
    for task in ("lm", "qa"):
        dec = decoder_positions(p, 64, 16, "epl", carrier, task, n_follow=9)
        assert max(dec.memory) <= dec.special < dec.following[0]  # completion / QA follow the context
        assert dec.following == r(dec.special + 1, dec.special + 9)
    ae = decoder_positions(p, 64, 16, "epl", carrier, "ae", n_follow=p)
    assert ae.special == 0 and ae.following == flat  # reconstruction at the ids the encoder gave the context
    # DPL of 500x breaks it (memory ids above [LM]); EPL is what fixes it
    dpl = decoder_positions(1020, 510, 102, "dpl", "500x", "lm", 3)
    assert max(dpl.memory) > dpl.special


def test_bad_arguments():
    with pytest.raises(ValueError, match="layout"):
        encoder_positions(10, 4, 2, "xyz")
    with pytest.raises(ValueError, match="carrier"):
        decoder_positions(10, 4, 2, "epl", "gist", "lm", 1)
    with pytest.raises(ValueError, match="task"):
        decoder_positions(10, 4, 2, "epl", "icae", "sum", 1)
    with pytest.raises(ValueError, match="at least one"):
        encoder_positions(0, 4, 2, "dpl")
