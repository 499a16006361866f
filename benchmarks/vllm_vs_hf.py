"""vllm-pic vs hf-pic on SmolLM2-135M-Instruct (fp32, greedy, this CPU): ``generate_long`` and
``token_logprobs`` throughput on the same requests, with identical outputs checked.

hf-pic runs in this process (batch 1, and batch 4 with left padding); vllm-pic runs in the CPU vLLM
environment (``lch vllm-env``) as a subprocess that times the same request methods. Each engine gets one
warm-up call first; model loading is not timed. Throughput = generated (or scored) tokens / seconds of the
call. Writes benchmarks/results/vllm_vs_hf.json with the load average before and after.

    python benchmarks/vllm_vs_hf.py [--new 256] [--docs 4] [--doc-tokens 2048]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROMPTS = [
    "Write a 300-word story about a lighthouse keeper who finds a message in a bottle.",
    "Explain to a new employee how a city water treatment plant works.",
    "Write a letter to a friend describing a week of hiking in the mountains.",
    "Describe the history of the printing press and why it mattered.",
]
VLLM_SIDE = """
import json, sys, time
from types import SimpleNamespace as R
if __name__ == "__main__":
    from harness.engines.vllm_pic.lm import VLLMPicLM
    spec = json.loads(open(sys.argv[1]).read())
    lm = VLLMPicLM(pretrained=spec["model"], dtype="float32", enforce_eager=True, max_model_len=4096)
    lm.generate_long([R(args=("Hello", {"max_gen_toks": 8}))])  # warm-up
    lm.token_logprobs([R(args=("Hello there, how are you?", {}))])
    out = {}
    start = time.perf_counter()
    out["generate_long"] = lm.generate_long([R(args=(p, {"max_gen_toks": spec["new"]})) for p in spec["prompts"]])
    out["generate_seconds"] = time.perf_counter() - start
    start = time.perf_counter()
    out["token_logprobs"] = lm.token_logprobs([R(args=(d, {"add_special_tokens": False})) for d in spec["docs"]])
    out["score_seconds"] = time.perf_counter() - start
    print("RESULT " + json.dumps(out))
