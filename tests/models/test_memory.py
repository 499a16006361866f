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
    # a token's bytes in the decoder (fp32): held throughout, the embeddings the decoder keeps and the hidden states
    # passed on (64 each) and one RoPE table's cos and sin (16 each); at a layer's peak the larger of its attention
    # (the normed input 64, q 64, k and v 32 each, k and v repeated to 4 heads 128, the output 64) and its MLP (the
    # residual and the normed input 64 each, gate activation, up and product 128 each); no mask (one unpadded row,
    # no sliding layer: SDPA's causal flag)
    held, attention, mlp = (
        4 * (2 * H + 2 * D),
        4 * (H + HEADS * D + 2 * KV * D + 2 * HEADS * D + HEADS * D),
        4 * (2 * H + 3 * I),
    )
    assert (held, attention, mlp) == (640, 1536, 2048)
    # the head's phase: the last hidden states and the log-probabilities, beside one chunk of logits (2^23 floats at
    # 8 bytes: the head's output and the exponential); the larger of the two phases is the pass's peak
    head = lambda n: n * (4 * H + 4) + DEFAULT_LOGIT_BUDGET * 8  # noqa: E731
    assert predicted_peak(model, 100, 1, None, "cpu") == head(100) == 67_134_864
    assert predicted_peak(model, 50_000, 1, None, "cpu") == 50_000 * (held + mlp) == 134_400_000
    # a generation: the prefill's decoder peak (logits of its last token only) beside the cache of prompt and budget
    need = request_need(model, 100, budget=28, scores=False)
    assert (need.work, need.cache) == (100 * (held + mlp), kv_cache_bytes(model, 128))
    assert need.total == weight_bytes(model) + 100 * (held + mlp) + need.cache


def test_a_sliding_window_model_holds_two_rope_tables_and_its_windows_mask():
    """Gemma 3's sliding layers have a RoPE of their own (a second cos and sin held), and a mask SDPA's causal flag
    cannot stand in for: the whole mask while it has at most 2^25 pairs (with SDPA's float copy), else a block of
    queries over the keys the block attends (the block and its window) under lch_sdpa."""
    from harness.models.attention import MASK_BLOCK_ELEMENTS, use_blocked_masks
    from harness.models.device_sizing import layer_work, mask_bytes

    model = tiny_causal_lm("gemma3_text", layers=3)  # sliding, sliding, full; a window of 8
    use_blocked_masks(model)
    hd, inner = model.config.head_dim, model.config.intermediate_size
    work = layer_work(model)
    assert work.held == 4 * (2 * H + 2 * 2 * hd)
    assert (work.attention, work.mlp) == (
        4 * (H + HEADS * hd + 2 * KV * hd + 2 * HEADS * hd + HEADS * hd),
        4 * (2 * H + 3 * inner),
    )
    assert mask_bytes(model, 100) == 100 * 100 * (1 + 4)
    rows = MASK_BLOCK_ELEMENTS // 10_000
    assert mask_bytes(model, 10_000) == rows * (rows + 8) * (1 + 4)
    assert predicted_peak(model, 10_000, 1, None, "cpu") == 10_000 * work.held + max(
        10_000 * work.attention + rows * (rows + 8) * 5, 10_000 * work.mlp
    )
    llama = tiny_causal_lm("llama")
    use_blocked_masks(llama)
    assert mask_bytes(llama, 10_000) == 0 and mask_bytes(llama, 10_000, batch=2) == MASK_BLOCK_ELEMENTS * 5


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
        model(
            input_ids=(torch.arange(100) % model.config.vocab_size).unsqueeze(0), use_cache=True, past_key_values=cache
        )
    held = {
        t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
        for layer in cache.layers
        for t in (layer.keys, layer.values)
    }
    assert sum(held.values()) == kv_cache_bytes(model, 100, whole=True)
    assert request_need(model, 100, budget=28).cache == kv_cache_bytes(model, 100, whole=True)
    assert request_need(model, 100, budget=500).cache == kv_cache_bytes(model, 600)


