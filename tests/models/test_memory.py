"""The memory a run will take, from a model's config alone (harness/models/memory.py, ``lch plan``'s memory column):
weights, KV cache and a scoring pass's peak by hand for tiny configs, a cell that does not fit with what would, and
``--memory`` refused in one line when it is not a size or a known device."""

from __future__ import annotations

import pytest
import torch

from harness.core.errors import UsageError
from harness.models.device_sizing import DEFAULT_LOGIT_BUDGET, predicted_peak
from harness.models.memory import kv_cache_bytes, meta_model, request_need, weight_bytes
from harness.plan.devices import GIB, DeviceMemory, parse_memory
from tests.conftest import tiny_causal_lm

# tiny_causal_lm: vocabulary 97, hidden 64, 4 heads of 16, 2 key-value heads, MLP 128, 2 layers, fp32
V, H, HEADS, KV, D, I, L = 97, 64, 4, 2, 16, 128, 2


def test_weights_kv_cache_and_a_scoring_pass_by_hand():
    model = tiny_causal_lm("llama", layers=L)
    layer = H * H + 2 * H * KV * D + H * H + 3 * H * I + 2 * H  # q, k, v, o, the MLP, two norms
    rotary = 2 * (D // 2)  # the inverse frequencies and their original copy, buffers
    assert weight_bytes(model) == 4 * (V * H + L * layer + H + V * H + rotary)
    # keys and values of every layer: 2 x 2 layers x 2 heads x 16 x 4 bytes a token
    assert kv_cache_bytes(model, 100) == 2 * L * KV * D * 4 * 100 == 51_200
    # a scoring pass of 100 tokens on the CPU: the last hidden states, one layer at work (q, k, v, the MLP's three
    # activations, two hidden-sized), k and v repeated to 4 heads, the 100 x 100 mask and its float copy (sdpa),
    # one chunk of logits (2^23 floats at 8 bytes: the head's output and the exponential)
    expected = 4 * (100 * H + 100 * ((HEADS + 2 * KV) * D + 3 * I + 2 * H) + 2 * 100 * HEADS * D) + 100 * 100 * 5
    expected += DEFAULT_LOGIT_BUDGET * 8
    assert predicted_peak(model, 100, 1, None, "cpu") == expected
    need = request_need(model, 100, budget=28, scores=False)
    assert need.cache == kv_cache_bytes(model, 128) and need.total == weight_bytes(model) + expected + need.cache


def test_a_sliding_window_layer_keeps_its_window_only():
    model = tiny_causal_lm("gemma3_text", layers=3)  # sliding, sliding, full; a window of 8
    kinds = model.config.layer_types
    assert kinds.count("sliding_attention") == 2 and model.config.sliding_window == 8
    per_token = 2 * KV * model.config.head_dim * 4
    assert kv_cache_bytes(model, 100) == per_token * (8 + 8 + 100)
    assert kv_cache_bytes(model, 5) == per_token * 15
    assert kv_cache_bytes(model, 100, whole=True) == per_token * 300


def test_a_generation_plans_the_prefill_cache_transformers_holds():
    """After the prefill of a 100-token prompt, transformers' sliding-window layers keep their window as a view of the
    whole prompt's keys and values: the memory held is every layer's 100 tokens, which the plan counts (then the
    windowed cache of prompt and budget, when larger)."""
    from transformers import DynamicCache

    model = tiny_causal_lm("gemma3_text", layers=3)
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        model(input_ids=(torch.arange(100) % model.config.vocab_size).unsqueeze(0), use_cache=True,
              past_key_values=cache)
    held = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for layer in cache.layers
            for t in (layer.keys, layer.values)}
    assert sum(held.values()) == kv_cache_bytes(model, 100, whole=True)
    assert request_need(model, 100, budget=28).cache == kv_cache_bytes(model, 100, whole=True)
    assert request_need(model, 100, budget=500).cache == kv_cache_bytes(model, 600)


def test_a_meta_model_reads_no_weight_and_sizes_the_dtype_asked(tiny_model_dir):
    model = meta_model(str(tiny_model_dir), "bfloat16")
    assert all(p.device.type == "meta" and p.dtype == torch.bfloat16 for p in model.parameters())
    assert model.config._attn_implementation == "lch_sdpa"
    params = sum(p.numel() for p in model.parameters())
    assert weight_bytes(model) == 2 * params + sum(b.numel() * b.element_size() for b in model.buffers())


def test_memory_sizes_and_device_names_are_parsed_and_bad_ones_refused_in_one_line():
    assert parse_memory("80GiB") == DeviceMemory("a device of 80GiB", 80 * GIB, "cuda")
    assert parse_memory("24GB").size == 24 * 10**9 and parse_memory("512MiB").size == 512 << 20
    assert parse_memory("H100").size == int(79.2 * GIB)
    for bad in ("-1", "0GiB", "80", "h1000", "lots"):
        with pytest.raises(UsageError) as refused:
            parse_memory(bad)
        assert str(refused.value).startswith(f"lch plan: --memory {bad!r} is neither a positive size")
        assert "\n" not in str(refused.value)


