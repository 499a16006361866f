"""apply_pic on real HF models pinned to each variant's definition (docs/formulas.md §1)."""

import pytest
import torch
from transformers import DynamicCache

from harness import apply_pic, pic_settings, remove_pic
from harness.models.masks import positions_from_mask
from harness.pic.positions import dynamic_positions
from tests.conftest import tiny_causal_lm

ARCHS = ["llama", "mistral", "qwen2"]


def _batch(batch=3, length=40, pads=(0, 5, 11), vocab=97, seed=1):
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (batch, length), generator=gen)
    mask = torch.ones(batch, length, dtype=torch.long)
    for row, pad in enumerate(pads[:batch]):
        mask[row, :pad] = 0
    return ids, mask


def _masked_max_diff(a, b, mask):
    return ((a - b) * mask[..., None]).abs().max().item()


@pytest.mark.parametrize("arch", ARCHS)
def test_naive_equals_explicit_fractional_positions(arch):
    model = tiny_causal_lm(arch)
    ids, mask = _batch()
    pos, _ = positions_from_mask(mask)
    expected = model(input_ids=ids, attention_mask=mask, position_ids=pos.float() / 3.0).logits
    apply_pic(model, "naive", ratio=3.0)
    got = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits
    assert _masked_max_diff(got, expected, mask) <= 1e-5
    plain = tiny_causal_lm(arch)(input_ids=ids, attention_mask=mask, position_ids=pos).logits
    assert _masked_max_diff(got, plain, mask) > 1e-3  # the variant really changes the model


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("ratio", [16.0, 0.5])
def test_ntk_equals_model_with_scaled_base(arch, ratio):
    model = tiny_causal_lm(arch)
    base = model.config.rope_parameters["rope_theta"]
    scaled = tiny_causal_lm(arch)
    scaled.config.rope_parameters = {**scaled.config.rope_parameters, "rope_theta": base * ratio}
    reference = type(scaled)(scaled.config).eval()
    reference.load_state_dict(model.state_dict())
    ids, _ = _batch(batch=2, pads=(0, 0))
    apply_pic(model, "ntk", ratio=ratio)
    assert (model(input_ids=ids).logits - reference(input_ids=ids).logits).abs().max() <= 1e-5
    assert (model(input_ids=ids).logits - tiny_causal_lm(arch)(input_ids=ids).logits).abs().max() > 1e-3


@pytest.mark.parametrize("layout", ["paper", "contiguous"])
@pytest.mark.parametrize("impl", ["cached", "reference"])
def test_dynamic_prefill_equals_explicit_eq9_positions(layout, impl):
    model = tiny_causal_lm("llama")
    ids, mask = _batch()
    pos, lengths = positions_from_mask(mask)
    g = dynamic_positions(pos, lengths[:, None], 3.0, initial=4, recent=8, layout=layout)
    expected = model(input_ids=ids, attention_mask=mask, position_ids=g).logits
    apply_pic(model, "dynamic", ratio=3.0, initial=4, recent=8, layout=layout, impl=impl)
    got = model(input_ids=ids, attention_mask=mask).logits
    assert _masked_max_diff(got, expected, mask) <= 1e-5


