"""vllm-pic with ``pic=dynamic`` (harness/models/vllm_dynamic_pic.py) against hf-pic's Algorithm 1.

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

from harness.errors import UsageError
from harness.models.vllm_dynamic_pic import (
    engine_settings,
    hf_overrides,
    moved_cached_keys,
    rotate_half,
    rotation,
    step_plan,
)
from harness.positions.inference import Inference
from harness.positions.pic import dynamic_positions

SETTINGS = [("paper", 1), ("paper", 24), ("contiguous", 1), ("contiguous", 24), ("paper", 400)]  # (layout, l_rc)
RATIO, INITIAL, NEW_TOKENS = 2.0, 4, 12


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
            moved, delta = moved_cached_keys(ctx, grown, inference)
            assert moved.tolist() == m[full != 0].tolist()
            assert torch.equal(delta, full[full != 0])


def test_step_plan_ids_and_blocks():
    """A batch of a decode step (request 0: 37 cached + 1 new) and a prefill (request 1: 9 new tokens) with
    scattered blocks: each token's id is g_{l_c}(m) of its own request, each moved key is found at
    block_table[r, m // block_size], offset m % block_size, with its delta; padding keeps its position."""
    inference, block_size = dyn("contiguous", 6), 4
    positions = torch.tensor([37] + list(range(9)) + [0, 0])  # two padding slots
    block_table = torch.tensor([[7, 3, 9, 1, 4, 8, 2, 6, 5, 0], [11, 12, 13] + [0] * 7])
    plan = step_plan(positions, torch.tensor([0, 1, 10]), torch.tensor([38, 9]), block_table, block_size, inference)
    args = (RATIO, INITIAL, 6, "contiguous")
    assert torch.equal(plan.ids[:1], dynamic_positions(torch.tensor([37]), 38, *args))
    assert torch.equal(plan.ids[1:10], dynamic_positions(torch.arange(9), 9, *args))
    assert plan.ids[10:].tolist() == [0.0, 0.0]
    m, delta = moved_cached_keys(37, 38, inference)
    assert m.numel() > 0  # the contiguous window shifts
    assert plan.blocks.tolist() == block_table[0, m // block_size].tolist()
    assert plan.offsets.tolist() == (m % block_size).tolist() and torch.equal(plan.deltas, delta)


def test_rotation_by_the_delta_is_rotation_at_the_new_id():
    """A key rotated at g_ctx(m), then by g_{l_c}(m) - g_ctx(m), is the key rotated at g_{l_c}(m) (fp32)."""
    torch.manual_seed(0)
    inference = dyn("paper", 8)
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, 64, 2).float() / 64))
    m, delta = moved_cached_keys(300, 303, inference)
    keys = torch.randn(len(m), 2, 64)
    old = dynamic_positions(m, 300, RATIO, INITIAL, 8, "paper")
    new = dynamic_positions(m, 303, RATIO, INITIAL, 8, "paper")
    moved = rotate_half(rotate_half(keys, *rotation(old, inv_freq)), *rotation(delta, inv_freq))
    assert (moved - rotate_half(keys, *rotation(new, inv_freq))).abs().max().item() < 1e-4


def test_engine_settings_are_forced_and_contradictions_refused():
    config = {"architectures": ["LlamaForCausalLM"], "max_position_embeddings": 8192}
    out = engine_settings({"max_model_len": "1024"}, config)
    assert out["enforce_eager"] is True and out["enable_prefix_caching"] is False
    assert out["enable_chunked_prefill"] is False and out["max_num_batched_tokens"] == 1024
    assert engine_settings({}, config)["max_num_batched_tokens"] == 8192
    for args, pattern in [({"enforce_eager": "False"}, r"needs enforce_eager=True"),
                          ({"enable_prefix_caching": True}, r"needs enable_prefix_caching=False"),
                          ({"max_model_len": 2048, "max_num_batched_tokens": 512}, r"max_num_batched_tokens=512 must be"),
                          ({"speculative_config": {"method": "ngram"}}, r"speculative decoding"),
                          ({"kv_cache_dtype": "fp8"}, r"unquantized KV cache")]:
        with pytest.raises(UsageError, match=pattern):
            engine_settings(args, config)
    assert hf_overrides(config, dyn("contiguous", 9)) == {"architectures": ["PicLlamaForCausalLM"], "pic_ratio": 2.0,
                                                         "pic_initial": 4, "pic_recent": 9, "pic_layout": "contiguous"}
    with pytest.raises(UsageError, match=r"supports LlamaForCausalLM models for now; this one is Qwen2ForCausalLM"):
        hf_overrides({"architectures": ["Qwen2ForCausalLM"]}, dyn("paper", 9))
    with pytest.raises(UsageError, match=r"plain full-head RoPE; this model uses 'llama3'"):
        hf_overrides({**config, "rope_parameters": {"rope_type": "llama3"}}, dyn("paper", 9))