def test_a_cell_that_does_not_fit_says_what_would(tiny_model_dir):
    from harness.plan.cells import PlanCell
    from harness.plan.make import EvalSettings, with_memory

    run = EvalSettings(model="hf-pic", model_args={"pretrained": str(tiny_model_dir), "dtype": "float32"},
                      tasks=["ppl_govreport"])
    model = meta_model(str(tiny_model_dir), "float32")
    cells = [PlanCell("ppl_govreport", "-", (256,), (0,), scored_tokens=255),
             PlanCell("ppl_govreport", "-", (4096,), (0,), scored_tokens=4095)]
    needs = [request_need(model, n, scores=True).total for n in (256, 4096)]
    room = (needs[0] + needs[1]) // 2
    sized, misfits = with_memory(cells, run, DeviceMemory("a small device", room, "cpu"))
    assert [(c.memory, c.fits) for c in sized] == [(needs[0], True), (needs[1], False)]
    longest = max(n for n in range(256, 4097) if request_need(model, n, scores=True).total <= room)
    narrow = request_need(meta_model(str(tiny_model_dir), "bfloat16"), 4096, scores=True).total
    from harness.core.sizes import in_words

    assert misfits == [f"ppl_govreport -: needs {in_words(needs[1])}, a small device has {in_words(room)}: prompts up "
                       f"to {longest:,} tokens fit; dtype=bfloat16 needs {in_words(narrow)}"]


def test_a_vllm_run_on_the_cpu_holds_two_engines_when_it_scores(tiny_model_dir, monkeypatch):
    """vllm-pic on the CPU: vLLM's own overhead, per engine the weights and the KV space it is given (the run that
    scores from hidden states runs a pooling engine beside the generating one) and the larger of its profile run's
    peaks (a prefill chunk of 4096 tokens, the sampler's dummy run over 256 rows of logits: vLLM's CPU defaults), and
    for a scoring cell the pooled hidden states."""
    from harness.engines.vllm_pic.memory import CPU_OVERHEAD, SAMPLER_BYTES_PER_LOGIT
    from harness.plan.cells import PlanCell
    from harness.plan.make import EvalSettings, with_memory

    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    run = EvalSettings(model="vllm-pic", model_args={"pretrained": str(tiny_model_dir), "dtype": "float32"},
                      tasks=["ppl_govreport"])
    model = meta_model(str(tiny_model_dir), "float32")
    weights, hidden, vocab = weight_bytes(model), model.config.hidden_size, model.config.vocab_size
    device = DeviceMemory("this machine", 64 * GIB, "cpu", runtime=300 << 20)
    profile = max(request_need(model, 4096, scores=True).work, 256 * vocab * SAMPLER_BYTES_PER_LOGIT)
    scoring = PlanCell("ppl_govreport", "-", (10_000,), (0,), scored_tokens=9_999)
    [scored], _ = with_memory([scoring], run, device)
    assert scored.memory == (300 << 20) + CPU_OVERHEAD + 2 * (weights + GIB + profile) + 10_000 * hidden * 4
    [generated], _ = with_memory([PlanCell("niah", "4096", (4_000,), (64,))], run, device)
    assert generated.memory == (300 << 20) + CPU_OVERHEAD + weights + GIB + max(
        request_need(model, 4_000, scores=True).work, 256 * vocab * SAMPLER_BYTES_PER_LOGIT)


def test_a_vllm_run_that_scores_on_one_gpu_is_told_to_share_it(tiny_model_dir):
    from harness.plan.cells import PlanCell
    from harness.plan.make import EvalSettings, with_memory

    cell = PlanCell("ppl_govreport", "-", (1_000,), (0,), scored_tokens=999)
    args = {"pretrained": str(tiny_model_dir), "dtype": "float32"}
    sized, misfits = with_memory([cell], EvalSettings("vllm-pic", args, ["ppl_govreport"]), parse_memory("h100"))
    assert not sized[0].fits and misfits == [
        "the run scores from hidden states: vllm-pic starts a pooling engine beside the generating one on h100, each "
        "with gpu_memory_utilization=0.9: pass gpu_memory_utilization=0.45 (each cell's memory is one engine's)"]
    shared = EvalSettings("vllm-pic", {**args, "gpu_memory_utilization": 0.45}, ["ppl_govreport"])
    sized, misfits = with_memory([cell], shared, parse_memory("h100"))
    assert sized[0].fits and misfits == []


def test_longppls_evaluator_runs_beside_the_evaluated_model_until_its_key_tokens_are_cached(tiny_model_dir,
                                                                                            monkeypatch):
    """A LongPPL cell whose key tokens are not cached loads the evaluator beside the evaluated model: its weights and
    its long pass, which runs before the evaluated model's (so the larger of the two passes counts); on the CPU the
    evaluated model's weights, in their checkpoint's dtype, are mapped and read only by its own pass, so the two
    phases do not overlap; an evaluator whose config is not at hand (a hub name offline) leaves the cell unsized
    rather than sized without it."""
    from harness.plan.cells import PlanCell
    from harness.plan.make import EvalSettings, with_memory

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    run = EvalSettings(model="hf-pic", model_args={"pretrained": str(tiny_model_dir), "dtype": "float32"},
                      tasks=["longppl_govreport"])
    model = meta_model(str(tiny_model_dir), "float32")
    device = DeviceMemory("this machine", 64 * GIB, "cpu", runtime=0)
    alone = request_need(model, 3000, scores=True).total
    cached = PlanCell("longppl_govreport", "-", (3000,), (0,), scored_tokens=2999, cached=True)
    evaluated_here = PlanCell("longppl_govreport", "-", (3000,), (0,), scored_tokens=2999, cached=False,
                              helper=(str(tiny_model_dir), "float32"))
    from_the_hub = PlanCell("longppl_govreport", "-", (3000,), (0,), scored_tokens=2999, cached=False,
                            helper=("no-such-org/no-such-evaluator", "auto"))
    sized, _ = with_memory([cached, evaluated_here, from_the_hub], run, device)
    assert [c.memory for c in sized] == [alone, alone, None]
    gpu = DeviceMemory("a GPU", 64 * GIB, "cuda")
    [on_gpu] = with_memory([evaluated_here], run, gpu)[0]
    assert on_gpu.memory == request_need(model, 3000, scores=True, device="cuda").total + weight_bytes(model)