def _decode_logits(model, ids, mask, steps):
    """Prefill + greedy decode steps by hand; returns logits of every call and the tokens fed."""
    cache = DynamicCache(config=model.config)
    out = model(input_ids=ids, attention_mask=mask, past_key_values=cache, use_cache=True)
    logits, tokens = [out.logits], []
    for _ in range(steps):
        token = out.logits[:, -1].argmax(-1, keepdim=True)
        tokens.append(token)
        mask = torch.cat([mask, torch.ones_like(token)], dim=1)
        out = model(input_ids=token, attention_mask=mask, past_key_values=cache, use_cache=True)
        logits.append(out.logits)
    return logits, tokens


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("layout", ["paper", "contiguous"])
@pytest.mark.parametrize("batch, prompt, pads", [(1, 40, (0,)), (3, 40, (0, 5, 11)), (2, 10, (0, 3))])
def test_dynamic_cached_matches_algorithm1_oracle(arch, layout, batch, prompt, pads):
    """Every step of prefill + 64 decode steps, fp32, max abs diff <= 1e-4.

    With l_ic = 4 and l_rc = 16 the middle grows at every step (prompt 40), or starts growing during
    decoding (prompt 10: l_c <= l_ic + l_rc at first).
    """
    model = tiny_causal_lm(arch)
    ids, mask = _batch(batch, prompt, pads)
    settings = dict(ratio=3.0, initial=4, recent=16, layout=layout)
    apply_pic(model, "dynamic", impl="reference", **settings)
    oracle, tokens = _decode_logits(model, ids, mask, steps=64)
    apply_pic(model, "dynamic", impl="cached", **settings)
    # feed the oracle's tokens so both see the same inputs at every step
    cache = DynamicCache(config=model.config)
    out = model(input_ids=ids, attention_mask=mask, past_key_values=cache, use_cache=True)
    diffs = [_masked_max_diff(out.logits, oracle[0], mask)]
    for step, token in enumerate(tokens, start=1):
        mask = torch.cat([mask, torch.ones_like(token)], dim=1)
        out = model(input_ids=token, attention_mask=mask, past_key_values=cache, use_cache=True)
        diffs.append((out.logits - oracle[step]).abs().max().item())
    assert len(diffs) == 65 and max(diffs) <= 1e-4
    # and the variant is not the identity: vanilla decoding differs
    remove_pic(model)
    full = torch.cat([ids, *tokens], dim=1)
    vanilla_last = model(input_ids=full, attention_mask=mask).logits[:, -1:]
    assert (vanilla_last - oracle[-1]).abs().max() > 1e-3


@pytest.mark.parametrize("layout", ["paper", "contiguous"])
def test_dynamic_generate_matches_oracle_and_ratio_one_is_vanilla(layout):
    model = tiny_causal_lm("llama")
    ids, mask = _batch()
    kwargs = dict(attention_mask=mask, max_new_tokens=48, do_sample=False, pad_token_id=0)
    vanilla = model.generate(input_ids=ids, **kwargs)
    apply_pic(model, "dynamic", ratio=1.0, initial=4, recent=8, layout=layout)
    assert torch.equal(model.generate(input_ids=ids, **kwargs), vanilla)
    apply_pic(model, "dynamic", ratio=4.0, initial=4, recent=8, layout=layout, impl="reference")
    oracle = model.generate(input_ids=ids, **kwargs)
    apply_pic(model, "dynamic", ratio=4.0, initial=4, recent=8, layout=layout)
    assert torch.equal(model.generate(input_ids=ids, **kwargs), oracle)


@pytest.mark.parametrize("layout", ["paper", "contiguous"])
def test_dynamic_beam_search_matches_oracle(layout):
    """Beam search reorders the cache; the cached path must reorder its side buffers with it."""
    model = tiny_causal_lm("llama")
    ids, mask = _batch(batch=2, pads=(0, 6))
    kwargs = dict(
        attention_mask=mask,
        max_new_tokens=30,
        num_beams=3,
        do_sample=False,
        pad_token_id=0,
        output_scores=True,
        return_dict_in_generate=True,
    )
    apply_pic(model, "dynamic", ratio=4.0, initial=4, recent=8, layout=layout, impl="reference")
    oracle = model.generate(input_ids=ids, **kwargs)
    apply_pic(model, "dynamic", ratio=4.0, initial=4, recent=8, layout=layout)
    shipped = model.generate(input_ids=ids, **kwargs)
    assert torch.equal(shipped.sequences, oracle.sequences)
    assert torch.allclose(shipped.sequences_scores, oracle.sequences_scores, atol=1e-4)


def test_dynamic_cache_returned_by_a_plain_call_can_be_continued():
    model = tiny_causal_lm("llama")
    ids, _ = _batch(batch=1, pads=(0,))
    results = {}
    for impl in ("reference", "cached"):
        apply_pic(model, "dynamic", ratio=3.0, initial=2, recent=4, impl=impl)
        out = model(input_ids=ids)  # use_cache left to the config, as HF users do
        token = out.logits[:, -1].argmax(-1, keepdim=True)
        results[impl] = model(input_ids=token, past_key_values=out.past_key_values).logits
    assert (results["cached"] - results["reference"]).abs().max() <= 1e-5


