"""PIC on every RoPE family of transformers 5.x, on tiny random configs built in code, against references
written here, independently of harness.pic.hf:

* the *reference forward* is the never-patched model, uncached, whose full-attention RoPE layers (read
  from the config: ``layer_types``, ``no_rope_layers``) are handed ``(cos, sin)`` of the model's own
  rotary embedding at explicit positions (naive ``m / s``, Dynamic ``g_{l_c}`` of Eq. 9), or of a
  model built from a config with base ``b * s`` (NTK-aware); every other layer runs as the model does.
  On families where every layer is such a layer it is simply ``model(position_ids=...)``, checked too.
* Algorithm 1 (re-rotate every cached key at ``g_{l_c}``) equals that uncached forward at every decode
  step when the one PIC layer is the last layer (nothing after it caches anything computed at older
  positions, and the layers before it do not depend on them); with more PIC layers Algorithm 1 and a
  recomputation differ by design (tests/pic/test_pic_model.py), and the shipped path is checked
  against ``impl="reference"``.
"""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import AutoModelForCausalLM, DynamicCache

from harness import apply_pic, pic_settings, remove_pic
from harness.models.masks import positions_from_mask
from harness.models.tiny import ARCHITECTURES
from harness.pic.positions import dynamic_positions
from tests.conftest import tiny_causal_lm

FAMILIES = list(ARCHITECTURES)
SETTINGS = dict(ratio=3.0, initial=4, recent=8)
STEPS = 48


def test_every_family_of_the_issue_is_covered():
    assert set(FAMILIES) >= {
        "llama",
        "mistral",
        "mixtral",
        "qwen2",
        "qwen3",
        "qwen3_moe",
        "glm",
        "glm4",
        "gemma2",
        "gemma3_text",
        "phi3",
        "olmo2",
        "smollm3",
        "granite",
    }


def _pic_layer_flags(config) -> list[bool]:
    """Which layers are full-attention RoPE layers, read from the config alone."""
    types = getattr(config, "layer_types", None)
    no_rope = getattr(config, "no_rope_layers", None)
    flags = []
    for i in range(config.num_hidden_layers):
        full = types[i] == "full_attention" if types is not None else getattr(config, "sliding_window", None) is None
        flags.append(full and (no_rope is None or bool(no_rope[i])))
    return flags


def _batch(batch=2, length=30, pads=(0, 6), seed=1):
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, 97, (batch, length), generator=gen)
    mask = torch.ones(batch, length, dtype=torch.long)
    for row, pad in enumerate(pads[:batch]):
        mask[row, :pad] = 0
    return ids, mask


def _rebased(model, ratio: float):
    """The same weights in a model whose config has RoPE base ``b * ratio`` (for the full-attention type)."""
    config = copy.deepcopy(model.config)
    params = dict(config.rope_parameters)
    if "rope_theta" in params:
        params["rope_theta"] = params["rope_theta"] * ratio
    else:
        params["full_attention"] = {
            **params["full_attention"],
            "rope_theta": params["full_attention"]["rope_theta"] * ratio,
        }
    config.rope_parameters = params
    other = AutoModelForCausalLM.from_config(config).eval()
    other.load_state_dict(model.state_dict())
    return other


def reference_logits(plain, ids, mask, positions, ntk_ratio: float | None = None):
    """Uncached forward of ``plain`` with its full-attention RoPE layers at ``positions`` (see module doc)."""
    rotary_model = plain if ntk_ratio is None else _rebased(plain, ntk_ratio)
    rotary = rotary_model.model.rotary_emb
    x = torch.empty(0)
    typed = "full_attention" in plain.config.rope_parameters
    cos_sin = rotary(x, positions, "full_attention") if typed else rotary(x, positions)
    handles = [
        layer.self_attn.register_forward_pre_hook(
            lambda module, args, kwargs: (args, {**kwargs, "position_embeddings": cos_sin}), with_kwargs=True
        )
        for layer, is_pic in zip(plain.model.layers, _pic_layer_flags(plain.config))
        if is_pic
    ]
    try:
        with torch.no_grad():
            return plain(input_ids=ids, attention_mask=mask, use_cache=False).logits
    finally:
        for handle in handles:
            handle.remove()


def _masked_max(a, b, mask):
    return ((a - b) * mask[..., None]).abs().max().item()


def _positions(method, mask):
    pos, lengths = positions_from_mask(mask)
    if method == "naive":
        return pos.float() / SETTINGS["ratio"]
    if method == "ntk":
        return pos
    return dynamic_positions(pos, lengths[:, None], SETTINGS["ratio"], SETTINGS["initial"], SETTINGS["recent"])


