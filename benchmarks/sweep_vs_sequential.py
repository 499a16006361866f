"""A real sweep through ``lch sweep`` beside the same cells run one ``lch eval`` at a time: SmolLM2-135M-Instruct and
Gemma 3 270M x three PIC variants (vanilla, NTK-aware s_rr 4, Dynamic PIC s_cr 2) x RULER ``niah_single_1`` + PPL
at 4k tokens (fp32, CPU). Prints and saves the wall time of each way and their ratio (the target: the sweep within
1.1x of the sequential wall time on a 2-core machine, where parallelism cannot help: what is left is Ray's own
cost), Ray's own seconds (starting and stopping the local Ray; per cell: placing and starting its task, and
returning its outcome), the rest of the sweep's own seconds (planning its cells, the reports), and whether the two
leaderboards are equal (dates apart).

    python benchmarks/sweep_vs_sequential.py [--num-samples 2] [--lengths 4096] [--output FILE]

The sequential runs come first, then the sweep, each cell in a process of its own both ways; the essays are read
from ../shared/data/paul_graham_essays (``--essays``). Writes benchmarks/results/sweep_vs_sequential.json.
"""

from __future__ import annotations

import argparse
import csv
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
VARIANTS = {
    "vanilla": {"pic": "none"},
    "ntk4": {"pic": "ntk", "pic_ratio": 4},
    "dynamic2": {"pic": "dynamic", "pic_ratio": 2},
}


def lch(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "lch"), *args], cwd=cwd, capture_output=True, text=True)


def board(runs: Path, out: Path, cwd: Path) -> list[str]:
    """The leaderboard of ``runs`` as sorted rows without the date column."""
    done = lch("leaderboard", str(runs), "-o", str(out), "--all", cwd=cwd)
    if done.returncode:
        raise SystemExit(done.stderr)
    return sorted(
        json.dumps({k: v for k, v in row.items() if k != "date"}, sort_keys=True) for row in csv.DictReader(out.open())
    )


def ray_overheads(cells: list[dict]) -> dict[str, dict[str, float]]:
    """Per cell, Ray's own seconds: ``start`` from when its node could take it (the sweep handed it over, or the
    node's previous cell ended) to its task's body beginning; ``gather`` from the body's end to its outcome here."""
    out, free = {}, {}
    for cell in sorted(cells, key=lambda c: c["outcome"]["began"]):
        outcome = cell["outcome"]
        ready = max(cell["submitted"], free.get(outcome["node"], 0.0))
        out[cell["label"]] = {
            "start": round(outcome["began"] - ready, 3),
            "gather": round(cell["gathered"] - outcome["ended"], 3),
        }
        free[outcome["node"]] = outcome["ended"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[4096])
    parser.add_argument("--num-samples", type=int, default=2)
    parser.add_argument("--essays", default=str(ROOT.parent / "shared" / "data" / "paul_graham_essays"))
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "sweep_vs_sequential.json"))
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sweep-bench-"))
    text = "\n\n".join(p.read_text(encoding="utf-8") for p in sorted(Path(args.essays).glob("*.txt")))
    (work / "essays.jsonl").write_text(json.dumps({"report": text}) + "\n")
    length = max(args.lengths)
    spec = {
        "engine": "hf-pic",
        "models": ["smollm2-135m", "gemma3-270m"],
        "model_args": {"device": "cpu", "dtype": "float32", "max_length": length + 512},
        "variants": VARIANTS,
        "tasks": ["lch_ruler_niah_single_1", "ppl_govreport"],
        "lengths": args.lengths,
        "metadata": {
            "num_samples": args.num_samples,
            "essays": args.essays,
            "data_files": "essays.jsonl",
            "min_tokens": length,
            "max_tokens": length,
            "num_docs": 1,
        },
    }
    (work / "sweep.yaml").write_text(json.dumps(spec, indent=1))
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    # the cells' command lines, as the sweep makes them (planned once here, which also builds the RULER samples)
    dry = lch("sweep", "sweep.yaml", "--output", str(work / "dry"), "--dry-run", cwd=work)
    if dry.returncode:
        raise SystemExit(dry.stderr)
    from harness.cli.sweep import resolve_model
    from harness.sweep.spec import expand, load_spec

    cells = expand(load_spec(work / "sweep.yaml"), "sweep.yaml", resolve_model)
    load_before = os.getloadavg()
    start = time.perf_counter()
    for cell in cells:
        done = lch(
            "eval", *cell.argv(), "--output_path", str(work / "sequential" / cell.label.replace(" ", "_")), cwd=work
        )
        if done.returncode:
            raise SystemExit(f"{cell.label}: {done.stderr[-2000:]}")
        print(f"sequential: {cell.label} done at {time.perf_counter() - start:.0f} s", flush=True)
    sequential = time.perf_counter() - start
    load_between = os.getloadavg()
    start = time.perf_counter()
    done = lch("sweep", "sweep.yaml", "--output", str(work / "swept"), cwd=work)
    swept = time.perf_counter() - start
    load_after = os.getloadavg()
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    record = json.loads((work / "swept" / "sweep.json").read_text())
    overheads = ray_overheads(record["cells"])
    equal = board(work / "sequential", work / "seq.csv", work) == board(work / "swept" / "cells", work / "sw.csv", work)
    row = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "commit": commit,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "cells": len(cells),
        "lengths": args.lengths,
        "num_samples": args.num_samples,
        "sequential_seconds": round(sequential, 1),
        "sweep_seconds": round(swept, 1),
        "sweep_over_sequential": round(swept / sequential, 3),
        "cell_seconds": {c["label"]: round(c["outcome"]["seconds"], 1) for c in record["cells"]},
        "ray_start_stop_seconds": record["ray_seconds"],
        "ray_overhead_per_cell_seconds": overheads,
        "rest_seconds": round(
            swept
            - sum(c["outcome"]["seconds"] for c in record["cells"])
            - record["ray_seconds"]
            - sum(sum(v.values()) for v in overheads.values()),
            1,
        ),
        "leaderboards_equal": equal,
        "load_before": load_before,
        "load_between": load_between,
        "load_after": load_after,
    }
    print(json.dumps(row, indent=1))
    Path(args.output).write_text(json.dumps(row, indent=1) + "\n")


if __name__ == "__main__":
    main()