@pytest.mark.parametrize("method", ["naive", "ntk", "dynamic"])
def test_remove_pic_restores_the_model(method):
    model = tiny_causal_lm("qwen2")
    ids, mask = _batch()
    before = model(input_ids=ids, attention_mask=mask).logits
    apply_pic(model, method, ratio=4.0, initial=2, recent=4)
    assert pic_settings(model).method == method
    changed = model(input_ids=ids, attention_mask=mask).logits
    remove_pic(model)
    assert pic_settings(model) is None
    assert _masked_max_diff(changed, before, mask) > 1e-4
    assert torch.equal(model(input_ids=ids, attention_mask=mask).logits, before)


def test_pic_through_a_peft_adapter():
    peft = pytest.importorskip("peft")
    model = tiny_causal_lm("llama")
    lora = peft.get_peft_model(
        model, peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    )
    ids, mask = _batch()
    pos, lengths = positions_from_mask(mask)
    g = dynamic_positions(pos, lengths[:, None], 2.0, initial=4, recent=8)
    expected = lora(input_ids=ids, attention_mask=mask, position_ids=g).logits
    apply_pic(lora, "dynamic", ratio=2.0, initial=4, recent=8)
    assert pic_settings(lora).method == "dynamic"
    assert _masked_max_diff(lora(input_ids=ids, attention_mask=mask).logits, expected, mask) <= 1e-5


def test_a_model_without_rope_is_refused_by_what_it_lacks():
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=50))
    with pytest.raises(ValueError, match="^PIC cannot be applied to gpt2: its decoder has no list of layers") as err:
        apply_pic(model, "naive", ratio=2.0)
    assert "\n" not in str(err.value)


def test_bad_arguments_and_sliding_window():
    model = tiny_causal_lm("llama")
    with pytest.raises(ValueError, match=r"^pic_ratio \(s_cr\) must be > 0, got 0.0$"):
        apply_pic(model, "naive", ratio=0.0)
    with pytest.raises(ValueError, match="allowed: none, naive, ntk, dynamic"):
        apply_pic(model, "linear", ratio=2.0)
    with pytest.raises(ValueError, match="impl"):
        apply_pic(model, "dynamic", ratio=2.0, impl="fast")
    sliding = tiny_causal_lm("mistral", sliding_window=16)  # every layer slides (Mistral v0.1): nothing to change
    for method in ("naive", "ntk", "dynamic"):
        with pytest.raises(ValueError, match="no layer has full attention with RoPE \\(sliding window 16\\)"):
            apply_pic(sliding, method, ratio=2.0)


def _explicit_eq9_last_logits(plain, seq, pads, ratio, initial, recent, layout):
    """Last-token logits of an uncached plain HF forward of ``seq`` (left padding ``pads`` per row) with an
    explicit attention mask and explicit positions ``g_{l_c}(0..l_c-1)`` (Eq. 9) for each row's own l_c."""
    batch, total = seq.shape
    mask = torch.ones(batch, total, dtype=torch.long)
    positions = torch.zeros(batch, total)
    for row, pad in enumerate(pads):
        mask[row, :pad] = 0
        l_c = total - pad
        positions[row, pad:] = dynamic_positions(torch.arange(l_c), l_c, ratio, initial, recent, layout)
    with torch.no_grad():
        return plain(input_ids=seq, attention_mask=mask, position_ids=positions, use_cache=False).logits[:, -1]