# ---------------------------------------------------------------------------------------------- vLLM lane

PROBE = """
import gc, json, sys
if __name__ == "__main__":  # vLLM spawns workers: build engines under this guard
    from vllm import SamplingParams, TokensPrompt
    from harness.lmeval.vllm_pic import VLLMPicLM
    model, prompts, settings, new = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4])
    params = SamplingParams(temperature=0.0, max_tokens=new, ignore_eos=True, logprobs=0)
    out = []
    for layout, recent in settings:
        lm = VLLMPicLM(pretrained=model, dtype="float32", max_model_len=512, pic="dynamic", pic_ratio=2.0,
                       pic_initial=4, pic_recent=recent, pic_layout=layout, seed=0)
        got = lm.model.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
        out.append([{"tokens": list(o.outputs[0].token_ids),
                     "logprobs": [lp[t].logprob for t, lp in zip(o.outputs[0].token_ids, o.outputs[0].logprobs)]}
                    for o in got])
        del lm, got
        gc.collect()
    print("RESULT " + json.dumps(out))
"""


def hf_reference(model, prompt: list[int], inference: Inference) -> tuple[list[int], list[float]]:
    """hf-pic's ``pic=dynamic,pic_impl=reference`` greedy generation: tokens and each one's log-probability."""
    from harness import apply_pic, remove_pic

    apply_pic(model, inference.replace(impl="reference"))
    try:
        with torch.no_grad():
            out = model.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                                 max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False,
                                 output_logits=True, return_dict_in_generate=True)
    finally:
        remove_pic(model)
    tokens = out.sequences[0, len(prompt):].tolist()
    logprobs = [torch.log_softmax(step[0].float(), -1)[t].item() for step, t in zip(out.logits, tokens)]
    return tokens, logprobs


def test_vllm_dynamic_pic_equals_hf_pic_reference(vllm_env, smollm2_dir, smollm2):
    """Every setting of :data:`SETTINGS`, a batch of a ~300- and a ~120-token prompt: vLLM's greedy tokens equal
    hf-pic's reference token for token, log-probabilities within 1e-4."""
    from harness.data.synthetic import synthetic_reports

    model, tokenizer = smollm2
    text = " ".join(synthetic_reports(1, 400, seed=3))
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    prompts = [ids[:300], ids[150:270]]
    done = subprocess.run([str(vllm_env.python), "-c", PROBE, str(smollm2_dir), json.dumps(prompts),
                           json.dumps(SETTINGS), str(NEW_TOKENS)], capture_output=True, text=True,
                          env=vllm_env.environ(), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(next(l for l in done.stdout.splitlines() if l.startswith("RESULT "))[len("RESULT "):])
    worst, failures = 0.0, []
    for (layout, recent), outputs in zip(SETTINGS, got):
        for prompt, output in zip(prompts, outputs):
            tokens, logprobs = hf_reference(model, prompt, dyn(layout, recent))
            if output["tokens"] != tokens:
                failures.append(f"{layout} l_rc {recent} prompt {len(prompt)}: {output['tokens']} != {tokens}")
                continue
            worst = max(worst, max(abs(a - b) for a, b in zip(output["logprobs"], logprobs)))
    assert not failures, "\n".join(failures)
    print(f"\nvLLM Dynamic PIC vs hf-pic reference: {len(SETTINGS) * len(prompts)} generations of {NEW_TOKENS} tokens "
          f"equal, max |logprob diff| {worst:.2e}")
    assert worst < 1e-4, worst
