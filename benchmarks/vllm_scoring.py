"""Scoring long documents (``token_logprobs``): vllm-pic from final hidden states and the head applied a chunk of
rows at a time (the engine core), against hf-pic and against vLLM's ``prompt_logprobs`` (which builds ``[tokens x
vocab]`` fp32 logits and a log-softmax per prefill step), on this CPU, fp32.

Models and lengths: SmolLM2-135M-Instruct (49k vocabulary, 8k window) at 2k and 8k tokens, Gemma 3 270M (262k
vocabulary, 32k window) at 2k, 8k and 16k tokens; one document of Paul Graham essays each, no special tokens.
Each method runs in a process of its own (hf-pic in this environment, the vLLM ones in the CPU vLLM environment
of ``lch vllm-env``): the model is loaded, a short warm-up text scored, then the document, timed. Peak memory is the
largest resident set sampled every 5 ms while the document is scored, and its growth over the resident set just
before. Every method's log-probabilities are compared with hf-pic's. ``prompt_logprobs`` is skipped (and the row
says so) where its ``2 x tokens x vocab`` fp32 values would take more than 60% of the available memory. Writes
benchmarks/results/vllm_scoring.json with the load average before and after.

    python benchmarks/vllm_scoring.py [--models smollm2-135m gemma3-270m] [--lengths 2048 8000 16384]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LENGTHS = {"smollm2-135m": [2048, 8000], "gemma3-270m": [2048, 8000, 16384]}  # 8000: SmolLM2's 8192 window, + 1
SIDE = r"""
import json, sys, threading, time
from types import SimpleNamespace as R


def rss() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def timed(score, text):
    peak, stop = [rss()], threading.Event()
    def sample():
        while not stop.is_set():
            peak.append(rss())
            time.sleep(0.005)
    before = rss()
    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    start = time.perf_counter()
    values = score(text)
    seconds = time.perf_counter() - start
    stop.set()
    thread.join()
    return {"seconds": seconds, "logprobs": values, "rss_before": before, "rss_peak": max(peak)}


if __name__ == "__main__":
    spec = json.loads(open(sys.argv[1]).read())
    method, model, text = spec["method"], spec["model"], spec["text"]
    if method == "prompt_logprobs":
        from vllm import LLM, SamplingParams, TokensPrompt
        from transformers import AutoTokenizer
        from harness.engines.vllm_pic.env import with_cpu_runtime_defaults
        import os
        with_cpu_runtime_defaults(os.environ)
        tok = AutoTokenizer.from_pretrained(model)
        llm = LLM(model=model, dtype="float32", enforce_eager=True, max_model_len=spec["max_len"] + 1,
                  max_num_batched_tokens=spec["max_len"] + 1, enable_prefix_caching=False)
        params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0, detokenize=False)

        def score(t):
            ids = tok(t, add_special_tokens=False)["input_ids"]
            out = llm.generate([TokensPrompt(prompt_token_ids=ids)], params, use_tqdm=False)[0]
            return [float(out.prompt_logprobs[i][ids[i]].logprob) for i in range(1, len(ids))]
    else:
        if method == "vllm-pic":
            from harness.engines.vllm_pic.lm import VLLMPicLM
            lm = VLLMPicLM(pretrained=model, dtype="float32", enforce_eager=True, max_model_len=spec["max_len"] + 1)
        else:
            from harness.engines.hf_pic import HFPicLM
            lm = HFPicLM(pretrained=model, dtype="float32", device="cpu", batch_size=1)

        def score(t):
            return lm.token_logprobs([R(args=(t, {"add_special_tokens": False}))], disable_tqdm=True)[0]["logprobs"]
    score("Hello there, how are you today?")  # warm-up (and vllm-pic's pooling engine started)
    print("RESULT " + json.dumps(timed(score, text)))
