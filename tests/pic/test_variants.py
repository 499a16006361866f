"""The variant file (``lch_variant.json``): round trip, hand-written files, bad files, words."""

from __future__ import annotations

import json

import pytest

from harness.core.errors import DataFormatError
from harness.data.instructions import conversation
from harness.pic.inference import Inference
from harness.pic.variants import Variant, describe, evaluated_as, read_variant, write_variant

DYNAMIC = Inference("dynamic", ratio=2.0, initial=10, recent=600)


def test_round_trip_and_a_folder_without_one(tmp_path):
    variant = Variant("base/model", "pic-sft", {"segment_length": 256}, DYNAMIC)
    write_variant(tmp_path / "adapter", variant)
    assert read_variant(tmp_path / "adapter") == variant
    assert read_variant(tmp_path) is None and read_variant("org/hub-name") is None and read_variant(None) is None


def test_hand_written_file_takes_standard_values_for_missing_keys(tmp_path):
    (tmp_path / "lch_variant.json").write_text(
        json.dumps(
            {"lch_variant": 1, "base_model": "llama", "recipe": "pic-sft", "inference": {"pic": "ntk", "pic_ratio": 16}}
        )
    )
    variant = read_variant(tmp_path)
    assert variant.inference == Inference("ntk", ratio=16.0)
    assert variant.describe() == "NTK-aware PIC-SFT (s_rr 16)"


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "not readable JSON"),
        (json.dumps({"base_model": "m", "recipe": "sft"}), 'needs "lch_variant": 1'),
        (json.dumps({"lch_variant": 1, "recipe": "sft"}), "missing base_model"),
        (
            json.dumps({"lch_variant": 1, "base_model": "m", "recipe": "sft", "inference": {"pic": "yarn"}}),
            r"bad inference settings \(pic 'yarn' is unknown; allowed: none, naive, ntk, dynamic\)",
        ),
        (
            json.dumps({"lch_variant": 1, "base_model": "m", "recipe": "sft", "inference": {"pic_ratio": 0}}),
            r"bad inference settings \(pic_ratio must be > 0, got 0",
        ),
        (
            json.dumps({"lch_variant": 1, "base_model": "m", "recipe": "sft", "inference": {"s_cr": 2}}),
            r"unknown inference keys \['s_cr'\]",
        ),
    ],
)
def test_bad_files_name_the_file_and_the_problem(tmp_path, content, message):
    (tmp_path / "lch_variant.json").write_text(content)
    with pytest.raises(DataFormatError, match=message) as err:
        read_variant(tmp_path)
    assert str(tmp_path / "lch_variant.json") in str(err.value) and "\n" not in str(err.value)


def test_words_for_the_leaderboard():
    assert describe("pic-sft", DYNAMIC) == "Dynamic PIC-SFT (s_cr 2, l_ic 10, l_rc 600)"
    assert describe("sft", Inference()) == "SFT"
    assert describe("longce", Inference()) == "LongCE"
    merged = {"merged": {"weights": [0.5, 0.5]}}
    assert (
        describe("longrecipe", Inference(rope_base=40000.0), merged)
        == "LongRecipe, RoPE base 40000, merged 0.5 / 0.5 with the original"
    )
    variant = Variant("m", "pic-sft", {}, DYNAMIC)
    assert evaluated_as(variant, DYNAMIC.replace(impl="cached")) == "Dynamic PIC-SFT (s_cr 2, l_ic 10, l_rc 600)"
    # the paper's "standard inference" of a PIC-SFT checkpoint; unused ratio / l_ic / l_rc do not count
    assert (
        evaluated_as(variant, DYNAMIC.replace(method="none"))
        == "Dynamic PIC-SFT (s_cr 2, l_ic 10, l_rc 600), evaluated with standard inference"
    )
    assert evaluated_as(None, Inference()) == "base model"
    assert evaluated_as(None, Inference("naive", ratio=4.0)) == "Naive PIC (s_cr 4)"


def test_instruction_rows_in_both_shapes():
    chat = {
        "messages": [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "Q"},
            {"role": "assistant", "content": "A"},
        ]
    }
    assert conversation(chat, "f:1") == ([{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}], "A")
    assert conversation({"instruction": "Q", "response": "A"}, "f:2") == ([{"role": "user", "content": "Q"}], "A")
    with pytest.raises(DataFormatError, match="f:3: no 'messages' and no text field 'response'"):
        conversation({"instruction": "Q"}, "f:3")
    with pytest.raises(DataFormatError, match="ending with the assistant's answer"):
        conversation({"messages": [{"role": "user", "content": "Q"}]}, "f:4")
