"""The registry of PIC methods drives everything: a method registered as ONE entry of
``harness.pic.methods.PIC_METHODS`` parses, validates, describes itself, applies through ``apply_pic``
(positions or RoPE base as the entry says, checked against references computed here), and is handled by
vllm-pic's overrides and the plots without any other change."""

from __future__ import annotations

import pytest
import torch

from harness import Inference, apply_pic, pic_settings, remove_pic
from harness.core.errors import UsageError
from harness.models.masks import positions_from_mask
from harness.pic.methods import PIC_METHODS, PicMethod
from harness.pic.variants import Variant, describe, evaluated_as
from tests.conftest import tiny_causal_lm


def _knee(m, length, inference):
    """Toy kind "ids": ids below l_ic kept, the rest compressed by s_cr: ``l_ic + (m - l_ic) / s_cr``."""
    return m.clamp(max=inference.initial) + (m - inference.initial).clamp(min=0) / inference.ratio


@pytest.fixture
def toy_methods():
    """Two toy methods, registered for one test and removed after it."""
    added = {
        "knee": PicMethod("Knee PIC", fields=("ratio", "initial"), ids=_knee),
        "squared": PicMethod(
            "Squared-base PIC", symbol="s_b", ratio_label="base ratio", base=lambda b, inf: b * inf.ratio**2
        ),
    }
    PIC_METHODS.update(added)
    yield added
    for name in added:
        del PIC_METHODS[name]


def test_a_registered_method_parses_validates_and_describes_itself(toy_methods):
    knee = Inference.from_model_args({"pic": "knee", "pic_ratio": "2", "pic_initial": "3", "pic_recent": "9"})
    assert knee == Inference("knee", 2.0, 3, 9)
    assert knee.label() == "Knee PIC (s_cr 2, l_ic 3)"
    assert Inference("squared", 4.0).label() == "Squared-base PIC (s_b 4)"
    assert knee.used_fields == ("method", "ratio", "initial", "rope_base")
    assert knee.effective() == Inference("knee", 2.0, 3)  # l_rc does not matter to it
    assert describe("pic-sft", knee) == "Knee PIC-SFT (s_cr 2, l_ic 3)"
    assert evaluated_as(Variant("m", "pic-sft", {}, knee), knee.replace(recent=50)) == "Knee PIC-SFT (s_cr 2, l_ic 3)"
    assert Inference.from_variant_json(knee.to_variant_json()) == knee
    with pytest.raises(UsageError, match=r"^pic_ratio \(s_cr\) must be > 0, got 0.0$"):
        Inference("knee", 0.0)
    with pytest.raises(UsageError, match=r"allowed: none, naive, ntk, dynamic, knee, squared$"):
        Inference("yarn")


def test_a_registered_ids_method_applies_its_positions(toy_methods):
    model = tiny_causal_lm("llama")
    ids = torch.randint(3, 97, (2, 24), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1, :5] = 0
    pos, _ = positions_from_mask(mask)
    m = pos.float()
    reference = torch.where(m < 3, m, 3 + (m - 3) / 2.0)  # l_ic 3, s_cr 2, written out here
    expected = model(input_ids=ids, attention_mask=mask, position_ids=reference).logits
    plain = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits
    apply_pic(model, Inference("knee", 2.0, 3))
    assert pic_settings(model) == Inference("knee", 2.0, 3)
    got = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits
    keep = mask[..., None].bool()
    assert (got - expected).abs().masked_select(keep).max() <= 1e-5
    assert (got - plain).abs().masked_select(keep).max() > 1e-3
    remove_pic(model)
    assert torch.equal(model(input_ids=ids, attention_mask=mask, position_ids=pos).logits, plain)


def test_a_registered_base_method_rotates_at_its_base(toy_methods):
    model = tiny_causal_lm("llama")
    base = model.config.rope_parameters["rope_theta"]
    reference = tiny_causal_lm("llama")
    reference.config.rope_parameters = {**reference.config.rope_parameters, "rope_theta": base * 9.0}
    reference = type(reference)(reference.config).eval()
    reference.load_state_dict(model.state_dict())
    ids = torch.randint(3, 97, (1, 20), generator=torch.Generator().manual_seed(1))
    apply_pic(model, "squared", ratio=3.0)  # the keyword form of the public API
    assert (model(input_ids=ids).logits - reference(input_ids=ids).logits).abs().max() <= 1e-5


