"""LongPPL: ours vs the reference package ``longppl`` 0.3.0 — wall time, peak memory, results.

Tiny random-init Llamas (vocab 32000, hidden 256, 2 layers; evaluator and evaluated differ by seed),
synthetic reports of 8k and 16k evaluator tokens, K = 4096, d = 1024. Each (implementation, length)
runs in its own fresh process, ``--repeats`` times alternating with the other implementation (reference, ours,
reference, ours, ...: a load that comes and goes hits both alike), the median kept and every run recorded with the
load average before it; peak memory = the growth of the process's peak RSS during the computation
(CPU) or ``torch.cuda.max_memory_allocated`` (GPU). Thresholds alpha = 0.001, beta = -100 make many
tokens key tokens on random-init models, which exercises the numerics of every part.

    python benchmarks/longppl_vs_reference.py [--lengths 8192 16384] [--device cpu]

Prints a table and writes benchmarks/results/longppl_vs_reference.json.
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

SETTINGS = dict(trunc_len=4096, sliding_window=1024, alpha=0.001, beta=-100.0)


def build_models(folder: Path) -> tuple[Path, Path]:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from harness.data.synthetic import synthetic_reports
    from harness.models.tiny import train_tokenizer

    paths = (folder / "evaluator", folder / "evaluated")
    if all((p / "config.json").exists() for p in paths):
        return paths
    tokenizer = train_tokenizer(synthetic_reports(20, 400, seed=5), 512)
    for seed, path in zip((0, 1), paths):
        config = LlamaConfig(
            vocab_size=32000,
            hidden_size=256,
            intermediate_size=512,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=4,
            max_position_embeddings=32768,
            bos_token_id=1,
            eos_token_id=2,
            pad_token_id=0,
        )
        torch.manual_seed(seed)
        LlamaForCausalLM(config).save_pretrained(path)
        tokenizer.save_pretrained(path)
    return paths


def text_of(tokenizer, n_tokens: int) -> str:
    from harness.data.synthetic import synthetic_report

    text = synthetic_report(n_tokens, seed=n_tokens)  # words >= tokens / 1.5: long enough, then cut
    enc = tokenizer(text, return_offsets_mapping=True)
    return text[: enc["offset_mapping"][n_tokens - 1][1]]


def time_decoders(*models) -> list[float]:
    """Wrap each model's decoder (the transformer body, without the LM head) so that the seconds its forwards take
    add up in the returned one-element list: the rest of a run is the head, the log-softmax and the bookkeeping."""
    import torch

    spent = [0.0]
    for model in models:
        decoder = model.get_decoder()
        forward = decoder.forward

        def timed(*args, _forward=forward, **kwargs):
            start = time.perf_counter()
            out = _forward(*args, **kwargs)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            spent[0] += time.perf_counter() - start
            return out

        decoder.forward = timed
    return spent


def worker(impl: str, folder: str, n_tokens: int, device: str) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(2) if device == "cpu" else None
    ev_path, model_path = Path(folder) / "evaluator", Path(folder) / "evaluated"
    ev = AutoModelForCausalLM.from_pretrained(ev_path, dtype=torch.float32).to(device).eval()
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).to(device).eval()
    tok = AutoTokenizer.from_pretrained(model_path)
    text = text_of(tok, n_tokens)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    body = time_decoders(ev, model)
    start = time.perf_counter()
    if impl == "ours":
        from harness.longppl.estimator import compute_longppl

        out = compute_longppl(text, model, tok, ev, tok, **SETTINGS)
    else:
        from longppl.longppl import compute_longppl as reference

        out = reference(text, model, ev, tok, tok, **SETTINGS)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base
    seconds = time.perf_counter() - start
    result = {k: (float(v) if v is not None else None) for k, v in out.items()}
    print(
        json.dumps(
            {
                "impl": impl,
                "tokens": n_tokens,
                "seconds": seconds,
                "body_seconds": body[0],
                "peak_bytes": peak,
                "result": result,
            }
        )
    )


def median_run(runs: list[dict]) -> dict:
    """The run of median wall time (the upper median of an even count)."""
    return sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[8192, 16384])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=5, help="runs per cell, alternating; the median is kept")
    parser.add_argument("--models", default=str(Path.home() / ".cache" / "lch" / "bench-longppl"))
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "longppl_vs_reference.json"))
    parser.add_argument("--worker", nargs=2, metavar=("IMPL", "TOKENS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], args.models, int(args.worker[1]), args.device)
        return
    build_models(Path(args.models))
    rows = []
    for n_tokens in args.lengths:
        tries: dict[str, list[dict]] = {"reference": [], "ours": []}
        for _ in range(args.repeats):
            for impl in ("reference", "ours"):
                load = os.getloadavg()[0]
                proc = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--worker",
                        impl,
                        str(n_tokens),
                        "--models",
                        args.models,
                        "--device",
                        args.device,
                    ],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                tries[impl].append({**json.loads(proc.stdout.strip().splitlines()[-1]), "load_before": load})
        runs = {impl: median_run(t) for impl, t in tries.items()}
        ours, ref = runs["ours"], runs["reference"]
        rel = {
            k: abs(ours["result"][k] - ref["result"][k]) / abs(ref["result"][k])
            for k in ("longppl", "ppl")
            if ref["result"][k]
        }
        rows.append(
            {
                "tokens": n_tokens,
                "seconds": {"ours": ours["seconds"], "reference": ref["seconds"]},
                "peak_mib": {"ours": ours["peak_bytes"] / 2**20, "reference": ref["peak_bytes"] / 2**20},
                "time_ratio": ours["seconds"] / ref["seconds"],
                "memory_ratio": ours["peak_bytes"] / ref["peak_bytes"],
                "results": {"ours": ours["result"], "reference": ref["result"]},
                "relative_difference": rel,
                "body_seconds": {"ours": ours["body_seconds"], "reference": ref["body_seconds"]},
                "runs": {
                    impl: [
                        {
                            "seconds": t["seconds"],
                            "body_seconds": t["body_seconds"],
                            "peak_mib": t["peak_bytes"] / 2**20,
                            "load_before": t["load_before"],
                        }
                        for t in t_list
                    ]
                    for impl, t_list in tries.items()
                },
            }
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    import platform
    import time as clock

    import torch

    out.write_text(
        json.dumps(
            {
                "date": clock.strftime("%Y-%m-%d"),
                "device": args.device,
                "machine": platform.processor() or platform.machine(),
                "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                "threads": 2,
                "repeats": args.repeats,
                "statistic": "median of alternating runs",
                "settings": SETTINGS,
                "rows": rows,
            },
            indent=2,
        )
    )
    print(f"LongPPL, ours vs longppl 0.3.0 (K=4096, d=1024) on {args.device}")
    print(
        f"{'tokens':>7} {'time ours/ref (s)':>20} {'ratio':>6} {'peak MiB ours/ref':>20} {'ratio':>6} {'n_key':>6} "
        f"{'max rel diff':>12}"
    )
    for r in rows:
        print(
            f"{r['tokens']:>7} {r['seconds']['ours']:>9.1f}/{r['seconds']['reference']:<10.1f} {r['time_ratio']:>6.2f} "
            f"{r['peak_mib']['ours']:>9.0f}/{r['peak_mib']['reference']:<10.0f} {r['memory_ratio']:>6.2f} "
            f"{int(r['results']['ours']['n_key_token'] or 0):>6d} {max(r['relative_difference'].values()):>12.2e}"
        )
    print(f"written to {out}")


if __name__ == "__main__":
    main()
