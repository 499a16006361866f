"""PIC position layouts pinned to hand-computed cases of docs/formulas.md §1 (the PIC paper, Eq. 9)."""

import math

import pytest
import torch

from harness.models.masks import positions_from_mask
from harness.pic.inference import Inference
from harness.pic.positions import (
    dynamic_position_list,
    dynamic_positions,
    naive_positions,
    ntk_base,
)


def test_paper_layout_hand_computed():
    # l_c = 10, l_ic = 2, l_rc = 3, s_cr = 2: b = 7; ids 2..6 are the middle.
    assert dynamic_position_list(10, 2.0, initial=2, recent=3) == [0, 1, 1.0, 1.5, 2.0, 2.5, 3.0, 7, 8, 9]


def test_contiguous_layout_hand_computed():
    # middle m -> 2 + (m - 2)/2; recent m -> 2 + (7 - 2)/2 + (m - 7)
    expected = [0, 1, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.5, 6.5]
    assert dynamic_position_list(10, 2.0, initial=2, recent=3, layout="contiguous") == expected


@pytest.mark.parametrize("layout", ["paper", "contiguous"])
@pytest.mark.parametrize("length", [1, 5, 204])
def test_short_sequences_unchanged(layout, length):
    # l_c <= l_ic + l_rc: nothing changes
    assert dynamic_position_list(length, 8.0, initial=4, recent=200, layout=layout) == list(range(length))


def test_paper_defaults_boundaries():
    g = dynamic_position_list(1000, 4.0)  # l_ic = 4, l_rc = 200 -> b = 800
    assert g[3] == 3 and g[4] == 1.0 and g[799] == 199.75 and g[800] == 800 and g[999] == 999


def test_expanding_ratio_is_legal():
    assert dynamic_position_list(8, 0.5, initial=1, recent=2) == [0, 2, 4, 6, 8, 10, 6, 7]
    assert naive_positions(torch.tensor([0, 3]), 0.5).tolist() == [0.0, 6.0]


def test_naive_and_ntk():
    assert naive_positions(torch.arange(5), 4.0).tolist() == [0, 0.25, 0.5, 0.75, 1.0]
    assert ntk_base(10000.0, 16) == 160000.0  # base * s_rr, not the s^(d/(d-2)) NTK rule


def test_batched_rows_use_their_own_length():
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1]])
    ids, lengths = positions_from_mask(mask)
    assert ids.tolist() == [[0, 1, 2, 3, 4, 5], [0, 0, 0, 1, 2, 3]]
    assert lengths.tolist() == [6, 4]
    g = dynamic_positions(ids, lengths[:, None], 2.0, initial=1, recent=2)
    assert g[0].tolist() == dynamic_position_list(6, 2.0, 1, 2)
    assert g[1, 2:].tolist() == dynamic_position_list(4, 2.0, 1, 2)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(method="naive", ratio=0), r"^pic_ratio \(s_cr\) must be > 0, got 0.0$"),
        (dict(method="dynamic", ratio=-2.0), r"^pic_ratio \(s_cr\) must be > 0, got -2.0$"),
        (dict(method="ntk", ratio=math.nan), r"^pic_ratio \(s_rr\) must be a number \(float\), got nan$"),
        (dict(method="yarn"), "allowed: none, naive, ntk, dynamic"),
        (dict(method="dynamic", layout="squeezed"), "allowed: paper, contiguous"),
        (dict(method="dynamic", recent=-1), "l_rc"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Inference(**kwargs)
