"""How far the same checkpoint's gated metrics move when nothing but the numerics changes, and whether `lch regress`
with a baseline made as documented (no tolerance given) passes those re-runs and fails a damaged checkpoint.

    python benchmarks/gate_noise.py [--model smollm2-135m] [--threads 2 1] [--batch-sizes 1 3] [--essays DIR]

Runs ``lch eval --model hf-pic`` on ``ppl_govreport`` and ``longppl_govreport`` (the model as its own evaluator) over
``--num-docs`` essays cut to 2048 tokens: once as the reference (the first thread count, batch size 1), then with
each other thread count (``OMP_NUM_THREADS``) and each other batch size, then on a damaged copy of the model (every
weight matrix plus Gaussian noise of ``--damage`` times its own standard deviation). Prints and saves
(``benchmarks/results/gate_noise.json``) each re-run's largest relative change per metric and the gate's exit code
against ``lch regress <reference> --update-baseline`` (defaults: the floor ``NUMERIC_NOISE`` of
``harness/reporting/baseline.py``), with the load average.
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
sys.path.insert(0, str(ROOT))


def damaged_copy(model: Path, out: Path, scale: float) -> Path:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    net = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in net.parameters():
            if parameter.dim() == 2:
                parameter.add_(torch.randn(parameter.shape, generator=generator) * parameter.std() * scale)
    net.save_pretrained(out)
    AutoTokenizer.from_pretrained(model).save_pretrained(out)
    return out


def evaluate(model: Path, folder: Path, meta: dict, threads: int, batch: int) -> tuple[dict, float]:
    command = [
        sys.executable,
        "-m",
        "harness.cli",
        "eval",
        "--model",
        "hf-pic",
        "--model_args",
        f"pretrained={model},dtype=float32,max_length=4096",
        "--device",
        "cpu",
        "--batch_size",
        str(batch),
        "--tasks",
        "ppl_govreport,longppl_govreport",
        "--metadata",
        json.dumps(meta),
        "--output_path",
        str(folder),
    ]
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env={**os.environ, "OMP_NUM_THREADS": str(threads)})
    seconds = time.perf_counter() - start
    results = json.loads(sorted(folder.rglob("results_*.json"))[-1].read_text())["results"]
    values = {
        f"{task}/{key.split(',')[0]}": value
        for task, metrics in results.items()
        for key, value in metrics.items()
        if key.endswith(",none") and "_stderr" not in key and isinstance(value, (int, float))
    }
    return values, seconds


def gate(run: Path, baseline: Path) -> int:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "regress", str(run), "--baseline", str(baseline)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ).returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--num-docs", type=int, default=3)
    parser.add_argument("--damage", type=float, default=0.05)
    parser.add_argument(
        "--essays", default=os.environ.get("LCH_ESSAYS", str(ROOT.parent / "shared" / "data" / "paul_graham_essays"))
    )
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "gate_noise.json"))
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from harness.models.fetch import fetch_model

    model = fetch_model(args.model)
    meta = {
        "data_files": args.essays,
        "min_tokens": 2048,
        "max_tokens": 2048,
        "num_docs": args.num_docs,
        "evaluator": str(model),
        "trunc_len": 1024,
        "sliding_window": 512,
    }
    load = {"before": os.getloadavg()}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        reference, seconds = evaluate(model, work / "reference", meta, args.threads[0], args.batch_sizes[0])
        baseline = work / "baseline.json"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "harness.cli",
                "regress",
                str(work / "reference"),
                "--baseline",
                str(baseline),
                "--update-baseline",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        gated = sorted(json.loads(baseline.read_text())["metrics"])
        rows = [
            {
                "run": f"reference: {args.threads[0]} threads, batch {args.batch_sizes[0]}",
                "seconds": seconds,
                "values": {m: reference[m] for m in gated},
            }
        ]
        variants = [(t, args.batch_sizes[0]) for t in args.threads[1:]] + [
            (args.threads[0], b) for b in args.batch_sizes[1:]
        ]
        for threads, batch in variants:
            folder = work / f"t{threads}-b{batch}"
            values, seconds = evaluate(model, folder, meta, threads, batch)
            rows.append(
                {
                    "run": f"{threads} threads, batch {batch}",
                    "seconds": seconds,
                    "relative_change": {m: abs(values[m] - reference[m]) / abs(reference[m]) for m in gated},
                    "gate_exit": gate(folder, baseline),
                }
            )
        broken = damaged_copy(model, work / "damaged-model", args.damage)
        values, seconds = evaluate(broken, work / "damaged", meta, args.threads[0], args.batch_sizes[0])
        rows.append(
            {
                "run": f"damaged copy (weights + {args.damage:g} x their std of noise)",
                "seconds": seconds,
                "relative_change": {m: (values[m] - reference[m]) / abs(reference[m]) for m in gated},
                "gate_exit": gate(work / "damaged", baseline),
            }
        )
    load["after"] = os.getloadavg()
    from harness.reporting.baseline import NUMERIC_NOISE

    result = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "model": args.model,
        "numeric_noise_floor": NUMERIC_NOISE,
        "load_average": load,
        "rows": rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    for row in rows:
        changes = row.get("relative_change")
        print(
            f"{row['run']:<52} {row['seconds']:6.1f} s  "
            + (
                "reference"
                if changes is None
                else "max |rel change| "
                + " ".join(f"{m} {v:+.2e}" for m, v in changes.items())
                + f"  gate exit {row['gate_exit']}"
            )
        )
    print(
        f"floor {NUMERIC_NOISE:g}; load average {load['before'][0]:.2f} -> {load['after'][0]:.2f}; written to "
        f"{args.out}"
    )


if __name__ == "__main__":
    main()