@pytest.mark.parametrize("arch", FAMILIES)
@pytest.mark.parametrize("method", ["naive", "ntk", "dynamic"])
def test_prefill_equals_the_reference_forward(arch, method):
    model, plain = tiny_causal_lm(arch), tiny_causal_lm(arch)  # same seed, same weights; plain never patched
    ids, mask = _batch()
    positions = _positions(method, mask)
    ratio = SETTINGS["ratio"] if method == "ntk" else None
    expected = reference_logits(plain, ids, mask, positions, ntk_ratio=ratio)
    apply_pic(model, method, **SETTINGS)
    with torch.no_grad():
        got = model(input_ids=ids, attention_mask=mask).logits
        vanilla = plain(input_ids=ids, attention_mask=mask).logits
    assert _masked_max(got, expected, mask) <= 1e-5
    assert _masked_max(got, vanilla, mask) > 1e-4  # the variant really changes the model
    if all(_pic_layer_flags(plain.config)):  # every layer is a PIC layer: plain explicit positions too
        explicit_model = plain if ratio is None else _rebased(plain, ratio)
        with torch.no_grad():
            explicit = explicit_model(input_ids=ids, attention_mask=mask, position_ids=positions).logits
        assert _masked_max(got, explicit, mask) <= 1e-5


def _decode(model, ids, mask, tokens=None, steps=STEPS):
    """Prefill + ``steps`` greedy decode steps through a DynamicCache (feeding ``tokens`` when given);
    returns the last-token logits of every call and the tokens fed."""
    cache = DynamicCache(config=model.config)
    fed, logits = [], []
    with torch.no_grad():
        # the prefill's last logits only (logits_to_keep=1): the head over every prompt token is not compared
        out = model(input_ids=ids, attention_mask=mask, past_key_values=cache, use_cache=True, logits_to_keep=1)
        for step in range(steps + 1):
            logits.append(out.logits[:, -1])
            if step == steps:
                break
            token = tokens[step] if tokens is not None else out.logits[:, -1].argmax(-1, keepdim=True)
            fed.append(token)
            mask = torch.cat([mask, torch.ones_like(token)], dim=1)
            out = model(input_ids=token, attention_mask=mask, past_key_values=cache, use_cache=True)
    return logits, fed


def _one_pic_layer(arch):
    """The smallest model of the family whose only PIC layer is its last layer."""
    layers = 1 if all(_pic_layer_flags(tiny_causal_lm(arch).config)) else 2
    return tiny_causal_lm(arch, layers=layers), tiny_causal_lm(arch, layers=layers)


@pytest.mark.parametrize("arch", FAMILIES)
@pytest.mark.parametrize("layout", ["paper", "contiguous"])
def test_dynamic_decode_is_algorithm1(arch, layout):
    """Prefill and 48 decode steps, a left-padded batch: every step's logits equal the reference forward of
    the whole sequence at ``g_{l_c}``, for both implementations."""
    model, plain = _one_pic_layer(arch)
    assert sum(_pic_layer_flags(model.config)) == 1 and _pic_layer_flags(model.config)[-1]
    ids, mask = _batch()
    pads = (mask == 0).sum(-1)
    for impl in ("cached", "reference"):
        apply_pic(model, "dynamic", layout=layout, impl=impl, **SETTINGS)
        logits, tokens = _decode(model, ids, mask)
        diffs = []
        for step, got in enumerate(logits):
            seq = torch.cat([ids, *tokens[:step]], dim=1)
            full_mask = torch.cat([mask, torch.ones(2, step, dtype=torch.long)], dim=1)
            pos, lengths = positions_from_mask(full_mask)
            g = dynamic_positions(
                pos, lengths[:, None], SETTINGS["ratio"], SETTINGS["initial"], SETTINGS["recent"], layout
            )
            diffs.append((got - reference_logits(plain, seq, full_mask, g)[:, -1]).abs().max().item())
        assert len(diffs) == STEPS + 1 and max(diffs) <= 1e-4, (impl, max(diffs))
    assert int(pads[1]) > 0  # the batch really is left-padded


