"""``Inference``, the one value of PIC / RoPE settings: defaults, checks, model args <-> value <-> variant JSON,
which fields matter, words (harness/pic/inference.py, the registry in harness/pic/methods.py)."""

from __future__ import annotations

import dataclasses
import json
import sys

import pytest

from harness.core.errors import UsageError
from harness.pic.inference import LAYOUTS, MODEL_ARGS, VARIANT_KEYS, Inference
from harness.pic.methods import PIC_METHODS


def test_defaults_are_standard_inference():
    assert Inference() == Inference("none", 1.0, 4, 200, "paper", None, "cached")
    assert [f.name for f in dataclasses.fields(Inference)] == [
        "method",
        "ratio",
        "initial",
        "recent",
        "layout",
        "rope_base",
        "impl",
    ]
    assert Inference().label() == "standard inference" and not Inference().entry.acts
    assert list(PIC_METHODS) == ["none", "naive", "ntk", "dynamic"] and LAYOUTS == ("paper", "contiguous")


def test_values_are_normalised_and_frozen():
    value = Inference("dynamic", 2, 10.0, 600, rope_base=40000)
    assert (value.ratio, value.initial, value.rope_base) == (2.0, 10, 40000.0)
    assert type(value.ratio) is float and type(value.initial) is int and type(value.rope_base) is float
    assert Inference(ratio="2", initial="10", rope_base="none") == Inference(ratio=2.0, initial=10)  # as model args
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.ratio = 3.0  # type: ignore[misc]
    assert value.replace(ratio=3) == Inference("dynamic", 3.0, 10, 600, rope_base=40000.0)


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(method="yarn"), "pic 'yarn' is unknown; allowed: none, naive, ntk, dynamic"),
        (dict(method="naive", ratio=0), "pic_ratio (s_cr) must be > 0, got 0.0"),
        (dict(method="ntk", ratio=-2), "pic_ratio (s_rr) must be > 0, got -2.0"),
        (dict(method="ntk", ratio=float("nan")), "pic_ratio (s_rr) must be a number (float), got nan"),
        (dict(ratio=True), "pic_ratio must be a number (float), got True"),
        (dict(ratio="two"), "pic_ratio must be a number (float), got 'two'"),
        (dict(initial=-1), "pic_initial (l_ic) must be >= 0, got -1"),
        (dict(initial=2.5), "pic_initial (l_ic) must be an integer (int), got 2.5"),
        (dict(recent=float("inf")), "pic_recent (l_rc) must be an integer (int), got inf"),
        (dict(layout="squeezed"), "pic_layout 'squeezed' is unknown; allowed: paper, contiguous"),
        (dict(rope_base=0), "rope_base must be > 0, got 0.0"),
        (dict(rope_base="big"), "rope_base must be a number (float) or none, got 'big'"),
        (dict(impl="fast"), "pic_impl 'fast' is unknown; allowed: cached, reference"),
    ],
)
def test_checks_are_one_line_naming_the_field(fields, message):
    with pytest.raises(UsageError) as err:
        Inference(**fields)
    assert str(err.value) == message and "\n" not in message


def test_model_args_round_trip():
    args = {
        "pretrained": "/m",
        "pic": "dynamic",
        "pic_ratio": "2.5",
        "pic_initial": "10",
        "pic_recent": 600,
        "pic_layout": "contiguous",
        "rope_base": "1e6",
        "pic_impl": "reference",
        "batch_size": 4,
    }
    value = Inference.from_model_args(args)  # strings converted, other args ignored
    assert value == Inference("dynamic", 2.5, 10, 600, "contiguous", 1e6, "reference")
    assert value.to_model_args() == {
        "pic": "dynamic",
        "pic_ratio": 2.5,
        "pic_initial": 10,
        "pic_recent": 600,
        "pic_layout": "contiguous",
        "rope_base": 1e6,
        "pic_impl": "reference",
    }
    assert Inference.from_model_args(value.to_model_args()) == value
    assert Inference.from_model_args({"rope_base": "None", "pic_ratio": None}) == Inference()
    assert Inference.fields_from({"pic": "ntk", "pic_ratio": "16", "rope_base": "none"}) == {
        "method": "ntk",
        "ratio": 16.0,
        "rope_base": None,
    }
    assert set(MODEL_ARGS.values()) == set(VARIANT_KEYS) | {"pic_impl"}