"""


def load_average() -> float:
    return os.getloadavg()[0]


def document(model_dir: str, n_tokens: int, essays: Path) -> str:
    """The first ``n_tokens`` tokens (of this model's tokenizer) of the essays, one after another."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    text = "\n\n".join(p.read_text(encoding="utf-8") for p in sorted(essays.glob("*.txt")))
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    if len(enc["input_ids"]) < n_tokens:
        raise SystemExit(f"the essays hold {len(enc['input_ids'])} tokens, fewer than {n_tokens}")
    return text[: enc["offset_mapping"][n_tokens - 1][1]]


def available_bytes() -> int:
    for line in open("/proc/meminfo"):
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def logits_bytes(model_dir: str, n_tokens: int) -> int:
    """What ``prompt_logprobs`` holds at once for one ``n_tokens`` prefill: fp32 logits and their log-softmax,
    ``2 x n_tokens x vocab x 4`` bytes."""
    config = json.loads((Path(model_dir) / "config.json").read_text())
    vocab = config.get("vocab_size") or config.get("text_config", {}).get("vocab_size")
    return 2 * n_tokens * int(vocab) * 4


def run_side(python: str, spec: dict, workdir: Path) -> dict:
    spec_file = workdir / "spec.json"
    spec_file.write_text(json.dumps(spec))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run([python, "-c", SIDE, str(spec_file)], capture_output=True, text=True, env=env, cwd=workdir)
    line = next((l for l in done.stdout.splitlines() if l.startswith("RESULT ")), None)
    if done.returncode != 0 or line is None:
        raise SystemExit(f"{spec['method']} failed:\n{done.stderr[-3000:]}")
    return json.loads(line[len("RESULT ") :])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=list(LENGTHS))
    parser.add_argument("--lengths", nargs="+", type=int, help="token lengths (default: per model, see LENGTHS)")
    parser.add_argument("--essays", default=str(ROOT.parent / "shared" / "data" / "paul_graham_essays"))
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "vllm_scoring.json"))
    args = parser.parse_args()
    import tempfile

    from harness.engines.vllm_pic.env import ensure_vllm_env
    from harness.models.fetch import fetch_model

    vllm_python = str(ensure_vllm_env(log=lambda m: print(m, file=sys.stderr)).python)
    report = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "load_average_before": load_average(),
        "rows": [],
    }
    print(f"load average before: {report['load_average_before']:.2f}")
    print(
        f"{'model':<14} {'tokens':>6} {'method':<16} {'tok/s':>8} {'x hf-pic':>8} {'peak MiB':>9} "
        f"{'+MiB':>7} {'max|d|':>8}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            model_dir = str(fetch_model(name, log=lambda m: print(m, file=sys.stderr)))
            for n in args.lengths or LENGTHS[name]:
                text = document(model_dir, n, Path(args.essays))
                results = {}
                for method, python in (
                    ("hf-pic", sys.executable),
                    ("vllm-pic", vllm_python),
                    ("prompt_logprobs", vllm_python),
                ):
                    need = logits_bytes(model_dir, n)
                    if method == "prompt_logprobs" and need > 0.6 * available_bytes():
                        gib = need / 2**30
                        report["rows"].append(
                            {"model": name, "tokens": n, "method": method, "skipped": f"needs ~{gib:.0f} GiB of logits"}
                        )
                        print(
                            f"{name:<14} {n:>6} {method:<16} skipped: its [tokens x vocab] logits and log-softmax "
                            f"need ~{gib:.0f} GiB, more than 60% of this machine's available memory",
                            flush=True,
                        )
                        continue
                    results[method] = run_side(
                        python, {"method": method, "model": model_dir, "text": text, "max_len": n}, Path(tmp)
                    )
                reference = results["hf-pic"]["logprobs"]
                for method, r in results.items():
                    rate = len(r["logprobs"]) / r["seconds"]
                    diff = max(abs(a - b) for a, b in zip(r["logprobs"], reference))
                    row = {
                        "model": name,
                        "tokens": n,
                        "method": method,
                        "scored": len(r["logprobs"]),
                        "seconds": r["seconds"],
                        "tokens_per_s": rate,
                        "x_hf_pic": rate / (len(reference) / results["hf-pic"]["seconds"]),
                        "peak_mib": r["rss_peak"] / 2**20,
                        "growth_mib": (r["rss_peak"] - r["rss_before"]) / 2**20,
                        "max_abs_diff_vs_hf_pic": diff,
                    }
                    report["rows"].append(row)
                    print(
                        f"{name:<14} {n:>6} {method:<16} {rate:>8.1f} {row['x_hf_pic']:>8.2f} {row['peak_mib']:>9.0f} "
                        f"{row['growth_mib']:>7.0f} {diff:>8.1e}",
                        flush=True,
                    )
    report["load_average_after"] = load_average()
    print(f"load average after: {report['load_average_after']:.2f}")
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
