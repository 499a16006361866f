"""PIC on vLLM for every family (harness/pic/vllm/model.py): one class per architecture whose full-attention
RoPE layers rotate at PIC's positions, against hf-pic.

Fast tests outside vLLM: :func:`rotate` against a rotation of each pair of dimensions written out here as complex
numbers (neox and GPT-J pairing, full and partial rotary). The vLLM lane (the ``vllm_env`` fixture; one subprocess
per group of families, building one engine per setting in turn): every family of ``harness/models/tiny.py`` (a tiny
model with head size 64, which vLLM's CPU attention supports, trained 30 steps so that greedy choices are not ties),
one batch of a 1100- and a 600-token prompt (past the sliding window of the hybrid families) and 24 new tokens,
under naive PIC, NTK-aware PIC and Dynamic PIC in both layouts: vllm-pic's greedy tokens equal hf-pic's (Dynamic:
``pic_impl=reference``, paper Algorithm 1) token for token and every log-probability is within 1e-4 (fp32). A family
vLLM runs through its Transformers backend is refused in one line naming why; Gemma 3 270M as a real model; and a
trained Dynamic PIC-SFT checkpoint of a hybrid family served from its variant file by vllm-pic and by plain vLLM
through the plugin entry point.
"""

from __future__ import annotations

import json
import subprocess

import pytest
import torch

from harness.models.tiny import ARCHITECTURES
from harness.pic.inference import Inference
from harness.pic.vllm.config import pic_overrides
from harness.pic.vllm.positions import rotate, rotation
from tests.pic.pic_generation import hf_pic_generation

SETTINGS = {  # the model args of each setting on both engines
    "naive": {"pic": "naive", "pic_ratio": 2.0},
    "ntk": {"pic": "ntk", "pic_ratio": 4.0},
    "dynamic-paper": {"pic": "dynamic", "pic_ratio": 2.0, "pic_initial": 4, "pic_recent": 24, "pic_layout": "paper"},
    "dynamic-contiguous": {
        "pic": "dynamic",
        "pic_ratio": 3.0,
        "pic_initial": 8,
        "pic_recent": 40,
        "pic_layout": "contiguous",
    },
}
LENGTHS, NEW = [1100, 600], 24
# vLLM 0.32 runs these through its Transformers backend (transformers' attention code): PIC is refused there
TRANSFORMERS_BACKEND = {"glm": "GlmForCausalLM", "olmo2": "Olmo2ForCausalLM", "smollm3": "SmolLM3ForCausalLM"}
GROUPS = [
    ["llama", "mistral", "mixtral", "qwen2", "glm"],
    ["qwen3", "qwen3_moe", "glm4", "gemma2", "olmo2"],
    ["gemma3_text", "phi3", "granite", "smollm3"],
]


# ---------------------------------------------------------------------------------------------- no vLLM


def complex_rope(x: torch.Tensor, ids: torch.Tensor, base: float, rotary_dim: int, neox: bool) -> torch.Tensor:
    """RoPE written out per pair, in float64: pair ``i`` of the first ``rotary_dim`` dimensions (``(i, i + r/2)``
    in the neox layout, ``(2i, 2i + 1)`` in GPT-J's) is the complex number ``a + ib``, multiplied by
    ``exp(i * id * base^(-2i / r))``; the other dimensions pass unchanged."""
    out = x.double().clone()
    half = rotary_dim // 2
    for i in range(half):
        a, b = (i, i + half) if neox else (2 * i, 2 * i + 1)
        angle = ids.double() * base ** (-2 * i / rotary_dim)
        z = torch.complex(out[:, :, a], out[:, :, b]) * torch.polar(torch.ones_like(angle), angle)[:, None]
        out[:, :, a], out[:, :, b] = z.real, z.imag
    return out


