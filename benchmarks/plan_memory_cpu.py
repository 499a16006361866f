"""``lch plan``'s memory against measurement on the CPU, hf-pic: per model and length one ``lch eval`` run (a process of
its own, one at a time) of a generation cell (RULER ``niah_single_1``, one sample, its 128-token answer budget) and a
scoring cell (``ppl_govreport``, one document of the Paul Graham essays joined), then ``lch plan --against`` the run:
the memory planned for the run's largest cell beside the peak resident memory the run recorded (``lch_cost``), and
their ratio (the issue's band: 0.95x to 1.25x).

    python benchmarks/plan_memory_cpu.py [--models smollm2-135m gemma3-270m] [--lengths 4096 16384] [--essays DIR]

Writes benchmarks/results/plan_memory_cpu.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def run_cell(model_dir: str, kind: str, tokens: int, data: Path, out: Path) -> dict:
    """One ``lch eval`` of ``kind`` (``generation`` / ``scoring``) at ``tokens``, then the plan against it."""
    if kind == "generation":
        tasks, meta = "lch_ruler_niah_single_1", {"lengths": [tokens], "num_samples": 1, "essays": "synthetic"}
    else:
        tasks, meta = "ppl_govreport", {"data_files": str(data), "min_tokens": tokens, "max_tokens": tokens,
                                        "num_docs": 1}
    args = f"pretrained={model_dir},dtype=float32,pic=ntk,pic_ratio=4,max_length={tokens + 1024}"
    load = os.getloadavg()
    start = time.perf_counter()
    done = subprocess.run([str(BIN / "lch"), "eval", "--model", "hf-pic", "--model_args", args, "--tasks", tasks,
                           "--metadata", json.dumps(meta), "--batch_size", "1", "--output_path", str(out)],
                          capture_output=True, text=True)
    row = {"kind": kind, "tokens": tokens, "exit": done.returncode,
           "wall_seconds": round(time.perf_counter() - start, 1), "load_before": load, "load_after": os.getloadavg()}
    if done.returncode != 0:
        return {**row, "last_line": (done.stderr.strip().splitlines() or [""])[-1]}
    planned = out.with_suffix(".plan.json")
    subprocess.run([str(BIN / "lch"), "plan", "--against", str(out), "--json", str(planned)], check=True,
                   capture_output=True)
    return {**row, **json.loads(planned.read_text())["against"]["memory"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["smollm2-135m", "gemma3-270m"])
    parser.add_argument("--lengths", type=int, nargs="+", default=[4096, 16384])
    parser.add_argument("--kinds", nargs="+", default=["generation", "scoring"])
    parser.add_argument("--essays", default=str(ROOT.parent / "shared" / "data" / "paul_graham_essays"))
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "plan_memory_cpu.json"))
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="plan-memory-"))
    data = work / "essays.jsonl"
    text = "\n\n".join(p.read_text(encoding="utf-8") for p in sorted(Path(args.essays).glob("*.txt")))
    data.write_text(json.dumps({"report": text}) + "\n")
    rows = []
    for name in args.models:
        model_dir = subprocess.run([str(BIN / "lch"), "models", "path", name], check=True, capture_output=True,
                                   text=True).stdout.strip()
        for kind in args.kinds:
            for tokens in args.lengths:
                row = {"model": name, **run_cell(model_dir, kind, tokens, data, work / f"{name}-{kind}-{tokens}")}
                print(json.dumps(row), flush=True)
                rows.append(row)
    Path(args.output).write_text(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M"), "machine":
                                             f"{os.uname().machine}, {os.cpu_count()} cores", "rows": rows},
                                            indent=1) + "\n")


if __name__ == "__main__":
    main()
