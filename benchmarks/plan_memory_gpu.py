"""What ``lch plan`` predicts for 8B-class models on an 80 GB GPU, from their configs alone (benchmarks/configs/:
Llama-3.1-8B and Qwen2.5-7B, written from the published numbers; no weights), bf16: per engine (hf-pic, vllm-pic)
and length (32k, 64k, 128k), the memory of a perplexity's document (every token scored) and of a RULER sample (the
prompt and a 128-token answer; vllm-pic's scoring run with its two engines at gpu_memory_utilization 0.45 each,
one engine's memory shown against its share), and whether each fits an H100 (79.2 GiB as CUDA reports it). A lent
GPU checks these predictions against a real small model first (benchmarks/README.md, "On a GPU").

    python benchmarks/plan_memory_gpu.py [--device h100] [--lengths 32768 65536 131072]

Writes benchmarks/results/plan_memory_gpu.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.core.sizes import in_words  # noqa: E402  (after the path)
from harness.engines.vllm_pic.lm import POOLED_GPU_MEMORY  # noqa: E402
from harness.plan.cells import PlanCell  # noqa: E402
from harness.plan.devices import parse_memory  # noqa: E402
from harness.plan.make import EvalSettings, with_memory  # noqa: E402

CONFIGS = {
    "llama-3.1-8b": ROOT / "benchmarks" / "configs" / "llama-3.1-8b",
    "qwen2.5-7b": ROOT / "benchmarks" / "configs" / "qwen2.5-7b",
}
ANSWER = 128  # RULER niah's answer budget


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="h100")
    parser.add_argument("--lengths", type=int, nargs="+", default=[32768, 65536, 131072])
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "plan_memory_gpu.json"))
    args = parser.parse_args()
    device = parse_memory(args.device)
    rows = []
    for name, folder in CONFIGS.items():
        for engine in ("hf-pic", "vllm-pic"):
            for task in ("ppl_govreport", "lch_ruler"):  # a run each: a scoring run of vllm-pic has two engines
                model_args = {"pretrained": str(folder), "dtype": "bfloat16"}
                if engine == "vllm-pic" and task == "ppl_govreport":
                    model_args["gpu_memory_utilization"] = POOLED_GPU_MEMORY
                run = EvalSettings(model=engine, model_args=model_args, tasks=[task])
                cells = [
                    PlanCell(task, str(n), (n,), (0,), scored_tokens=n - 1)
                    if task == "ppl_govreport"
                    else PlanCell(task, str(n), (n - ANSWER,), (ANSWER,))
                    for n in args.lengths
                ]
                sized, misfits = with_memory(cells, run, device)
                for cell in sized:
                    rows.append(
                        {
                            "model": name,
                            "engine": engine,
                            "task": cell.task,
                            "length": int(cell.length),
                            "gpu_memory_utilization": model_args.get("gpu_memory_utilization"),
                            "memory_bytes": cell.memory,
                            "fits": cell.fits,
                        }
                    )
                    print(
                        f"{name:13} {engine:8} {cell.task:13} {cell.length:>7}  {in_words(cell.memory):>9}  "
                        f"{'fits' if cell.fits else 'does not fit'}"
                    )
                for line in misfits:
                    print(f"  {line}")
                if misfits:
                    rows.append({"model": name, "engine": engine, "task": task, "does_not_fit": misfits})
    Path(args.output).write_text(
        json.dumps(
            {
                "date": time.strftime("%Y-%m-%d %H:%M"),
                "device": device.name,
                "device_bytes": device.size,
                "dtype": "bfloat16",
                "rows": rows,
            },
            indent=1,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
