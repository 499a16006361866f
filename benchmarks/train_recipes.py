"""Each ``lch train`` recipe on a real model, against plain CE on the same data: steps/s, peak memory,
held-out loss before / after.

Every run is a fresh process (so its peak RSS is its own) training a LoRA adapter for ``--steps`` optimiser
steps, batch 1. The reference of each recipe is plain cross-entropy through the same Trainer on data of
the same shape:

* ``ntk`` / ``dynamic`` PIC-SFT: against ``sft`` (same instruction rows, same max length);
* ``longce``: against plain CE on the same 1024-token chunks (LongCE with K >= the chunk length gives every
  token weight 1 and skips the short-context pass: that is plain CE);
* ``lsm-reg``: against plain CE on chunks of L + delta tokens;
* ``longrecipe``: against plain CE on chunks of ``train_length`` tokens (the length of its examples).

Data: HelloBench's heuristic-text-generation generations (instruction + long answer) and the Paul Graham
essays from ``../shared/data`` (12 essays). The learning rate is raised to 2e-4 for these short CPU runs.

    python benchmarks/train_recipes.py [--model DIR] [--steps 16] [--only sft,dynamic]

Writes benchmarks/results/train_recipes.json (and prints the table).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
RESULTS = ROOT / "benchmarks" / "results" / "train_recipes.json"

COMMON = {"lr": 2e-4, "warmup": 0.1, "save_steps": 1000, "log_steps": 1, "progress": False}
INSTR = {"max_length": 768, "heldout": 0.15}
TEXT = {"heldout": 0.17}
RUNS = {  # name -> (recipe options, data kind, reference run)
    "sft": ({"recipe": "sft", **INSTR}, "instr", None),
    "ntk": ({"recipe": "pic-sft", "pic": "ntk", "pic_ratio": 16.0, **INSTR}, "instr", "sft"),
    "dynamic": (
        {
            "recipe": "pic-sft",
            "pic": "dynamic",
            "pic_ratio": 2.0,
            "pic_initial": 10,
            "pic_recent": 200,
            "segment_length": 256,
            **INSTR,
        },
        "instr",
        "sft",
    ),
    "ce_1024": ({"recipe": "longce", "seq_len": 1024, "short_context": 1024, **TEXT}, "text", None),
    "longce": (
        {"recipe": "longce", "seq_len": 1024, "short_context": 512, "sliding_window": 256, **TEXT},
        "text",
        "ce_1024",
    ),
    "ce_640": ({"recipe": "longce", "seq_len": 640, "short_context": 640, **TEXT}, "text", None),
    "lsm-reg": ({"recipe": "lsm-reg", "context_length": 512, "delta": 128, **TEXT}, "text", "ce_640"),
    "ce_768": ({"recipe": "longce", "seq_len": 768, "short_context": 768, **TEXT}, "text", None),
    "longrecipe": (
        {
            "recipe": "longrecipe",
            "target_length": 16384,
            "rope_base": 400000.0,
            "train_length": 768,
            "max_length": 2048,
            **TEXT,
        },
        "text",
        "ce_768",
    ),
}


def data_files(work: Path) -> dict[str, Path]:
    """The instruction rows (first 40 HelloBench generations of Suri-7B) and 12 essays as JSON Lines."""
    work.mkdir(parents=True, exist_ok=True)
    instr, text = work / "instructions.jsonl", work / "essays.jsonl"
    rows = [
        json.loads(line) for line in (SHARED / "hellobench" / "generations_suri_7b_htg.jsonl").read_text().splitlines()
    ]
    instr.write_text(
        "".join(json.dumps({"instruction": r["instruction"], "response": r["response"]}) + "\n" for r in rows[:40])
    )
    essays = sorted((SHARED / "paul_graham_essays").glob("*.txt"), key=lambda p: -p.stat().st_size)[:12]
    text.write_text("".join(json.dumps({"text": p.read_text(encoding="utf-8")}) + "\n" for p in essays))
    return {"instr": instr, "text": text}


def child(name: str, model: str, steps: int, work: Path) -> None:
    from harness.train.config import TrainConfig
    from harness.train.trainer import train_recipe

    options, kind, _ = RUNS[name]
    files = data_files(work)
    cfg = TrainConfig.for_recipe(
        model=model, data=str(files[kind]), output=str(work / name), max_steps=steps, **{**COMMON, **options}
    )
    start = time.perf_counter()
    summary = train_recipe(cfg)
    summary["wall_seconds"] = round(time.perf_counter() - start, 1)
    summary["peak_rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3)
    print("RESULT " + json.dumps(summary))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="HF model folder (default: SmolLM2-135M-Instruct from the registry)")
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--only", help="comma-separated run names")
    parser.add_argument("--work", default="/tmp/lch-train-bench")
    parser.add_argument("--table-only", action="store_true", help="rebuild the table from the saved runs")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.model is None:
        from harness.models.fetch import fetch_model

        args.model = str(fetch_model("smollm2-135m"))
    work = Path(args.work)
    if args.child:
        child(args.child, args.model, args.steps, work)
        return
    names = [] if args.table_only else args.only.split(",") if args.only else list(RUNS)
    previous = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    runs = dict(previous.get("runs", {}))
    for name in names:
        shutil.rmtree(work / name, ignore_errors=True)
        done = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                name,
                "--model",
                args.model,
                "--steps",
                str(args.steps),
                "--work",
                str(work),
            ],
            capture_output=True,
            text=True,
        )
        line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if done.returncode != 0 or line is None:
            sys.exit(f"{name} failed:\n{done.stderr[-3000:]}")
        runs[name] = json.loads(line[len("RESULT ") :])
        print(f"{name}: done in {runs[name]['wall_seconds']} s", flush=True)
    table = []
    for name, (_, _, ref) in RUNS.items():
        if name not in runs:
            continue
        r = runs[name]
        variant = "plain CE (LongCE with K = seq_len: weights 1)" if name.startswith("ce_") else r["variant"]
        row = {
            "run": name,
            "variant": variant,
            "steps": r["steps"],
            "steps_per_s": r["steps_per_second"],
            "peak_rss_gb": r["peak_rss_gb"],
            "heldout_before": r["heldout_loss_before"],
            "heldout_after": r["heldout_loss_after"],
            "train_s": r["train_seconds"],
            "reference": ref,
        }
        if ref and ref in runs:
            row["time_ratio_vs_reference"] = round(runs[ref]["steps_per_second"] / r["steps_per_second"], 3)
            row["memory_ratio_vs_reference"] = round(r["peak_rss_gb"] / runs[ref]["peak_rss_gb"], 3)
        table.append(row)
    out = {
        "machine": f"{platform.machine()} {os.cpu_count()} cores, torch {__import__('torch').__version__}",
        "model": args.model,
        "steps": args.steps,
        "settings": {"common": COMMON, "runs": {k: v[0] for k, v in RUNS.items()}},
        "table": table,
        "runs": runs,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(
        f"{'run':<11} {'steps/s':>8} {'x ref time':>10} {'RSS GB':>7} {'x ref mem':>9} {'held-out before -> after':>26}"
    )
    for row in table:
        ratio = row.get("time_ratio_vs_reference")
        mem = row.get("memory_ratio_vs_reference")
        print(
            f"{row['run']:<11} {row['steps_per_s']:>8.4f} {('' if ratio is None else f'{ratio:.2f}'):>10} "
            f"{row['peak_rss_gb']:>7.2f} {('' if mem is None else f'{mem:.2f}'):>9} "
            f"{row['heldout_before']:>12.4f} -> {row['heldout_after']:.4f}"
        )
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
