"""Gemma 3 270M (a 32k window, sliding-window layers) scored past its window on the CPU through plain ``lch eval``:
PPL (or LongPPL, ``--task longppl_govreport``: the model its own evaluator, no key token cached, so the evaluator
runs) of one document of the Paul Graham essays joined, at each length, under NTK-aware PIC (s_rr 4), fp32. For each
length: ``lch plan``'s memory for the run, printed before it starts; the process's peak resident memory and wall
time as the run records them (``lch_cost``), the peak growth
predicted before the forward (``predicted_peak``: what ``check_fits`` compares with the memory available), the
memory ``lch plan`` planned for the run beside the recorded peak (``lch plan --against``: weights and the process's
libraries included), the PPL, and the load average before and after. Each run is a process of its own, one at a
time.

    python benchmarks/long_cpu_runs.py [--task ppl_govreport|longppl_govreport] [--lengths 16384 32768 65536 131072]

Before the masks were built per block of queries (harness/models/attention.py), this run was killed by the
operating system at 64k (19.6 GB resident after 45 s; a ``[T x T]`` mask and its float copy per sliding-window
layer), and at 16k / 32k its peak was 3.0 / over 7 GB. Writes benchmarks/results/long_cpu_runs.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def predicted_bytes(model_dir: str, tokens: int) -> int:
    """The peak growth ``check_fits`` predicts for one row of ``tokens`` on the CPU, from the config alone."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from harness.models.attention import use_blocked_masks
    from harness.models.device_sizing import predicted_peak

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_dir), dtype=torch.float32)
    use_blocked_masks(model)
    return predicted_peak(model, tokens, 1, None, "cpu")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=["ppl_govreport", "longppl_govreport"], default="ppl_govreport")
    parser.add_argument("--lengths", type=int, nargs="+", default=[16384, 32768, 65536, 131072])
    parser.add_argument("--essays", default=str(ROOT.parent / "shared" / "data" / "paul_graham_essays"))
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "long_cpu_runs.json"))
    args = parser.parse_args()
    model_dir = subprocess.run(
        [str(BIN / "lch"), "models", "path", "gemma3-270m"], check=True, capture_output=True, text=True
    ).stdout.strip()
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    work = Path(tempfile.mkdtemp(prefix="long-cpu-"))
    text = "\n\n".join(p.read_text(encoding="utf-8") for p in sorted(Path(args.essays).glob("*.txt")))
    data = work / "essays.jsonl"
    data.write_text(json.dumps({"report": text}) + "\n")
    output = Path(args.output)
    rows = json.loads(output.read_text())["rows"] if output.exists() else []
    for tokens in args.lengths:
        out = work / f"run-{tokens}"
        meta = {"data_files": str(data), "min_tokens": tokens, "max_tokens": tokens, "num_docs": 1}
        if args.task == "longppl_govreport":  # the model is its own evaluator; no key token cached: it runs
            meta.update(evaluator=model_dir, evaluator_dtype="float32", key_cache_dir=str(work / "keys"))
        run_args = [
            "--model",
            "hf-pic",
            "--model_args",
            f"pretrained={model_dir},pic=ntk,pic_ratio=4,dtype=float32,max_length=140000",
            "--tasks",
            args.task,
            "--metadata",
            json.dumps(meta),
        ]
        plan_file = work / f"plan-first-{tokens}.json"  # the plan, before the run
        subprocess.run([str(BIN / "lch"), "plan", *run_args, "--json", str(plan_file)], check=True, capture_output=True)
        first = json.loads(plan_file.read_text())
        print(
            f"{args.task} {tokens}: planned {first['totals']['memory'] / 2**30:.2f} GiB, "
            f"fits: {first['totals']['fits']}",
            flush=True,
        )
        load_before = os.getloadavg()
        start = time.perf_counter()
        done = subprocess.run(
            [str(BIN / "lch"), "eval", *run_args, "--batch_size", "1", "--output_path", str(out)],
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - start
        row = {
            "task": args.task,
            "tokens": tokens,
            "commit": commit,
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "exit": done.returncode,
            "wall_seconds": round(wall, 1),
            "planned_first_bytes": first["totals"]["memory"],
            "predicted_peak_growth_bytes": predicted_bytes(model_dir, tokens),
            "load_before": load_before,
            "load_after": os.getloadavg(),
        }
        if done.returncode == 0:
            results = json.loads(next(out.rglob("results_*.json")).read_text())
            scores = results["results"][args.task]
            row.update(
                {
                    key.split(",")[0]: value
                    for key, value in scores.items()
                    if key.split(",")[0] in ("ppl", "longppl", "ppl_nobos", "n_tokens", "n_key_tokens")
                }
            )
            row.update(
                peak_rss_bytes=results["lch_cost"]["peak_memory"]["bytes"],
                engine_seconds=results["lch_cost"]["tasks"][args.task]["seconds"],
            )
            planned = work / f"plan-{tokens}.json"
            subprocess.run(
                [str(BIN / "lch"), "plan", "--against", str(out), "--json", str(planned)],
                check=True,
                capture_output=True,
            )
            row["plan_memory"] = json.loads(planned.read_text())["against"]["memory"]
        else:
            row["last_line"] = (done.stderr.strip().splitlines() or [""])[-1]
        print(json.dumps(row), flush=True)
        rows = [r for r in rows if (r.get("task", "ppl_govreport"), r["tokens"]) != (args.task, tokens)] + [row]
        output.write_text(
            json.dumps(
                {
                    "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                    "model": "gemma3-270m, pic=ntk, pic_ratio=4, fp32",
                    "documents": "one document of the essays joined",
                    "rows": rows,
                },
                indent=1,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