@pytest.mark.parametrize("rotary_dim,neox", [(64, True), (64, False), (32, True), (32, False)])
def test_rotate_is_rope_in_each_layout(rotary_dim, neox):
    """Full and partial rotary (Phi-3, GLM: the first half of each head), neox and GPT-J pairing, at float ids of
    naive / Dynamic PIC: within fp32 rounding of the pairwise complex rotation; float64 ``(cos, sin)`` rotate in
    float64 (the cached-key moves) and agree to 1e-12."""
    torch.manual_seed(0)
    x = torch.randn(7, 3, 64)
    ids = torch.tensor([0.0, 1.0, 2.5, 17.0, 333.5, 1999.0, 4097.25])
    base = 10000.0
    inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float) / rotary_dim))
    expected = complex_rope(x, ids, base, rotary_dim, neox)
    assert (rotate(x, *rotation(ids, inv_freq), rotary_dim, neox).double() - expected).abs().max() < 5e-4
    angles = ids.double()[:, None] * base ** (-torch.arange(0, rotary_dim, 2).double() / rotary_dim)
    precise = rotate(x.double(), angles.cos(), angles.sin(), rotary_dim, neox)
    assert precise.dtype == torch.float64 and (precise - expected).abs().max() < 1e-12
    assert torch.equal(precise[..., rotary_dim:], x.double()[..., rotary_dim:])


# ---------------------------------------------------------------------------------------------- vLLM lane

PROBE = """
import gc, json, sys
if __name__ == "__main__":  # vLLM spawns workers: build engines under this guard
    # vLLM runs a full gc.collect() several times as each engine starts and stops (about 2 s an engine here, most of
    # this test's time); this process collects once per model instead
    collect, gc.collect = gc.collect, lambda generation=2: 0
    from vllm import SamplingParams, TokensPrompt
    from harness.core.errors import LchError
    from harness.engines.vllm_pic.lm import VLLMPicLM
    jobs = json.loads(sys.stdin.read())
    out = []
    for i, job in enumerate(jobs):
        if i and job["model"] != jobs[i - 1]["model"]:
            collect()
        try:
            lm = VLLMPicLM(pretrained=job["model"], dtype="float32", max_model_len=2048, seed=0, enforce_eager=True,
                           **job.get("engine", {}), **job["args"])
        except LchError as err:
            out.append({"refused": str(err)})
            continue
        params = SamplingParams(temperature=0.0, max_tokens=job["new"], ignore_eos=True, logprobs=0)
        got = lm.model.generate([TokensPrompt(prompt_token_ids=p) for p in job["prompts"]], params, use_tqdm=False)
        out.append({"outputs": [{"tokens": list(o.outputs[0].token_ids),
                                 "logprobs": [lp[t].logprob for t, lp in zip(o.outputs[0].token_ids,
                                                                             o.outputs[0].logprobs)]} for o in got]})
        del lm, got
    print("RESULT " + json.dumps(out))
"""