@pytest.mark.parametrize(
    "args, message",
    [
        ({"pic_ratio": "two"}, "pic_ratio must be a number (float), got 'two'"),
        ({"pic_initial": "4.0"}, "pic_initial must be an integer (int), got '4.0'"),
        ({"pic_recent": [1]}, "pic_recent must be an integer (int), got [1]"),
        ({"rope_base": "big"}, "rope_base must be a number (float) or none, got 'big'"),
        ({"pic_layout": "spiral"}, "pic_layout 'spiral' is unknown; allowed: paper, contiguous"),
    ],
)
def test_bad_model_args_name_the_arg(args, message):
    with pytest.raises(UsageError) as err:
        Inference.from_model_args(args)
    assert str(err.value) == message


def test_variant_json_round_trip():
    value = Inference("dynamic", 2.0, 10, 600, impl="reference")
    block = value.to_variant_json()
    assert block == {
        "pic": "dynamic",
        "pic_ratio": 2.0,
        "pic_initial": 10,
        "pic_recent": 600,
        "pic_layout": "paper",
        "rope_base": None,
    }  # the keys lch_variant.json always had; impl is not the variant's
    assert Inference.from_variant_json(json.loads(json.dumps(block))) == value.replace(impl="cached")
    assert Inference.from_variant_json({"pic": "ntk", "pic_ratio": 16}) == Inference("ntk", 16.0)  # hand-written
    with pytest.raises(UsageError, match=r"^unknown inference keys \['pic_impl'\]; allowed: pic, pic_ratio"):
        Inference.from_variant_json({"pic_impl": "cached"})


@pytest.mark.parametrize(
    "value, used",
    [
        (Inference("none", 3.0, 9, 9, "contiguous"), ("method", "rope_base")),
        (Inference("naive", 3.0, 9, 9, "contiguous"), ("method", "ratio", "rope_base")),
        (Inference("ntk", 3.0, 9, 9, "contiguous"), ("method", "ratio", "rope_base")),
        (
            Inference("dynamic", 3.0, 9, 9, "contiguous"),
            ("method", "ratio", "initial", "recent", "layout", "rope_base"),
        ),
    ],
)
def test_effective_keeps_only_the_fields_the_method_uses(value, used):
    assert value.used_fields == used
    effective = value.replace(impl="reference").effective()
    defaults = Inference()
    for field in dataclasses.fields(Inference):
        expected = getattr(value, field.name) if field.name in used else getattr(defaults, field.name)
        assert getattr(effective, field.name) == expected
    assert Inference("none", 3.0).effective() == Inference()
    assert Inference("ntk", 2.0, 9).effective() == Inference("ntk", 2.0)


def test_label():
    assert Inference("dynamic", 2.0, 10, 600).label() == "Dynamic PIC (s_cr 2, l_ic 10, l_rc 600)"
    assert (
        Inference("dynamic", 2.0, 10, 600, "contiguous").label()
        == "Dynamic PIC (s_cr 2, l_ic 10, l_rc 600, contiguous layout)"
    )
    assert Inference("ntk", 16.0).label() == "NTK-aware PIC (s_rr 16)"
    assert Inference("naive", 4.0, 9, 9).label() == "Naive PIC (s_cr 4)"
    assert Inference(rope_base=1e6).label() == "RoPE base 1e+06"
    assert Inference("ntk", 2.0, rope_base=40000).label() == "NTK-aware PIC (s_rr 2), RoPE base 40000"
    assert Inference("none", 8.0).label() == "standard inference"


def test_the_value_and_the_registry_import_no_torch():
    import subprocess

    code = (
        "import sys; import harness.pic.inference, harness.reporting.plots, harness.pic.variants; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