def _three_layer_pair(arch):
    """Three layers with two PIC layers (and, in hybrid families, a layer of the other kind between)."""

    def build():
        model = tiny_causal_lm(arch, layers=3)
        config = model.config
        if getattr(config, "layer_types", None) is not None and "sliding_attention" in config.layer_types:
            config.layer_types = ["full_attention", "sliding_attention", "full_attention"]
        if getattr(config, "no_rope_layers", None) is not None:
            config.no_rope_layers = [1, 0, 1]
        torch.manual_seed(0)
        return AutoModelForCausalLM.from_config(config).eval()

    return build()


@pytest.mark.parametrize("arch", FAMILIES)
def test_dynamic_cached_path_equals_algorithm1_reference_on_many_layers(arch):
    model = _three_layer_pair(arch)
    assert sum(_pic_layer_flags(model.config)) >= 2
    ids, mask = _batch(batch=3, length=30, pads=(0, 4, 9))
    apply_pic(model, "dynamic", impl="reference", layout="contiguous", **SETTINGS)
    oracle, tokens = _decode(model, ids, mask)
    apply_pic(model, "dynamic", impl="cached", layout="contiguous", **SETTINGS)
    shipped, _ = _decode(model, ids, mask, tokens=tokens)
    assert max((a - b).abs().max().item() for a, b in zip(shipped, oracle)) <= 1e-4
    remove_pic(model)
    vanilla, _ = _decode(model, ids, mask, tokens=tokens)
    assert (vanilla[-1] - oracle[-1]).abs().max() > 1e-4


@pytest.mark.parametrize("arch", FAMILIES)
def test_dynamic_beam_search_and_generate(arch):
    model = _three_layer_pair(arch)
    ids, mask = _batch(batch=2, pads=(0, 5))
    kwargs = dict(attention_mask=mask, max_new_tokens=20, do_sample=False, pad_token_id=0)
    beams = dict(kwargs, num_beams=3, output_scores=True, return_dict_in_generate=True)
    apply_pic(model, "dynamic", impl="reference", **SETTINGS)
    oracle_greedy, oracle_beam = model.generate(input_ids=ids, **kwargs), model.generate(input_ids=ids, **beams)
    apply_pic(model, "dynamic", impl="cached", **SETTINGS)
    assert torch.equal(model.generate(input_ids=ids, **kwargs), oracle_greedy)
    shipped = model.generate(input_ids=ids, **beams)
    assert torch.equal(shipped.sequences, oracle_beam.sequences)
    assert torch.allclose(shipped.sequences_scores, oracle_beam.sequences_scores, atol=1e-4)


@pytest.mark.parametrize("arch", FAMILIES)
def test_pic_through_peft_and_remove(arch):
    peft = pytest.importorskip("peft")
    lora = peft.get_peft_model(
        tiny_causal_lm(arch), peft.LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False)
    )
    ids, mask = _batch()
    with torch.no_grad():
        before = lora(input_ids=ids, attention_mask=mask).logits
    merged = copy.deepcopy(lora).merge_and_unload()  # the adapter folded in: a plain model of the family
    expected = reference_logits(merged, ids, mask, _positions("dynamic", mask))
    apply_pic(lora, "dynamic", **SETTINGS)
    assert pic_settings(lora).method == "dynamic"
    with torch.no_grad():
        got = lora(input_ids=ids, attention_mask=mask).logits
    assert _masked_max(got, expected, mask) <= 1e-4
    remove_pic(lora)
    with torch.no_grad():
        assert torch.equal(lora(input_ids=ids, attention_mask=mask).logits, before)


@pytest.mark.parametrize("arch", ["llama", "gemma3_text"])
def test_set_rope_base_changes_the_full_attention_base_in_place(arch):
    """LongRecipe's larger base: the PIC layers' base (Gemma 3: the global type only) is rebuilt in place
    (the same module, so hooks on it stay), and the model equals one loaded with that base."""
    from harness.pic.hf import rope_base, set_rope_base

    model = tiny_causal_lm(arch)
    rotary = model.model.rotary_emb
    base = rope_base(model)
    assert base == (1e6 if arch == "gemma3_text" else model.config.rope_parameters["rope_theta"])
    set_rope_base(model, base * 8)
    assert model.model.rotary_emb is rotary and rope_base(model) == base * 8
    if arch == "gemma3_text":
        assert model.config.rope_parameters["sliding_attention"]["rope_theta"] == 1e4
    expected = _rebased(tiny_causal_lm(arch), 8.0)
    ids, mask = _batch()
    with torch.no_grad():
        assert (
            _masked_max(
                model(input_ids=ids, attention_mask=mask).logits,
                expected(input_ids=ids, attention_mask=mask).logits,
                mask,
            )
            <= 1e-5
        )