def _decode_vs_explicit_eq9(layers, impl, layout, steps=40):
    """Max abs diff of the last-token logits of prefill + every greedy decode step under Dynamic PIC
    against :func:`_explicit_eq9_last_logits` of the sequence so far. Prompt 40 > l_ic + l_rc = 4 + 16
    and s_cr = 2, so positions move between steps (recent -> middle, and the contiguous window shift)."""
    settings = dict(ratio=2.0, initial=4, recent=16, layout=layout)
    model = tiny_causal_lm("llama", num_hidden_layers=layers)
    plain = tiny_causal_lm("llama", num_hidden_layers=layers)  # same seed: same weights, never patched
    assert len(model.model.layers) == layers
    pads = (0, 7)
    ids, mask = _batch(batch=2, length=40, pads=pads)
    apply_pic(model, "dynamic", impl=impl, **settings)
    with torch.no_grad():
        logits, tokens = _decode_logits(model, ids, mask, steps=steps)
    return [
        (
            step_logits[:, -1]
            - _explicit_eq9_last_logits(plain, torch.cat([ids, *tokens[:step]], dim=1), pads, **settings)
        )
        .abs()
        .max()
        .item()
        for step, step_logits in enumerate(logits)
    ]


@pytest.mark.parametrize("impl", ["reference", "cached"])
@pytest.mark.parametrize("layout", ["paper", "contiguous"])
def test_dynamic_decode_equals_uncached_forward_at_eq9_positions_one_layer(impl, layout):
    """Independent of the code under test (no shared plan, rotation or attention code): with one layer
    the keys and values of the earlier tokens depend only on their embeddings, so re-rotating the cached
    keys at g_{l_c} (Algorithm 1) equals recomputing the whole sequence at g_{l_c}, at every step."""
    diffs = _decode_vs_explicit_eq9(layers=1, impl=impl, layout=layout)
    assert len(diffs) == 41 and max(diffs) <= 1e-4, diffs


@pytest.mark.parametrize("impl", ["reference", "cached"])
def test_dynamic_prefill_equals_uncached_forward_at_eq9_positions_multi_layer(impl):
    """With more than one layer the equality holds at the prefill only. At a decode step Algorithm 1
    re-rotates the cached keys of layer 1 and above at the new g_{l_c}, but those keys and values were
    computed from hidden states of earlier layers that attended at the *older* positions; a full
    recomputation would redo those hidden states at the new positions. So decode steps differ from the
    uncached forward by design (the PIC paper, Algorithm 1 does not recompute hidden states)."""
    diffs = _decode_vs_explicit_eq9(layers=2, impl=impl, layout="paper", steps=24)
    assert diffs[0] <= 1e-5, diffs
    assert max(diffs[1:]) > 1e-4  # documents the difference above (positions do move in this setup)


def test_dynamic_is_reentrant():
    """The per-call plan travels with the call: a nested call on another cache (here from a forward hook
    inside the outer call's first layer) does not disturb the outer call."""
    model = tiny_causal_lm("llama")
    ids, mask = _batch()
    apply_pic(model, "dynamic", ratio=3.0, initial=4, recent=8)
    expected = model(input_ids=ids, attention_mask=mask).logits
    inner_ids, inner_mask = _batch(batch=1, length=23, pads=(0,), seed=5)
    inner, entered = [], []

    def nested(module, args, output):
        if not entered:  # once: the nested call runs this hook too
            entered.append(True)
            inner.append(model(input_ids=inner_ids, attention_mask=inner_mask).logits)

    handle = model.model.layers[0].register_forward_hook(nested)
    got = model(input_ids=ids, attention_mask=mask).logits
    handle.remove()
    assert torch.equal(got, expected)
    assert torch.equal(inner[0], model(input_ids=inner_ids, attention_mask=inner_mask).logits)


@pytest.mark.parametrize("version", ["6.0.0", "6.0.0.dev0", "4.57.3"])
def test_unsupported_transformers_version_fails_loudly(monkeypatch, version):
    import transformers

    from harness.pic.hf import SUPPORTED_TRANSFORMERS, UnsupportedTransformersError

    model = tiny_causal_lm("llama")
    monkeypatch.setattr(transformers, "__version__", version)
    low, high = SUPPORTED_TRANSFORMERS
    with pytest.raises(UnsupportedTransformersError) as err:
        apply_pic(model, "dynamic", ratio=2.0)
    message = str(err.value)
    assert "\n" not in message and f">={low},<{high}" in message and f"installed: transformers {version}" in message
    assert pic_settings(model) is None  # nothing was patched