def test_a_cache_whose_layers_are_mapped_leaves_no_heap_slack_on_the_cpu():
    """On the CPU a process holds CPU_HEAP_SLACK of its prefill's work and of its KV cache, the cache's only while a
    layer's keys (each decoded token makes them anew) are under glibc's 32 MiB mmap threshold; on a GPU no slack."""
    from harness.models.memory import CPU_HEAP_SLACK

    model = tiny_causal_lm("llama", layers=L)
    held, mlp = 4 * (2 * H + 2 * D), 4 * (2 * H + 3 * I)  # the prefill's peak a token: held and the MLP's
    keys = KV * D * 4  # a layer's keys, a token: 128 bytes; 32 MiB at 262,144 tokens
    for prompt, heaped in ((262_000, True), (262_116, False)):  # with 28 tokens generated: just under, just at
        need = request_need(model, prompt, budget=28)
        work, cache = prompt * (held + mlp), 2 * L * keys * (prompt + 28)
        assert (need.work, need.cache) == (work, cache)
        assert need.resident("cpu") == weight_bytes(model) + work + cache + int(
            CPU_HEAP_SLACK * (work + (cache if heaped else 0))
        )
        assert need.resident("cuda") == weight_bytes(model) + work + cache


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


def test_a_first_pass_over_a_mapped_checkpoint_reads_its_embeddings_only_at_the_head(tiny_model_dir, tmp_path):
    """On the CPU a checkpoint in the run's dtype is mapped, each page resident once a pass reads it: the first scoring
    pass reads a row of the embeddings per token in its decoder phase (a page at least, 4096 bytes) and the whole head
    (tied to the embeddings here) only in its head phase. It holds the larger of the weights less the embeddings not
    yet read with the decoder's peak, and all the weights with the head's peak (each peak with the heap's slack). A
    run of one task that only scores takes its longest request first; with a second task its first pass is not known."""
    from transformers import LlamaConfig

    from harness.models.memory import CPU_HEAP_SLACK
    from harness.plan.cells import PlanCell
    from harness.plan.make import EvalSettings, with_memory

    vocab = 1_000_000
    LlamaConfig(
        vocab_size=vocab,
        hidden_size=H,
        intermediate_size=I,
        num_hidden_layers=L,
        num_attention_heads=HEADS,
        num_key_value_heads=KV,
        tie_word_embeddings=True,
        dtype="float32",
    ).save_pretrained(tmp_path)
    from safetensors.torch import save_file

    save_file({"unread": torch.zeros(1)}, tmp_path / "model.safetensors")  # a plan reads the config only
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / name).write_bytes((tiny_model_dir / name).read_bytes())
    model = meta_model(str(tmp_path), "float32")
    n = 50_000
    decoder, head = n * (640 + 2048), n * (4 * H + 4) + DEFAULT_LOGIT_BUDGET * 8  # as in the first test's hand count
    unread = 4 * vocab * H - n * 4096  # the tied embeddings less a page per token
    assert (decoder, head, unread) == (134_400_000, 80_108_864, 51_200_000)
    weights = weight_bytes(model)
    slack = lambda work: work + int(CPU_HEAP_SLACK * work)  # noqa: E731
    first = weights - unread + slack(decoder)
    assert first > weights + slack(head)  # the decoder's phase is the peak, the embeddings not all read by then
    assert request_need(model, n, scores=True, first_mapped=True).resident("cpu") == first
    assert request_need(model, n, scores=True).resident("cpu") == weights + slack(decoder)
    run = EvalSettings("hf-pic", {"pretrained": str(tmp_path), "dtype": "float32"}, ["ppl_govreport"])
    cpu = DeviceMemory("this machine", 64 * GIB, "cpu", runtime=0)
    longest, shorter = (PlanCell("ppl_govreport", "-", (k,), (0,), scored_tokens=k - 1) for k in (n, 1_000))
    assert [c.memory for c in with_memory([longest, shorter], run, cpu)[0]] == [
        first,
        request_need(model, 1_000, scores=True).resident("cpu"),  # after the longest: every page read
    ]
    other = PlanCell("longppl_govreport", "-", (1_000,), (0,), scored_tokens=999)
    assert with_memory([longest, other], run, cpu)[0][0].memory == weights + slack(decoder)