"""


def hf_side(model_dir: str, prompts: list[str], docs: list[str], new: int, batch: int) -> dict:
    from harness.engines.hf_pic import HFPicLM

    lm = HFPicLM(pretrained=model_dir, dtype="float32", device="cpu", batch_size=batch)
    R = SimpleNamespace
    lm.generate_long([R(args=("Hello", {"max_gen_toks": 8}))])  # warm-up
    lm.token_logprobs([R(args=("Hello there, how are you?", {}))])
    out: dict = {}
    start = time.perf_counter()
    out["generate_long"] = lm.generate_long([R(args=(p, {"max_gen_toks": new})) for p in prompts])
    out["generate_seconds"] = time.perf_counter() - start
    start = time.perf_counter()
    out["token_logprobs"] = lm.token_logprobs([R(args=(d, {"add_special_tokens": False})) for d in docs])
    out["score_seconds"] = time.perf_counter() - start
    return out


def rates(run: dict) -> dict:
    generated = sum(r["n_tokens"] for r in run["generate_long"])
    scored = sum(len(r["logprobs"]) for r in run["token_logprobs"])
    return {
        "generated_tokens": generated,
        "generate_tokens_per_s": generated / run["generate_seconds"],
        "scored_tokens": scored,
        "score_tokens_per_s": scored / run["score_seconds"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--new", type=int, default=256)
    parser.add_argument("--docs", type=int, default=4)
    parser.add_argument("--doc-tokens", type=int, default=2048)
    parser.add_argument("--essays", default=str(ROOT.parent / "shared" / "data" / "paul_graham_essays"))
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "vllm_vs_hf.json"))
    args = parser.parse_args()

    import torch
    from transformers import AutoTokenizer

    from harness.data.synthetic import synthetic_reports
    from harness.engines.vllm_pic.env import ensure_vllm_env
    from harness.models.fetch import fetch_model

    model = str(fetch_model("smollm2-135m"))
    env = ensure_vllm_env()
    tok = AutoTokenizer.from_pretrained(model)
    prompts = [
        tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
        for p in PROMPTS
    ]
    essays = sorted(Path(args.essays).glob("*.txt")) if Path(args.essays).is_dir() else []
    texts = [p.read_text(encoding="utf-8") for p in essays] or synthetic_reports(20, 3000, seed=1)
    docs = []
    for text in texts:
        enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        if len(enc["input_ids"]) >= args.doc_tokens:
            docs.append(text[: enc["offset_mapping"][args.doc_tokens - 1][1]])
        if len(docs) == args.docs:
            break

    load_before = os.getloadavg()
    spec = Path("/tmp") / f"vllm_vs_hf_{os.getpid()}.json"
    spec.write_text(json.dumps({"model": model, "prompts": prompts, "docs": docs, "new": args.new}))
    done = subprocess.run(
        [str(env.python), "-c", VLLM_SIDE, str(spec)], capture_output=True, text=True, env=env.environ()
    )
    spec.unlink()
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    runs = {"vllm-pic": json.loads(next(l for l in done.stdout.splitlines() if l.startswith("RESULT "))[7:])}
    for batch in (1, 4):
        runs[f"hf-pic batch {batch}"] = hf_side(model, prompts, docs, args.new, batch)
    load_after = os.getloadavg()

    reference = runs["hf-pic batch 1"]
    table = {name: rates(run) for name, run in runs.items()}
    checks = {}
    for name, run in runs.items():
        same_text = [a["text"] == b["text"] for a, b in zip(run["generate_long"], reference["generate_long"])]
        diffs = [
            abs(x - y)
            for a, b in zip(run["token_logprobs"], reference["token_logprobs"])
            for x, y in zip(a["logprobs"], b["logprobs"])
        ]
        checks[name] = {
            "identical_generations": f"{sum(same_text)}/{len(same_text)}",
            "max_abs_logprob_diff_vs_hf_batch1": max(diffs),
        }
    vllm = table["vllm-pic"]
    ratios = {
        f"vllm-pic / {name}": {
            "generate": vllm["generate_tokens_per_s"] / row["generate_tokens_per_s"],
            "score": vllm["score_tokens_per_s"] / row["score_tokens_per_s"],
        }
        for name, row in table.items()
        if name != "vllm-pic"
    }
    result = {
        "setup": {
            "model": "SmolLM2-135M-Instruct (fp32)",
            "prompts": len(prompts),
            "new_tokens": args.new,
            "docs": len(docs),
            "doc_tokens": args.doc_tokens,
            "torch_threads": torch.get_num_threads(),
            "cpus": os.cpu_count(),
            "machine": platform.processor() or platform.machine(),
            "vllm": env.vllm_version,
            "vllm_env": {k: env.environ().get(k) for k in ("VLLM_ENABLE_V1_MULTIPROCESSING", "VLLM_CPU_KVCACHE_SPACE")},
            "load_average_1_5_15_min": {"before": load_before, "after": load_after},
        },
        "throughput": table,
        "ratios": ratios,
        "checks": checks,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"SmolLM2-135M fp32 on {os.cpu_count()} CPUs: {len(prompts)} prompts x {args.new} new tokens, "
        f"{len(docs)} documents x {args.doc_tokens} tokens (load before {load_before[0]:.2f})"
    )
    for name, row in table.items():
        print(
            f"  {name:<16} generate_long {row['generate_tokens_per_s']:7.1f} tok/s ({row['generated_tokens']} tokens) "
            "  "
            f"token_logprobs {row['score_tokens_per_s']:7.1f} tok/s   {checks[name]}"
        )
    for name, r in ratios.items():
        print(f"  {name}: generate {r['generate']:.2f}x, score {r['score']:.2f}x")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