def test_vllm_and_plots_follow_the_registry(toy_methods):
    from harness.engines.vllm_pic.lm import vllm_pic_overrides
    from harness.reporting.pic_plot import PicPoint, pic_series

    config = {"architectures": ["LlamaForCausalLM"], "rope_parameters": {"rope_type": "default", "rope_theta": 100.0}}
    for method in ("squared", "knee"):  # vLLM's PIC class applies any method from its registry entry
        assert vllm_pic_overrides(config, Inference(method, 3.0)) == {
            "architectures": ["PicLlamaForCausalLM"],
            "pic_inference": {
                "pic": method,
                "pic_ratio": 3.0,
                "pic_initial": 4,
                "pic_recent": 200,
                "pic_layout": "paper",
            },
        }
    points = [
        PicPoint({"pretrained": "/m/A", "pic": "knee", "pic_ratio": r, "pic_initial": 8}, 10.0 * r, 1.0) for r in (2, 4)
    ] + [PicPoint({"pretrained": "/m/A"}, 5.0, 1.0)]
    series = pic_series(points)
    assert [ratio for ratio, _ in series["A"]["knee"]["initial=8"]] == [1.0, 2.0, 4.0]


def test_apply_pic_keeps_its_keyword_form_and_takes_the_value():
    model = tiny_causal_lm("llama")
    apply_pic(model, "dynamic", ratio=4, initial=4, recent=200)
    assert pic_settings(model) == Inference("dynamic", 4.0, 4, 200)
    apply_pic(model, method="naive", ratio=2)
    assert pic_settings(model) == Inference("naive", 2.0)
    apply_pic(model, Inference("ntk", 2.0), impl="reference")  # keywords replace the value's fields
    assert pic_settings(model) == Inference("ntk", 2.0, impl="reference")
    with pytest.raises(UsageError, match="give the method once"):
        apply_pic(model, "naive", method="ntk")
    with pytest.raises(UsageError, match=r"^apply_pic: s_cr is not a field of Inference; allowed: method, ratio, "):
        apply_pic(model, "naive", s_cr=2)  # the keywords are Inference's fields, nothing else


def test_apply_pic_sets_the_inference_rope_base_for_good():
    from harness.pic.hf import rope_base, set_rope_base

    model = tiny_causal_lm("llama")
    ids = torch.randint(3, 97, (1, 16), generator=torch.Generator().manual_seed(2))
    reference = tiny_causal_lm("llama")
    set_rope_base(reference, 40000.0)
    apply_pic(reference, "naive", ratio=2.0)
    apply_pic(model, Inference("naive", 2.0, rope_base=40000))
    assert rope_base(model) == 40000.0 and pic_settings(model) == Inference("naive", 2.0, rope_base=40000.0)
    assert torch.equal(model(input_ids=ids).logits, reference(input_ids=ids).logits)
    remove_pic(model)  # the PIC method goes; the base stays, as set_rope_base's does
    assert rope_base(model) == 40000.0 and pic_settings(model) is None


@pytest.mark.parametrize("arch", __import__("harness.models.tiny", fromlist=["ARCHITECTURES"]).ARCHITECTURES)
def test_which_layers_pic_changes_is_one_rule_read_from_the_config(arch):
    """``kept_layers`` (the config rule, which vLLM reads from config.json) agrees with each family's own modules
    (a layer without RoPE: ``use_rope`` False; a sliding layer: the window its attention module, or for families
    without one per layer the config, gives it), for the config object and for its JSON alike."""
    from harness.pic.hf.rope_layout import kept_layers

    model = tiny_causal_lm(arch, layers=3)
    config = model.config
    expected = {}
    for index, layer in enumerate(model.get_decoder().layers):
        attn = layer.self_attn
        window = attn.sliding_window if hasattr(attn, "sliding_window") else getattr(config, "sliding_window", None)
        if not getattr(attn, "use_rope", True):
            expected[index] = "no RoPE"
        elif window:
            expected[index] = f"sliding window {window}"
    assert kept_layers(config) == expected == kept_layers(config.to_dict())
    if arch in ("gemma2", "gemma3_text"):
        assert expected == {0: "sliding window 8", 1: "sliding window 8"}
    if arch == "smollm3":
        assert expected == {0: "no RoPE", 1: "no RoPE"}


def test_a_mistral_v01_sliding_window_keeps_every_layer():
    """Mistral v0.1 (a config sliding window, no layer types): every layer slides, none is PIC's, by both rules."""
    from harness.pic.hf.rope_layout import kept_layers

    model = tiny_causal_lm("mistral", layers=2, sliding_window=8)
    assert kept_layers(model.config) == {0: "sliding window 8", 1: "sliding window 8"}
    with pytest.raises(UsageError, match="no layer has full attention with RoPE"):
        apply_pic(model, "naive", ratio=2.0)