def test_a_cell_that_does_not_fit_says_what_would(tiny_model_dir):
    """A cell's memory is what the run holds (on the CPU with the heap's slack); it fits when the run-time check would
    let its pass run, the pass's work taken again with the check's margin (FIT_MARGIN - 1); a misfit says the longest
    prompt that fits and what bf16 needs."""
    import bisect

    from harness.models.device_sizing import FIT_MARGIN
    from harness.models.memory import CPU_HEAP_SLACK
    from harness.plan.cells import PlanCell
    from harness.plan.make import EvalSettings, with_memory

    run = EvalSettings(
        model="hf-pic", model_args={"pretrained": str(tiny_model_dir), "dtype": "float32"}, tasks=["ppl_govreport"]
    )
    model = meta_model(str(tiny_model_dir), "float32")
    cells = [
        PlanCell("ppl_govreport", "-", (256,), (0,), scored_tokens=255),
        PlanCell("ppl_govreport", "-", (60_000,), (0,), scored_tokens=59_999),
    ]

    def held(n):
        work = request_need(model, n, scores=True).work
        return weight_bytes(model) + work + int(CPU_HEAP_SLACK * work)

    def checked(n):
        return held(n) + int(request_need(model, n, scores=True).work * (FIT_MARGIN - 1))

    room = (held(60_000) + checked(60_000)) // 2  # what it holds would fit, not the check's margin over its pass
    sized, misfits = with_memory(cells, run, DeviceMemory("a small device", room, "cpu"))
    assert [(c.memory, c.fits) for c in sized] == [(held(256), True), (held(60_000), False)]
    longest = bisect.bisect_right(range(60_001), room, key=checked) - 1
    narrow = request_need(meta_model(str(tiny_model_dir), "bfloat16"), 60_000, scores=True).resident("cpu")
    from harness.core.sizes import in_words

    assert misfits == [
        f"ppl_govreport -: needs {in_words(held(60_000))}, a small device has {in_words(room)}: "
        f"prompts up to {longest:,} tokens fit; dtype=bfloat16 needs {in_words(narrow)}"
    ]


def test_a_vllm_run_on_the_cpu_holds_two_engines_when_it_scores(tiny_model_dir, monkeypatch):
    """vllm-pic on the CPU: vLLM's own overhead, per engine the weights and the KV space it is given (the run that
    scores from hidden states runs a pooling engine beside the generating one) and the larger of its profile run's
    peaks (a prefill chunk of 4096 tokens, the sampler's dummy run over 256 rows of logits: vLLM's CPU defaults), and
    for a scoring cell the pooled hidden states."""
    from harness.engines.vllm_pic.memory import CPU_OVERHEAD, SAMPLER_BYTES_PER_LOGIT
    from harness.plan.cells import PlanCell
    from harness.plan.make import EvalSettings, with_memory

    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    run = EvalSettings(
        model="vllm-pic", model_args={"pretrained": str(tiny_model_dir), "dtype": "float32"}, tasks=["ppl_govreport"]
    )
    model = meta_model(str(tiny_model_dir), "float32")
    weights, hidden, vocab = weight_bytes(model), model.config.hidden_size, model.config.vocab_size
    device = DeviceMemory("this machine", 64 * GIB, "cpu", runtime=300 << 20)
    profile = max(request_need(model, 4096, scores=True).work, 256 * vocab * SAMPLER_BYTES_PER_LOGIT)
    scoring = PlanCell("ppl_govreport", "-", (10_000,), (0,), scored_tokens=9_999)
    [scored], _ = with_memory([scoring], run, device)
    assert scored.memory == (300 << 20) + CPU_OVERHEAD + 2 * (weights + GIB + profile) + 10_000 * hidden * 4
    [generated], _ = with_memory([PlanCell("niah", "4096", (4_000,), (64,))], run, device)
    assert generated.memory == (300 << 20) + CPU_OVERHEAD + weights + GIB + max(
        request_need(model, 4_000, scores=True).work, 256 * vocab * SAMPLER_BYTES_PER_LOGIT
    )


def test_a_vllm_run_that_scores_on_one_gpu_is_told_to_share_it(tiny_model_dir):
    from harness.plan.cells import PlanCell
    from harness.plan.make import EvalSettings, with_memory

    cell = PlanCell("ppl_govreport", "-", (1_000,), (0,), scored_tokens=999)
    args = {"pretrained": str(tiny_model_dir), "dtype": "float32"}
    sized, misfits = with_memory([cell], EvalSettings("vllm-pic", args, ["ppl_govreport"]), parse_memory("h100"))
    assert not sized[0].fits and misfits == [
        "the run scores from hidden states: vllm-pic starts a pooling engine beside the generating one on h100, each "
        "with gpu_memory_utilization=0.9: pass gpu_memory_utilization=0.45 (each cell's memory is one engine's)"
    ]
    shared = EvalSettings("vllm-pic", {**args, "gpu_memory_utilization": 0.45}, ["ppl_govreport"])
    sized, misfits = with_memory([cell], shared, parse_memory("h100"))
    assert sized[0].fits and misfits == []


