"""vllm-pic with ``pic=dynamic`` (harness/pic/vllm/model.py) against hf-pic's Algorithm 1.

Fast tests outside vLLM: the step plan's ids and key moves against :func:`dynamic_positions`, the rotation by
the move against a rotation at the new id, the engine-settings checks. The vLLM lane (the ``vllm_env``
fixture, one subprocess of that environment building one engine per setting in turn): greedy generations
of SmolLM2-135M (fp32) after a ~300-token prompt batched with a ~120-token one, in both layouts, with
``l_rc = 1``, a small window and one longer than the prompt, equal hf-pic's ``pic=dynamic,pic_impl=reference``
token for token, and every generated token's log-probability (vLLM ``logprobs=0``) is within 1e-4 of HF's
log-softmax of that token. A key re-rotated twice, or not at all, moves the logits far more than that.
"""

from __future__ import annotations

import json
import subprocess

import pytest
import torch

from harness.core.errors import UsageError
from harness.pic.inference import Inference
from harness.pic.positions import dynamic_positions
from harness.pic.vllm.config import check_no_preemption, engine_settings, kv_cache_blocks, pic_overrides
from harness.pic.vllm.positions import (
    key_places,
    locate_keys,
    move_rotation,
    moved_cached_keys,
    rerotate_cached_keys,
    rotate,
    rotation,
    step_plan,
)
from tests.pic.pic_generation import hf_pic_generation

RATIO, INITIAL = 2.0, 4
SMOLLM2_LENGTHS = [1024, 2048]


def dyn(layout: str, recent: int, ratio: float = RATIO, initial: int = INITIAL) -> Inference:
    return Inference(method="dynamic", ratio=ratio, initial=initial, recent=recent, layout=layout)


# ---------------------------------------------------------------------------------------------- no vLLM


@pytest.mark.parametrize("layout", ["paper", "contiguous"])
@pytest.mark.parametrize("recent", [0, 1, 5, 40])
def test_moved_keys_are_the_differences_of_dynamic_positions(layout, recent):
    """For every cached length ctx and grown length l_c: the moved keys and their deltas are exactly the
    nonzero entries of g_{l_c}(m) - g_ctx(m) over all m < ctx (not only the window the plan looks at)."""
    inference = dyn(layout, recent, ratio=3.0, initial=2)
    args = (3.0, 2, recent, layout)
    for ctx in range(0, 60, 3):
        for grown in (ctx, ctx + 1, ctx + 7):
            m = torch.arange(ctx)
            full = dynamic_positions(m, grown, *args) - dynamic_positions(m, ctx, *args)
            moved, old, new = moved_cached_keys(ctx, grown, inference)
            assert moved.tolist() == m[full != 0].tolist()
            assert torch.equal(old, dynamic_positions(moved, ctx, *args))
            assert torch.equal(new, dynamic_positions(moved, grown, *args))
            assert torch.equal(new - old, full[full != 0])


