"""Long documents on the CPU through the code path a GPU takes: PPL (``score_tokens``) and LongPPL
(``compute_longppl``) of one document at 8k, 16k and 32k tokens, each in a process of its own, with the growth of the
process's peak memory. Bounded memory means linear in the document's length: no ``[tokens x vocab]`` logits and no
``tokens x tokens`` attention scores (the head and log-softmax run in chunks of 2^23 logits; the CPU's attention
kernel keeps memory linear).

    python benchmarks/longppl_long_cpu.py [--lengths 8192 16384 32768]

The models are the tiny random Llamas of benchmarks/longppl_vs_reference.py (vocabulary 32,000, hidden 256, 2 layers,
32k positions; evaluator and evaluated differ by seed), K = 4096, d = 1024. Beside each measured growth: what a
``[tokens x vocab]`` fp32 logit tensor of that length alone would take. Writes
benchmarks/results/longppl_long_cpu.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from longppl_vs_reference import SETTINGS, build_models, text_of  # noqa: E402  (after the path)

VOCAB = 32000


def worker(folder: str, n_tokens: int, what: str) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(2)
    ev = AutoModelForCausalLM.from_pretrained(Path(folder) / "evaluator", dtype=torch.float32).eval()
    model = AutoModelForCausalLM.from_pretrained(Path(folder) / "evaluated", dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(Path(folder) / "evaluated")
    text = text_of(tok, n_tokens)
    ids = tok(text, return_tensors="pt", add_special_tokens=False)["input_ids"][:, :n_tokens]
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    start = time.perf_counter()
    if what == "ppl":
        from harness.models.scoring import score_tokens

        logprobs = score_tokens(model, ids, torch.ones_like(ids))[0]
        value = float(torch.exp(-logprobs.double().mean()))
    else:
        from harness.longppl.estimator import compute_longppl

        value = compute_longppl(text, model, tok, ev, tok, **SETTINGS)["longppl"]
    seconds = time.perf_counter() - start
    growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base
    print(
        json.dumps(
            {
                "what": what,
                "tokens": int(ids.shape[1]),
                "seconds": round(seconds, 2),
                "peak_growth_bytes": growth,
                "value": value,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[8192, 16384, 32768])
    parser.add_argument("--models", default=str(Path.home() / ".cache" / "lch" / "bench-longppl"))
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "longppl_long_cpu.json"))
    parser.add_argument("--worker", nargs=2, metavar=("WHAT", "TOKENS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.models, int(args.worker[1]), args.worker[0])
        return
    build_models(Path(args.models))
    rows = []
    load_before = os.getloadavg()
    for n in args.lengths:
        for what in ("ppl", "longppl"):
            done = subprocess.run(
                [sys.executable, __file__, "--models", args.models, "--worker", what, str(n)],
                capture_output=True,
                text=True,
                check=True,
            )
            row = json.loads(done.stdout.strip().splitlines()[-1])
            row["full_logits_bytes"] = n * VOCAB * 4
            rows.append(row)
            print(
                f"{what:8} {n:6} tokens: {row['seconds']:7.1f} s, peak +{row['peak_growth_bytes'] / 2**20:7.0f} MiB "
                f"(full fp32 logits alone: {row['full_logits_bytes'] / 2**20:.0f} MiB)",
                flush=True,
            )
    Path(args.out).write_text(
        json.dumps(
            {
                "machine": f"{os.cpu_count()} CPU cores",
                "date": time.strftime("%Y-%m-%d"),
                "load_average_before": load_before,
                "load_average_after": os.getloadavg(),
                "settings": SETTINGS,
                "rows": rows,
            },
            indent=1,
        )
        + "\n"
    )
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