@pytest.fixture(scope="module")
def other_evaluator(tiny_model_dir):
    """A second tiny model of another family and vocabulary than ``tiny_model_dir`` (Llama, 2 layers, hidden 64):
    Gemma 3, 3 layers (sliding, sliding, full; a window of 8), hidden 48, 4 query heads of 12, one key-value head."""
    from harness.models.tiny import build_tiny_model

    return build_tiny_model(arch="gemma3_text", vocab_size=300, hidden=48, layers=3, heads=4, kv_heads=1, seed=5)


def test_an_evaluator_of_another_model_is_planned_as_the_run_holds_it(tiny_model_dir, other_evaluator, monkeypatch):
    """LongPPL with another model as its evaluator, planned against a count by hand from the two configs: the run
    holds the larger of two phases beside its runtime. First the evaluator (lm-eval loads the evaluated model, then
    the tasks, whose key tokens the evaluator finds; then lets it go): its weights, and the larger of its long pass
    over its document and its batch of 4 short windows (K + d tokens each, the first window's context being the long
    pass's); the evaluated model's weights, mapped from its fp32 checkpoint on the CPU, are not read yet, while on a
    GPU they are resident. Then the evaluated model: its weights and its scoring pass (on the CPU each phase with the
    heap's slack over what its pass makes). Each pass is the larger of the
    decoder's peak (held + the larger of a layer's attention with its mask and its MLP) and the head's (the last
    hidden states, the log-probabilities, a chunk of 2^23 logits at 8 bytes)."""
    import json

    from harness.longppl.formulas import EvaluatorRun
    from harness.models.attention import MASK_BLOCK_ELEMENTS as BLOCK
    from harness.models.memory import CPU_HEAP_SLACK
    from harness.plan.cells import PlanCell
    from harness.plan.make import EvalSettings, with_memory

    e = json.loads((tiny_model_dir / "config.json").read_text())
    g = json.loads((other_evaluator / "config.json").read_text())
    assert (e["model_type"], g["model_type"]) == ("llama", "gemma3_text") and e["vocab_size"] != g["vocab_size"]
    # the evaluated Llama: embeddings, per layer q, k, v, o, the MLP and two norms, the final norm, its untied head,
    # the rotary's inverse frequencies and their original copy
    he, ie, de = e["hidden_size"], e["intermediate_size"], e["hidden_size"] // e["num_attention_heads"]
    qe, ke = e["num_attention_heads"] * de, e["num_key_value_heads"] * de
    layer_e = he * qe + 2 * he * ke + qe * he + 3 * he * ie + 2 * he
    weights_e = 4 * (
        e["vocab_size"] * he
        + e["num_hidden_layers"] * layer_e
        + he
        + (0 if e["tie_word_embeddings"] else e["vocab_size"] * he)
        + 2 * (de // 2)
    )
    # the Gemma 3 evaluator: the same and q and k norms, four norms a layer, two rotaries (full and sliding), the
    # embeddings' scale
    hg, ig, dg = g["hidden_size"], g["intermediate_size"], g["head_dim"]
    qg, kg = g["num_attention_heads"] * dg, g["num_key_value_heads"] * dg
    layer_g = hg * qg + 2 * hg * kg + qg * hg + 2 * dg + 3 * hg * ig + 4 * hg
    weights_g = 4 * (
        g["vocab_size"] * hg
        + g["num_hidden_layers"] * layer_g
        + hg
        + (0 if g["tie_word_embeddings"] else g["vocab_size"] * hg)
        + 2 * 2 * (dg // 2)
        + 1
    )
    # a token's bytes: held (embeddings kept, hidden states, cos and sin of each RoPE), attention (normed input, q, k,
    # v, k and v repeated to every query head, output), MLP (residual, normed input, gate activation, up, product)
    held_e, attn_e, mlp_e = 4 * (2 * he + 2 * de), 4 * (he + qe + 2 * ke + 2 * qe + qe), 4 * (2 * he + 3 * ie)
    held_g, attn_g, mlp_g = 4 * (2 * hg + 2 * 2 * dg), 4 * (hg + qg + 2 * kg + 2 * qg + qg), 4 * (2 * hg + 3 * ig)
    chunk = (1 << 23) * 8

    def llama_pass(n):  # one unpadded row, no sliding layer: no mask
        return max(n * (held_e + max(attn_e, mlp_e)), n * (4 * he + 4) + chunk)

    def gemma_pass(rows, width):  # its sliding layers' mask, in blocks over the block and its window of 8
        tokens, block = rows * width, BLOCK // (rows * width)
        mask = rows * block * min(width, block + 8) * 5 if rows * width * width > BLOCK else rows * width * width * 5
        return max(tokens * held_g + max(tokens * attn_g + mask, tokens * mlp_g), tokens * (4 * hg + 4) + chunk)

    K, d = 16384, 8192
    # windows at 0, d, ... 4d: 4 after the first, of K + d tokens
    evaluator = EvaluatorRun(str(other_evaluator), "float32", K + 5 * d, K, d)
    evaluator_work = max(gemma_pass(1, K + 5 * d), gemma_pass(4, K + d))
    # on the CPU a process holds CPU_HEAP_SLACK more than what its passes make (glibc's heap keeps freed blocks)
    cpu_phase = lambda weights, work: weights + work + int(CPU_HEAP_SLACK * work)  # noqa: E731
    run = EvalSettings(
        model="hf-pic", model_args={"pretrained": str(tiny_model_dir), "dtype": "float32"}, tasks=["longppl_govreport"]
    )
    runtime = 300 << 20
    cpu = DeviceMemory("this machine", 64 * GIB, "cpu", runtime=runtime)
    short, long = (
        PlanCell("longppl_govreport", "-", (n,), (0,), scored_tokens=n - 1, cached=False, helper=evaluator)
        for n in (1_000, 200_000)
    )
    cached = replace_cached(long)
    sized, misfits = with_memory([short, long, cached], run, cpu)
    assert misfits == []
    evaluator_phase, evaluated_phase = cpu_phase(weights_g, evaluator_work), cpu_phase(weights_e, llama_pass(200_000))
    assert cpu_phase(weights_e, llama_pass(1_000)) < evaluator_phase < evaluated_phase  # each phase counts once
    assert [c.memory for c in sized] == [
        runtime + evaluator_phase,
        runtime + evaluated_phase,
        runtime + evaluated_phase,
    ]
    # planned again against a run that recorded the evaluator: counted though its key tokens are cached now
    [again], _ = with_memory([replace_cached(short)], run, cpu, helpers_ran={(str(other_evaluator), "float32")})
    assert again.memory == runtime + evaluator_phase
    # vllm-pic on the CPU: the evaluator runs beside the generating engine, started with the model; the pooling engine
    # starts at the first scoring request, once the evaluator is gone (an engine: weights, its KV space of 1 GiB, its
    # profile run's peak over a chunk of up to 4096 tokens or the sampler's 256 rows of logits)
    from dataclasses import replace

    from harness.engines.vllm_pic.memory import CPU_OVERHEAD, SAMPLER_BYTES_PER_LOGIT

    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    sampler = 256 * e["vocab_size"] * SAMPLER_BYTES_PER_LOGIT  # a measured constant
    engine = lambda n: weights_e + GIB + max(llama_pass(min(n, 4096)), sampler)  # noqa: E731
    vllm = [c.memory for c in with_memory([short, long], replace(run, model="vllm-pic"), cpu)[0]]
    assert vllm == [
        runtime + CPU_OVERHEAD + max(2 * engine(n) + n * he * 4, engine(n) + evaluator_phase) for n in (1_000, 200_000)
    ]
    # on a GPU the evaluated model's weights are resident while the evaluator runs (kernels fused: no scores)
    import harness.longppl.estimator as estimator
    from harness.models import device_sizing

    for module in (estimator, device_sizing):
        monkeypatch.setattr(module, "fused_attention", lambda *args: True)
    [on_gpu], _ = with_memory([short], run, DeviceMemory("a GPU", 64 * GIB, "cuda"))
    assert on_gpu.memory == weights_e + weights_g + evaluator_work


def replace_cached(cell):
    from dataclasses import replace

    return replace(cell, cached=True)


def test_an_evaluator_whose_config_is_not_at_hand_leaves_the_cell_unsized(tiny_model_dir, monkeypatch):
    from harness.longppl.formulas import EvaluatorRun
    from harness.plan.cells import PlanCell
    from harness.plan.make import EvalSettings, with_memory

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    run = EvalSettings(
        model="hf-pic", model_args={"pretrained": str(tiny_model_dir), "dtype": "float32"}, tasks=["longppl_govreport"]
    )
    from_the_hub = PlanCell(
        "longppl_govreport",
        "-",
        (3000,),
        (0,),
        scored_tokens=2999,
        cached=False,
        helper=EvaluatorRun("no-such-org/no-such-evaluator", "auto", 3000, 1024, 256),
    )
    [sized], _ = with_memory([from_the_hub], run, DeviceMemory("this machine", 64 * GIB, "cpu", runtime=0))
    assert sized.memory is None and sized.fits is None
