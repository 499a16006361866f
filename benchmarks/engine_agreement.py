"""hf-pic vs vllm-pic on SmolLM2-135M-Instruct, fp32 and bf16: how far the two engines agree.

Runs ``lch eval`` on ``ppl_govreport, longppl_govreport, lsm_govreport, lch_ruler, lch_babilong`` (essays as
documents and haystack, chat template, greedy) once per engine and dtype (hf-pic in this environment,
vllm-pic in the CPU vLLM environment of ``lch vllm-env``), then ``lch agree`` on the pairs:
hf fp32 vs vLLM fp32, hf bf16 vs vLLM bf16, and each engine's fp32 vs its bf16. Writes every agreement
report (Markdown + JSON) and a summary to benchmarks/results/engine_agreement/.

    python benchmarks/engine_agreement.py [--essays DIR] [--lengths 1024 2048] [--num-samples 2] [--pic ntk] [--ratio 4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TASKS = "ppl_govreport,longppl_govreport,lsm_govreport,lch_ruler,lch_babilong"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--essays", default=str(ROOT.parent / "shared" / "data" / "paul_graham_essays"))
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048])
    parser.add_argument("--num-samples", type=int, default=2)
    parser.add_argument("--num-docs", type=int, default=3)
    parser.add_argument("--pic", default="ntk", choices=["none", "naive", "ntk"])
    parser.add_argument("--ratio", type=float, default=4.0)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "engine_agreement"))
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # every source is local: fail at once rather than retry the hub
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

    from harness.engines.vllm_pic.env import ensure_vllm_env
    from harness.models.fetch import fetch_model

    model = fetch_model("smollm2-135m")
    env = ensure_vllm_env()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "data_files": args.essays,
        "min_tokens": 2048,
        "max_tokens": 2048,
        "num_docs": args.num_docs,
        "evaluator": str(model),
        "trunc_len": 1024,
        "sliding_window": 512,
        "context_length": 1024,
        "n_samples": 4,
        "lengths": args.lengths,
        "num_samples": args.num_samples,
        "essays": args.essays,
        "squad": "synthetic",
        "hotpotqa": "synthetic",
        "source": "synthetic",
        "filler": args.essays,
        "chat_template": True,
    }
    pic = "" if args.pic == "none" else f",pic={args.pic},pic_ratio={args.ratio}"
    runs, seconds = {}, {}
    for dtype in args.dtypes:
        for engine in ("hf", "vllm"):
            folder = out / "runs" / f"{engine}-{dtype}"
            common = [
                "--tasks",
                TASKS,
                "--metadata",
                json.dumps(meta),
                "--apply_chat_template",
                "--log_samples",
                "--output_path",
                str(folder),
            ]
            if engine == "hf":
                cmd = [
                    sys.executable,
                    "-m",
                    "harness.cli",
                    "eval",
                    "--model",
                    "hf-pic",
                    "--model_args",
                    f"pretrained={model},dtype={dtype}{pic},max_length=8192",
                    "--device",
                    "cpu",
                    "--batch_size",
                    "1",
                    *common,
                ]
                environ = dict(os.environ)
            else:
                cmd = env.command(
                    "eval",
                    "--model",
                    "vllm-pic",
                    "--model_args",
                    f"pretrained={model},dtype={dtype}{pic},max_model_len=8192,enforce_eager=True",
                    *common,
                )
                environ = env.environ()
            start = time.perf_counter()
            print(f"{engine} {dtype}: lch eval ...", flush=True)
            subprocess.run(cmd, check=True, env=environ, stdout=subprocess.DEVNULL)
            runs[(engine, dtype)], seconds[f"{engine}-{dtype}"] = folder, round(time.perf_counter() - start, 1)
    pairs = [(("hf", d), ("vllm", d)) for d in args.dtypes]
    if len(args.dtypes) > 1:
        pairs += [((e, args.dtypes[0]), (e, args.dtypes[1])) for e in ("hf", "vllm")]
    summary = {
        "model": str(model),
        "tasks": TASKS,
        "metadata": meta,
        "pic": args.pic,
        "ratio": args.ratio,
        "eval_seconds": seconds,
        "load_average_after": os.getloadavg(),
        "pairs": {},
    }
    for a, b in pairs:
        name = f"{a[0]}-{a[1]}_vs_{b[0]}-{b[1]}"
        done = subprocess.run(
            [sys.executable, "-m", "harness.cli", "agree", str(runs[a]), str(runs[b]), "-o", str(out / name)],
            capture_output=True,
            text=True,
        )
        report = json.loads((out / f"{name}.json").read_text())
        summary["pairs"][name] = {
            "exit_code": done.returncode,
            "agrees": report["agrees"],
            "tasks": {
                t["task"]: {k: t[k] for k in ("exact_match", "max_logprob_diff", "max_value_diff", "reasons")}
                | {
                    "metrics": {
                        m: v for m, v in t["metrics"].items() if m in ("ppl", "ppl_nobos", "longppl", "lsm", "score")
                    }
                }
                for t in report["tasks"]
            },
        }
        print(f"{name}: {'agree' if report['agrees'] else 'differ'}")
        for t in report["tasks"]:
            bits = [
                f"exact {t['exact_match']:.0%}" if t["exact_match"] is not None else "",
                f"max |dlogp| {t['max_logprob_diff']:.2g}" if t["max_logprob_diff"] is not None else "",
                f"max |dsce| {t['max_value_diff']:.2g}" if t["max_value_diff"] is not None else "",
            ]
            print(f"  {t['task']:<32} " + " ".join(b for b in bits if b))
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