def run_vllm(vllm_env, jobs: list[dict]) -> list[dict]:
    """:data:`PROBE` in the vLLM environment: per job, the outputs or the refusal's line."""
    done = subprocess.run(
        [str(vllm_env.python), "-c", PROBE],
        input=json.dumps(jobs),
        capture_output=True,
        text=True,
        env=vllm_env.environ(),
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(next(l for l in done.stdout.splitlines() if l.startswith("RESULT "))[len("RESULT ") :])


def prompt_ids(tokenizer, lengths: list[int], seed: int) -> list[list[int]]:
    """Token prompts of the given lengths, cut from different places of synthetic reports."""
    from harness.data.synthetic import synthetic_reports

    text = " ".join(synthetic_reports(1, int(max(lengths) * 1.2) + 400, seed=seed))
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(ids) > max(lengths), len(ids)
    return [ids[(101 * i) % (len(ids) - n) :][:n] for i, n in enumerate(lengths)]


def compare(model, job: dict, got: dict) -> tuple[list[str], float]:
    """The differences of one job's vLLM outputs from hf-pic's (tokens first, then log-probs), and the largest
    log-prob difference."""
    inference, failures, worst = Inference.from_model_args(job["args"]), [], 0.0
    for prompt, output in zip(job["prompts"], got["outputs"]):
        tokens, logprobs = hf_pic_generation(model, prompt, inference, job["new"])
        if output["tokens"] != tokens:
            first = next(i for i, (a, b) in enumerate(zip(output["tokens"], tokens)) if a != b)
            failures.append(f"{job['name']} prompt {len(prompt)}: first different token at {first}")
            continue
        worst = max(worst, max(abs(a - b) for a, b in zip(output["logprobs"], logprobs)))
    if worst >= 1e-4:
        failures.append(f"{job['name']}: log-probs differ by {worst:.2e}")
    return failures, worst


@pytest.mark.slow  # each family on a real vLLM engine; hf-pic's families and vllm-pic on Llama: default tier
@pytest.mark.parametrize("families", GROUPS, ids=["-".join(g) for g in GROUPS])
def test_every_family_equals_hf_pic_under_every_method(vllm_env, families):
    """Each family under naive, NTK-aware and Dynamic PIC (both layouts) on vLLM equals hf-pic; a family vLLM
    runs through its Transformers backend is refused before its engine starts, naming that backend."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.models.tiny import build_tiny_model

    assert sorted(sum(GROUPS, [])) == sorted(ARCHITECTURES)  # every family of tiny.py, once
    folders = {arch: build_tiny_model(arch, hidden=256, heads=4, kv_heads=2, train_steps=30) for arch in families}
    jobs = []
    for arch in families:
        prompts = prompt_ids(AutoTokenizer.from_pretrained(folders[arch]), LENGTHS, seed=3)
        jobs += [
            {
                "name": f"{arch} {name}",
                "arch": arch,
                "model": str(folders[arch]),
                "args": args,
                "prompts": prompts,
                "new": NEW,
                "engine": {"num_gpu_blocks_override": 40},
            }  # 2 sequences of 2048
            for name, args in SETTINGS.items()
        ]
    failures, worst = [], {}
    for job, got in zip(jobs, run_vllm(vllm_env, jobs)):
        arch = job["arch"]
        if arch in TRANSFORMERS_BACKEND:
            assert got.get("refused") == (
                f"PIC on vLLM: vLLM runs {TRANSFORMERS_BACKEND[arch]} through its "
                "Transformers backend (transformers' attention code, without vLLM's rotary "
                "module per layer that PIC replaces); use --model hf-pic"
            ), got
            continue
        assert "refused" not in got, got["refused"]
        model = AutoModelForCausalLM.from_pretrained(folders[arch], dtype=torch.float32).eval()
        found, worst[job["name"]] = compare(model, job, got)
        failures += found
    assert not failures, "\n".join(failures)
    print(
        "\n"
        + "\n".join(
            f"{name}: {len(LENGTHS)} generations equal, max |logprob diff| {w:.1e}" for name, w in worst.items()
        )
    )


@pytest.mark.slow  # each family on a real vLLM engine; hf-pic's families and vllm-pic on Llama: default tier
def test_gemma3_270m_equals_hf_pic_past_its_sliding_window(vllm_env, gemma3_dir, gemma3):
    """Gemma 3 270M (fp32; 512-token sliding window on 5 of every 6 layers, RoPE base 1e6 on the global ones,
    1e4 on the local ones), a batch of a 1100- and a 600-token prompt, 12 new tokens: NTK-aware and Dynamic PIC
    (paper layout) on vLLM equal hf-pic token for token, log-probs within 1e-4."""
    model, tokenizer = gemma3
    prompts = prompt_ids(tokenizer, LENGTHS, seed=5)
    jobs = [
        {"name": f"gemma3-270m {name}", "model": str(gemma3_dir), "args": SETTINGS[name], "prompts": prompts, "new": 12}
        for name in ("ntk", "dynamic-paper")
    ]
    failures = []
    for job, got in zip(jobs, run_vllm(vllm_env, jobs)):
        assert "refused" not in got, got["refused"]
        failures += compare(model, job, got)[0]
    assert not failures, "\n".join(failures)


@pytest.mark.slow  # a real vLLM engine
def test_ntk_pic_reaches_past_the_window_on_vllm_as_on_hf_pic(vllm_env):
    """NTK-aware PIC (s_rr 4) on a tiny Gemma 3 whose window is 512 positions, prompts of 1100 and 600 tokens: vLLM
    takes max_model_len 2048 (it refused any length past the model's window before PIC raised it) and equals hf-pic,
    its sliding-window layers rotating at positions past 512 as hf-pic's do."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.models.tiny import build_tiny_model

    folder = build_tiny_model("gemma3_text", hidden=256, heads=4, kv_heads=2, max_positions=512, train_steps=30)
    job = {
        "name": "gemma3_text ntk past 512",
        "model": str(folder),
        "args": SETTINGS["ntk"],
        "new": NEW,
        "prompts": prompt_ids(AutoTokenizer.from_pretrained(folder), LENGTHS, seed=7),
        "engine": {"num_gpu_blocks_override": 40},
    }
    [got] = run_vllm(vllm_env, [job])
    assert "refused" not in got, got["refused"]
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    failures, _ = compare(model, job, got)
    assert not failures, "\n".join(failures)


PLAIN_VLLM = """
import json, sys
if __name__ == "__main__":
    from vllm import LLM, SamplingParams, TokensPrompt
    from harness.engines.vllm_pic.lm import VLLMPicLM
    job = json.loads(sys.argv[1])
    params = SamplingParams(temperature=0.0, max_tokens=job["new"], ignore_eos=True)
    prompts = [TokensPrompt(prompt_token_ids=p) for p in job["prompts"]]
    lm = VLLMPicLM(pretrained=job["model"], dtype="float32", max_model_len=2048, seed=0, num_gpu_blocks_override=40)
    out = {"vllm_pic": [list(o.outputs[0].token_ids) for o in lm.model.generate(prompts, params, use_tqdm=False)],
           "applied": lm.inference.to_model_args()}
    del lm
    llm = LLM(model=job["model"], dtype="float32", enforce_eager=True, enable_prefix_caching=False,
              enable_chunked_prefill=False, max_model_len=2048, max_num_batched_tokens=2048, max_num_seqs=2,
              num_gpu_blocks_override=40, seed=0, hf_overrides=job["overrides"])
    out["plain"] = [list(o.outputs[0].token_ids) for o in llm.generate(prompts, params, use_tqdm=False)]
    print("RESULT " + json.dumps(out))
"""


@pytest.mark.slow  # each family on a real vLLM engine; hf-pic's families and vllm-pic on Llama: default tier
def test_a_dynamic_pic_checkpoint_of_a_hybrid_family_is_served_from_its_variant_file(vllm_env, tmp_path):
    """A Dynamic PIC-SFT checkpoint of a tiny Gemma 3 (sliding-window layers and one global layer), trained one
    step with full fine-tuning: vllm-pic given only ``pretrained=`` applies the Dynamic PIC its variant file
    expects, and plain ``vllm.LLM`` with the ``Pic<Arch>`` class in ``hf_overrides`` (registered by the
    ``vllm.general_plugins`` entry point, no vllm-pic in the engine's making) gives the same tokens, both equal to
    hf-pic's Algorithm 1 under that variant."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.models.tiny import build_tiny_model
    from harness.pic.variants import read_variant
    from harness.train.config import TrainConfig
    from harness.train.trainer import train_recipe

    base = build_tiny_model("gemma3_text", hidden=256, heads=4, kv_heads=2, train_steps=30)
    rows = tmp_path / "inst.jsonl"
    rows.write_text(
        "".join(
            json.dumps({"instruction": f"Report {i}.", "response": "the agency reviewed costs. " * 20}) + "\n"
            for i in range(4)
        )
    )
    checkpoint = tmp_path / "dyn"
    train_recipe(
        TrainConfig.for_recipe(
            recipe="pic-sft",
            data=str(rows),
            output=str(checkpoint),
            model=str(base),
            full=True,
            pic="dynamic",
            pic_ratio=2.0,
            pic_initial=4,
            pic_recent=16,
            segment_length=32,
            max_steps=1,
            heldout=0.0,
            progress=False,
            lr=1e-3,
        )
    )
    inference = read_variant(checkpoint).inference
    assert inference == Inference("dynamic", 2.0, 4, 16)
    config = json.loads((checkpoint / "config.json").read_text())
    prompts = prompt_ids(AutoTokenizer.from_pretrained(checkpoint), [700, 300], seed=9)
    job = {"model": str(checkpoint), "prompts": prompts, "new": 16, "overrides": pic_overrides(config, inference)}
    done = subprocess.run(
        [str(vllm_env.python), "-c", PLAIN_VLLM, json.dumps(job)],
        capture_output=True,
        text=True,
        env=vllm_env.environ(),
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(next(l for l in done.stdout.splitlines() if l.startswith("RESULT "))[len("RESULT ") :])
    assert Inference.from_model_args(got["applied"]) == inference.replace(impl="cached")
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32).eval()
    expected = [hf_pic_generation(model, p, inference, 16)[0] for p in prompts]
    assert got["vllm_pic"] == expected
    assert got["plain"] == expected