def test_step_plan_ids_and_blocks():
    """A batch of a decode step (request 0: 37 cached + 1 new) and a prefill (request 1: 9 new tokens) with
    scattered blocks: each token's id is g_{l_c}(m) of its own request, each moved key is found at
    block_table[r, m // block_size], offset m % block_size, with its ids; padding keeps its position."""
    inference, block_size = dyn("contiguous", 6), 4
    positions = torch.tensor([37] + list(range(9)) + [0, 0])  # two padding slots
    block_table = torch.tensor([[7, 3, 9, 1, 4, 8, 2, 6, 5, 0], [11, 12, 13] + [0] * 7])
    plan = step_plan(positions, torch.tensor([0, 1, 10]), torch.tensor([38, 9]), block_table, block_size, inference)
    args = (RATIO, INITIAL, 6, "contiguous")
    assert torch.equal(plan.ids[:1], dynamic_positions(torch.tensor([37]), 38, *args))
    assert torch.equal(plan.ids[1:10], dynamic_positions(torch.arange(9), 9, *args))
    assert plan.ids[10:].tolist() == [0.0, 0.0]
    m, old, new = moved_cached_keys(37, 38, inference)
    assert m.numel() > 0  # the contiguous window shifts
    expected = set(zip(block_table[0, m // block_size].tolist(), (m % block_size).tolist(), old.tolist(), new.tolist()))
    assert plan.moves() == expected
    assert plan.deltas.numel() == 2 * 6  # fixed size: the window's slots of each request


def fa_writer(key, value, cache, slots):
    """vLLM's FlashAttention writer, emulated: logical [blocks, heads, block_size, 2 * head_size], keys first."""
    key_cache, value_cache = cache.transpose(1, 2).split(key.shape[-1], dim=-1)
    block_size = cache.shape[2]
    key_cache[slots // block_size, slots % block_size] = key
    value_cache[slots // block_size, slots % block_size] = value


def blocked_writer(order: torch.Tensor):
    """A CPU_ATTN-like writer: per (block, head) the keys fill the first block_size * head_size values of the
    region, element (t, d) at ``order[t * head_size + d]`` (an ISA's blocking), the values after them."""

    def write(key, value, cache, slots):
        blocks, heads, block_size, width = cache.shape
        head_size = width // 2
        flat = cache.view(blocks, heads, block_size * width)
        for i, slot in enumerate(slots.tolist()):
            b, t = divmod(slot, block_size)
            flat[b, :, order[t * head_size : (t + 1) * head_size]] = key[i]
            flat[b, :, block_size * head_size + t * head_size + torch.arange(head_size)] = value[i]

    return write


def nhd_cache(blocks: int, heads: int, block_size: int, head_size: int, dtype=torch.float32) -> torch.Tensor:
    """A cache of logical shape [blocks, heads, block_size, 2 * head_size] stored block, offset, head-major (vLLM's
    NHD stride order on a GPU)."""
    return torch.zeros(blocks, block_size, heads, 2 * head_size, dtype=dtype).transpose(1, 2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("layout", ["flash", "blocked"])
def test_locate_keys_finds_each_key_element_through_the_writer(layout, dtype):
    """Keys written by a backend's writer at random slots are read back at the places :func:`locate_keys` found
    (with a two-block probe) in a cache of 9 blocks, whatever its stride order or the order inside a block."""
    torch.manual_seed(0)
    heads, block_size, head_size = 3, 16, 8
    if layout == "flash":
        write, cache = fa_writer, nhd_cache(9, heads, block_size, head_size, dtype)
    else:
        write = blocked_writer(torch.randperm(block_size * head_size))
        cache = torch.zeros(9, heads, block_size, 2 * head_size, dtype=dtype)
    index = locate_keys(write, tuple(cache.shape), heads, head_size, dtype)
    slots = torch.randperm(9 * block_size)[:40]
    keys = torch.randn(40, heads, head_size).to(dtype)
    write(keys, torch.randn(40, heads, head_size).to(dtype), cache, slots)
    places = (slots[:, None, None] // block_size,) + tuple(part[slots % block_size] for part in index)
    assert torch.equal(cache[places], keys)


def test_locate_keys_refuses_a_writer_it_cannot_follow():
    def drops_a_head(key, value, cache, slots):
        fa_writer(key, value, cache, slots)
        cache[:, 0] = 0

    with pytest.raises(RuntimeError, match="could not locate the keys"):
        locate_keys(drops_a_head, (9, 2, 16, 16), 2, 8, torch.float32)


def random_batch(generator: torch.Generator, block_size: int, blocks_per_request: int):
    """A step's metadata: a decode, a prefill, a chunk of 3 tokens after a short context and one after a long
    one, then two padding requests with stale copies of request 0's block row (one without tokens, one with a token
    and length 0, as a CUDA graph's padded decode batch has) and two padding tokens; blocks scattered over a pool
    whose block 0 no request owns."""
    ctx = [int(torch.randint(30, 90, (1,), generator=generator)), 0, 2, 70]
    query = [1, 7, 3, 3]
    lengths = [c + q for c, q in zip(ctx, query)] + [0, 0]
    starts = [0]
    for q in query + [0, 1]:
        starts.append(starts[-1] + q)
    pool = (torch.randperm(len(query) * blocks_per_request, generator=generator) + 1).view(len(query), -1)
    block_table = torch.cat((pool, pool[:1], pool[:1]))
    positions = torch.cat([torch.arange(c, c + q) for c, q in zip(ctx, query)] + [torch.zeros(3, dtype=torch.long)])
    return positions, torch.tensor(starts), torch.tensor(lengths), block_table, ctx, query


@pytest.mark.parametrize(
    "layout,recent", [("paper", 1), ("paper", 5), ("paper", 40), ("contiguous", 5), ("contiguous", 40), ("paper", 0)]
)
def test_step_plan_moves_the_cache_to_the_grown_ids(layout, recent):
    """Algorithm 1's invariant after one step, through the fixed-size plan and the writer-located places: every
    cached key of every request (rotated at g_ctx(m) before the step) is the key rotated at g_{l_c}(m), within
    fp32 rounding, and every other place of the cache is untouched, bit for bit (slots that move nothing, padding
    tokens, a padding request pointing at request 0's blocks). The moved keys are exactly those
    :func:`moved_cached_keys` names."""
    generator = torch.Generator().manual_seed(recent)
    inference, block_size, heads, head_size = dyn(layout, recent, ratio=3.0, initial=2), 16, 2, 8
    positions, starts, lengths, block_table, ctx, query = random_batch(generator, block_size, 8)
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, head_size, 2).float() / head_size))
    cache = nhd_cache(int(block_table.max()) + 1, heads, block_size, head_size)
    cache.normal_(generator=generator)
    index = locate_keys(fa_writer, tuple(cache.shape), heads, head_size, torch.float32)
    raw = [torch.randn(c, heads, head_size, generator=generator) for c in ctx]
    args = (3.0, 2, recent, layout)
    for r, c in enumerate(ctx):
        m = torch.arange(c)
        keys = rotate(raw[r], *rotation(dynamic_positions(m, c, *args), inv_freq), head_size, True)
        fa_writer(keys, torch.zeros_like(keys), cache, block_table[r, m // block_size] * block_size + m % block_size)
    before = cache.clone()

    plan = step_plan(positions, starts, lengths, block_table, block_size, inference)
    rerotate_cached_keys(
        cache, key_places(index, plan), move_rotation(plan.old_ids, plan.new_ids, inv_freq), head_size, True
    )

    expected_moves, touched = set(), torch.zeros(cache.shape, dtype=torch.bool)
    for r, c in enumerate(ctx):
        m = torch.arange(c)
        place = (block_table[r, m // block_size][:, None, None],) + tuple(part[m % block_size] for part in index)
        target = rotate(raw[r], *rotation(dynamic_positions(m, lengths[r], *args), inv_freq), head_size, True)
        if c:
            assert (cache[place] - target).abs().max().item() < 2e-6
        touched[place] = True
        moved, old, new = moved_cached_keys(c, int(lengths[r]), inference)
        expected_moves |= set(
            zip(block_table[r, moved // block_size].tolist(), (moved % block_size).tolist(), old.tolist(), new.tolist())
        )
        new_tokens = torch.arange(c, c + query[r])  # this step's cache write overwrites these after the rotation
        touched[
            (block_table[r, new_tokens // block_size][:, None, None],)
            + tuple(part[new_tokens % block_size] for part in index)
        ] = True
    assert torch.equal(cache[~touched], before[~touched])
    assert plan.moves() == expected_moves
    slots = len(positions) if layout == "paper" else len(lengths) * recent
    assert plan.deltas.numel() == (slots if recent else 0)
    assert torch.equal(
        plan.ids[:-3], torch.cat([dynamic_positions(torch.arange(c, c + q), c + q, *args) for c, q in zip(ctx, query)])
    )
    assert plan.ids[-3:].tolist() == [0.0, 0.0, 0.0]  # padding keeps its position


def hf_rope(keys: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """``keys`` ``[n, heads, 64]`` rotated at float ``ids`` by transformers' own Llama RoPE (theta 10000)."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    rope = LlamaRotaryEmbedding(LlamaConfig(hidden_size=128, num_attention_heads=2, head_dim=64))
    cos, sin = rope(keys, ids[None].float())
    rotated, _ = apply_rotary_pos_emb(keys.transpose(0, 1)[None], keys.transpose(0, 1)[None], cos, sin)
    return rotated[0].transpose(0, 1)


@pytest.mark.parametrize(
    "layout,ctx,recent,ratio", [("paper", 300, 8, 2.0), ("paper", 6300, 3000, 4.0), ("contiguous", 6300, 200, 3.0)]
)
def test_moving_a_key_gives_the_key_rotated_at_its_new_id(layout, ctx, recent, ratio):
    """A key rotated at g_ctx(m) by transformers' Llama RoPE, then moved by :func:`move_rotation`, equals the key
    rotated at g_{ctx+3}(m) by transformers' RoPE to within 2e-6 (fp32 keys of unit scale), at ids of hundreds
    and of thousands. A rotation by the fp32 angle of the difference instead (``rotation(new - old)``) misses
    by far more at ids in the thousands: the rounding of fp32 angles that large."""
    torch.manual_seed(0)
    inference = dyn(layout, recent, ratio=ratio)
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, 64, 2).float() / 64))
    m, old, new = moved_cached_keys(ctx, ctx + 3, inference)
    keys = torch.randn(len(m), 2, 64)
    cached, target = hf_rope(keys, old), hf_rope(keys, new)
    moved = rotate(cached, *move_rotation(old, new, inv_freq), 64, True)
    assert (moved - target).abs().max().item() < 2e-6
    assert torch.equal(rotate(keys, *rotation(new, inv_freq), 64, True), target)  # rotation() is RoPE's own rounding
    if ctx > 1000:
        naive = rotate(cached, *rotation(new - old, inv_freq), 64, True)
        assert (naive - target).abs().max().item() > 1e-5


def test_engine_settings_are_forced_and_contradictions_refused():
    config = {"architectures": ["LlamaForCausalLM"], "max_position_embeddings": 8192}
    out = engine_settings({"max_model_len": "1024"}, config, environ={})
    assert out["enforce_eager"] is True and out["enable_prefix_caching"] is False
    assert out["enable_chunked_prefill"] is False and out["max_num_batched_tokens"] == 1024
    assert "max_num_seqs" not in out  # the KV cache's size is left to vLLM: the model checks it when known
    assert engine_settings({}, config, environ={})["max_num_batched_tokens"] == 8192
    # vLLM refuses more sequences than batched tokens: a short max_model_len caps the default concurrency too,
    # whether the KV cache's size is known (2 GiB of a tiny model's: 8192 blocks of 128 tokens, 1638 sequences of 608
    # tokens, 256 of 4096) or left to vLLM
    short = {"max_model_len": 608}
    assert engine_settings(short, config, environ={})["max_num_seqs"] == 608
    tiny = {**config, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 256}
    assert engine_settings(short, tiny, environ={"VLLM_CPU_KVCACHE_SPACE": "2"})["max_num_seqs"] == 608
    assert (
        engine_settings({"max_model_len": 4096}, tiny, environ={"VLLM_CPU_KVCACHE_SPACE": "2"})["max_num_seqs"] == 256
    )
    assert engine_settings({**short, "max_num_seqs": 8}, config, environ={})["max_num_seqs"] == 8
    graphs = engine_settings({"enforce_eager": "False"}, config, environ={})
    assert graphs["enforce_eager"] is False
    assert graphs["compilation_config"] == {"cudagraph_mode": "FULL_DECODE_ONLY", "cudagraph_num_of_warmups": 1}
    given = engine_settings(
        {
            "enforce_eager": False,
            "compilation_config": '{"cudagraph_mode": "none", "mode": 3, "cudagraph_num_of_warmups": 0}',
        },
        config,
        environ={},
    )
    assert given["compilation_config"] == {"cudagraph_mode": "NONE", "mode": 3, "cudagraph_num_of_warmups": 1}
    for args, pattern in [
        (
            {"enforce_eager": False, "compilation_config": {"cudagraph_mode": "FULL_AND_PIECEWISE"}},
            r"runs under cudagraph_mode NONE or FULL_DECODE_ONLY only .*FULL_AND_PIECEWISE was given",
        ),
        ({"enable_prefix_caching": True}, r"needs enable_prefix_caching=False"),
        ({"max_model_len": 2048, "max_num_batched_tokens": 512}, r"max_num_batched_tokens=512 must be"),
        ({"speculative_config": {"method": "ngram"}}, r"speculative decoding"),
        ({"kv_cache_dtype": "fp8"}, r"unquantized KV cache"),
    ]:
        with pytest.raises(UsageError, match=pattern):
            engine_settings(args, config, environ={})
    assert pic_overrides(config, dyn("contiguous", 9)) == {
        "architectures": ["PicLlamaForCausalLM"],
        "pic_inference": {
            "pic": "dynamic",
            "pic_ratio": 2.0,
            "pic_initial": 4,
            "pic_recent": 9,
            "pic_layout": "contiguous",
        },
    }


SMOLLM2_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "max_position_embeddings": 8192,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "hidden_size": 576,
    "dtype": "bfloat16",
}


def test_kv_cache_blocks_and_the_preemption_free_batch():
    """SmolLM2's shape (30 layers, 3 KV heads of 64): 2 * 30 * 3 * 64 = 11520 numbers a token, 46080 bytes in
    fp32, 5898240 a block of 128; 2 GiB hold 364 blocks (728 in bf16). At max_model_len 8192 (64 blocks) that is
    5 sequences (11 in bf16); a given max_num_seqs above it, or a cache without room for one sequence, is
    refused; after the engine starts, a cache smaller than max_num_seqs sequences is refused too."""
    gib2 = {"VLLM_CPU_KVCACHE_SPACE": "2"}
    assert kv_cache_blocks({"dtype": "float32"}, SMOLLM2_CONFIG, gib2) == 364
    assert kv_cache_blocks({}, SMOLLM2_CONFIG, gib2) == 728  # auto: the config's bf16
    assert kv_cache_blocks({"kv_cache_memory_bytes": 5898240 * 3 + 7, "dtype": "float32"}, SMOLLM2_CONFIG, {}) == 3
    assert kv_cache_blocks({"num_gpu_blocks_override": 17}, SMOLLM2_CONFIG, gib2) == 17
    assert kv_cache_blocks({}, SMOLLM2_CONFIG, {}) is None
    assert engine_settings({"dtype": "float32"}, SMOLLM2_CONFIG, gib2)["max_num_seqs"] == 5
    assert engine_settings({}, SMOLLM2_CONFIG, gib2)["max_num_seqs"] == 11
    assert engine_settings({"max_model_len": 1000, "block_size": 64}, SMOLLM2_CONFIG, gib2)["max_num_seqs"] == 91
    assert engine_settings({"dtype": "float32", "max_num_seqs": 3}, SMOLLM2_CONFIG, gib2)["max_num_seqs"] == 3
    with pytest.raises(UsageError, match=r"at most 5 sequences at once .* set max_num_seqs<=5"):
        engine_settings({"dtype": "float32", "max_num_seqs": 6}, SMOLLM2_CONFIG, gib2)
    with pytest.raises(UsageError, match=r"a KV cache of 63 blocks cannot hold one sequence of max_model_len=8192"):
        engine_settings({"num_gpu_blocks_override": 63}, SMOLLM2_CONFIG, gib2)
    check_no_preemption(5, 8192, 128, 320)
    with pytest.raises(UsageError, match=r"holds 4 sequences of max_model_len=8192, not max_num_seqs=5"):
        check_no_preemption(5, 8192, 128, 319)


# ---------------------------------------------------------------------------------------------- vLLM lane

PROBE = """
import gc, json, sys
if __name__ == "__main__":  # vLLM spawns workers: build engines under this guard
    # vLLM runs a full gc.collect() several times as each engine starts and stops (about 2 s an engine); this
    # process collects once per engine instead, after it is gone
    collect, gc.collect = gc.collect, lambda generation=2: 0
    from vllm import SamplingParams, TokensPrompt
    from harness.engines.vllm_pic.lm import VLLMPicLM
    job = json.loads(sys.argv[1])
    params = SamplingParams(temperature=0.0, max_tokens=job["new"], ignore_eos=True, logprobs=0)
    out = []
    for setting in job["settings"]:
        lm = VLLMPicLM(pretrained=job["model"], dtype="float32", max_model_len=job["max_model_len"], pic="dynamic",
                       pic_ratio=setting["ratio"], pic_initial=setting["initial"], pic_recent=setting["recent"],
                       pic_layout=setting["layout"], seed=0, **{**job["engine"], **setting.get("engine", {})})
        got = lm.model.generate([TokensPrompt(prompt_token_ids=p) for p in job["prompts"]], params, use_tqdm=False)
        config = lm.model.llm_engine.vllm_config
        out.append({"max_num_seqs": config.scheduler_config.max_num_seqs,
                    "num_blocks": config.cache_config.num_gpu_blocks,
                    "outputs": [{"tokens": list(o.outputs[0].token_ids),
                                 "logprobs": [lp[t].logprob for t, lp in zip(o.outputs[0].token_ids,
                                                                             o.outputs[0].logprobs)]} for o in got]})
        del lm, got
        collect()
    print("RESULT " + json.dumps(out))
"""


def setting(layout: str, recent: int, ratio: float = RATIO, initial: int = INITIAL, **engine) -> dict:
    return {"layout": layout, "recent": recent, "ratio": ratio, "initial": initial, "engine": engine}


def run_vllm(vllm_env, job: dict) -> list[dict]:
    """:data:`PROBE` in the vLLM environment: per setting of ``job``, the engine's numbers and the outputs. An engine
    with ``enforce_eager=False`` is compiled the way vLLM's CPU CI compiles (``VLLM_CPU_CI_ENV=1``: Dynamo traces the
    model, no Inductor code generation), which puts Dynamic PIC's layer step in a traced graph as its operator."""
    done = subprocess.run(
        [str(vllm_env.python), "-c", PROBE, json.dumps(job)],
        capture_output=True,
        text=True,
        env=vllm_env.environ() | {"VLLM_CPU_CI_ENV": "1"},
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(next(l for l in done.stdout.splitlines() if l.startswith("RESULT "))[len("RESULT ") :])


def assert_equal_to_reference(model, job: dict, got: list[dict]) -> float:
    """Every setting x prompt of ``job``: vLLM's tokens equal hf-pic's reference token for token, and every
    log-probability is within 1e-4; returns the largest difference."""
    worst, failures = 0.0, []
    for config, run in zip(job["settings"], got):
        for prompt, output in zip(job["prompts"], run["outputs"]):
            config = {key: value for key, value in config.items() if key != "engine"}
            tokens, logprobs = hf_pic_generation(model, prompt, dyn(**config), job["new"])
            if output["tokens"] != tokens:
                first = next(i for i, (a, b) in enumerate(zip(output["tokens"], tokens)) if a != b)
                failures.append(f"{config} prompt {len(prompt)}: first differs at new token {first}")
                continue
            worst = max(worst, max(abs(a - b) for a, b in zip(output["logprobs"], logprobs)))
    assert not failures, "\n".join(failures)
    assert worst < 1e-4, worst
    return worst


def prompt_ids(tokenizer, lengths: list[int], seed: int) -> list[list[int]]:
    """Token prompts of the given lengths, cut from different places of synthetic reports."""
    from harness.data.synthetic import synthetic_reports

    text = " ".join(synthetic_reports(1, int(max(lengths) * 1.2) + 400, seed=seed))
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(ids) > max(lengths), len(ids)
    return [ids[(101 * i) % (len(ids) - n) :][:n] for i, n in enumerate(lengths)]


@pytest.fixture(scope="module")
def tiny_llama():
    """A tiny trained Llama (head size 64, which vLLM's CPU attention supports; 8k positions): folder, model,
    tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.models.tiny import build_tiny_model

    folder = build_tiny_model(hidden=256, heads=4, kv_heads=2, train_steps=100)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    return folder, model, AutoTokenizer.from_pretrained(folder)


@pytest.mark.slow  # the tiny Llama test below runs the same path, longer prompts, in the default tier
def test_smollm2_long_generations_equal_hf_pic_reference(vllm_env, smollm2_dir, smollm2):
    """SmolLM2-135M (fp32) in the setting of ``lch eval --model vllm-pic ... pic=dynamic,pic_ratio=2,
    pic_recent=200`` (paper layout, l_ic 4), one batch of a 1k- and a 2k-token prompt, 256 new tokens each:
    vLLM's greedy tokens equal hf-pic's Algorithm 1 token for token, every log-probability within 1e-4. (The
    layouts, ratios and window edge cases at up to 6k tokens: the tiny Llama below; SmolLM2 at 3k tokens in
    both layouts costs 4 minutes of the suite.)"""
    model, tokenizer = smollm2
    job = {
        "model": str(smollm2_dir),
        "max_model_len": 4096,
        "new": 256,
        "engine": {},
        "prompts": prompt_ids(tokenizer, SMOLLM2_LENGTHS, seed=3),
        "settings": [setting("paper", 200)],
    }
    worst = assert_equal_to_reference(model, job, run_vllm(vllm_env, job))
    print(
        f"\nSmolLM2: {len(job['settings']) * len(job['prompts'])} generations of 256 tokens equal, max |logprob "
        f"diff| {worst:.2e}"
    )


def test_tiny_llama_long_generations_equal_hf_pic_reference(vllm_env, tiny_llama):
    """A tiny trained Llama, one batch of 1k-, 2.5k- and 6k-token prompts, 128 new tokens each (SmolLM2's test in the
    slow tier: 256), four settings:
    both layouts, s_cr 2 / 3 / 4, l_ic 4 / 16 / 64, and the window edge cases l_rc = 1 (one key moves per
    step), l_rc = 3000 (larger than two of the prompts) and l_rc = 7000 (larger than every prompt: nothing moves
    until the text outgrows it). A key re-rotated twice or not at all changes the tokens. The l_rc = 3000 engine is
    compiled (``enforce_eager=False``: Dynamic PIC's layer step one opaque operator in Dynamo's graph)."""
    folder, model, tokenizer = tiny_llama
    job = {
        "model": str(folder),
        "max_model_len": 8192,
        "new": 128,
        "engine": {},
        "prompts": prompt_ids(tokenizer, [1024, 2500, 6000], seed=5),
        "settings": [
            setting("paper", 1),
            setting("contiguous", 200, ratio=3.0, initial=16),
            setting("paper", 3000, ratio=4.0, initial=64, enforce_eager=False),
            setting("contiguous", 7000),
        ],
    }
    worst = assert_equal_to_reference(model, job, run_vllm(vllm_env, job))
    print(f"\ntiny Llama: 12 generations of 128 tokens equal, max |logprob diff| {worst:.2e}")


@pytest.mark.slow  # the tiny Llama test above runs the same path in the default tier
def test_no_preemption_with_a_small_kv_cache(vllm_env, tiny_llama):
    """A KV cache of 17 blocks of 128 tokens and max_model_len 1024 (8 blocks a sequence): vllm-pic runs at most
    2 sequences at once, as :func:`kv_cache_blocks` / :func:`preemption_free_sequences` predict, so five
    requests that together outgrow the cache are never preempted (a preempted request would be recomputed by
    one prefill at its final length, not Algorithm 1) and each equals hf-pic's reference. Also: the block
    count predicted from ``VLLM_CPU_KVCACHE_SPACE`` is the engine's own."""
    folder, model, tokenizer = tiny_llama
    job = {
        "model": str(folder),
        "max_model_len": 1024,
        "new": 256,
        "engine": {"num_gpu_blocks_override": 17},
        "prompts": prompt_ids(tokenizer, [700, 520, 610, 450, 680], seed=7),
        "settings": [setting("paper", 24)],
    }
    got = run_vllm(vllm_env, job)
    assert (got[0]["max_num_seqs"], got[0]["num_blocks"]) == (2, 17)
    assert_equal_to_reference(model, job, got)
    probe = {**job, "prompts": job["prompts"][:1], "new": 1, "engine": {}}
    config = json.loads((folder / "config.json").read_text())
    expected = kv_cache_blocks({"dtype": "float32"}, config, vllm_env.environ())
    assert run_vllm(vllm_env, probe)[0]["num_blocks"] == expected


PLAIN_VLLM = """
import json, sys
if __name__ == "__main__":
    from vllm import LLM, SamplingParams, TokensPrompt
    job = json.loads(sys.argv[1])
    out = {}
    for name, seqs in (("fits", 2), ("too_many", 3)):
        llm = LLM(model=job["model"], dtype="float32", enforce_eager=True, enable_prefix_caching=False,
                  enable_chunked_prefill=False, max_model_len=1024, max_num_batched_tokens=1024, max_num_seqs=seqs,
                  num_gpu_blocks_override=17, seed=0, hf_overrides=job["overrides"])
        params = SamplingParams(temperature=0.0, max_tokens=job["new"], ignore_eos=True)
        try:
            got = llm.generate([TokensPrompt(prompt_token_ids=job["prompt"])], params, use_tqdm=False)
            out[name] = list(got[0].outputs[0].token_ids)
        except Exception as err:  # the model class stops the engine on its first step
            out[name] = str(err).splitlines()[0]
        del llm
    print("RESULT " + json.dumps(out))
"""


@pytest.mark.slow  # the tiny Llama test above runs the same path in the default tier
def test_plain_vllm_finds_the_class_through_the_plugin_entry_point(vllm_env, tiny_llama):
    """An engine built by plain ``vllm.LLM`` (no vllm-pic, no ``register()`` call) with the ``Pic<Arch>``
    class named in ``hf_overrides``: vLLM's ``vllm.general_plugins`` entry point registered it, and its greedy
    tokens equal hf-pic's reference; with ``max_num_seqs=3`` over a cache of 17 blocks (2 sequences of 1024
    tokens) the model class refuses on its first step, naming ``max_num_seqs<=2``."""
    folder, model, tokenizer = tiny_llama
    inference = dyn("paper", 24)
    prompt = prompt_ids(tokenizer, [600], seed=9)[0]
    config = json.loads((folder / "config.json").read_text())
    job = {"model": str(folder), "prompt": prompt, "new": 32, "overrides": pic_overrides(config, inference)}
    done = subprocess.run(
        [str(vllm_env.python), "-c", PLAIN_VLLM, json.dumps(job)],
        capture_output=True,
        text=True,
        env=vllm_env.environ(),
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(next(l for l in done.stdout.splitlines() if l.startswith("RESULT "))[len("RESULT ") :])
    assert got["fits"] == hf_pic_generation(model, prompt, inference, 32)[0]
    assert "holds 2 sequences of max_model_len=1024, not max_num_seqs=3" in got["too_many"]
    assert "set max_num_seqs<=2" in got["too_many"]
