"""vllm-pic on a GPU, in one command: agreement with hf-pic for every PIC method (eager and CUDA graphs), Dynamic
PIC against Algorithm 1 at 4k-16k tokens, decode speed against vanilla vLLM and RULER niah samples/s at 32k
against hf-pic. One JSON with the device's name, vLLM's version and every number.

    python benchmarks/vllm_cuda.py [--model gemma3-270m] [--dtypes float32 bfloat16] [--methods none naive ntk dynamic]
                                   [--modes eager graphs] [--only agree speed] [--tasks T1,T2] [--out DIR] [--small]

On a lent GPU machine (15 minutes of device time, at most 10 a call) run it as two calls on the warm machine:
``--only agree`` (fp32, four methods, eager and graphs: 12 ``lch eval`` runs) and ``--only speed``; each writes
``vllm_cuda_<parts>.json`` under ``--out``; ``--dtypes bfloat16 --methods none dynamic --modes eager`` after them if
time is left.

``agree`` (per dtype and method): ``lch eval`` once with hf-pic (``--device cuda:0``; Dynamic PIC as Algorithm 1,
``pic_impl=reference``) and once per mode with vllm-pic (``enforce_eager=True`` / ``False``: CUDA graphs) on
``ppl_govreport``, ``longppl_govreport`` (token log-probs), ``lch_ruler_niah_single_1`` and ``lch_babilong_qa1``
(greedy generations) at ``--lengths`` (Dynamic PIC's RULER at ``--dynamic-lengths``: 4k-16k), then ``lch agree``
on each pair; a vllm-pic run the engine refuses is recorded with its one-line reason. In fp32 the goal is identical
generations and log-probs within 1e-3 (Dynamic PIC: equal to Algorithm 1's tokens); in bf16 the agreement is
recorded.

``speed``: greedy decode tokens/s, batch 1, ``--new`` tokens after a ``--decode-prompt``-token essay prompt
(``(new - 1) / (t(new) - t(1))``, median of 3): vanilla vLLM and Dynamic PIC (s_cr 2, l_ic 4, l_rc 200), each eager
and under CUDA graphs (goal: Dynamic >= 0.85x vanilla in the same mode); RULER niah samples/s at ``--ruler-length``
through ``lch eval`` on each engine (``--ruler-pic``, NTK-aware s_rr 4 by default), from two runs of
``--ruler-samples`` samples (the difference of their wall times, so model load and start-up cancel; goal: vllm-pic >=
10x hf-pic).

The engine runs in this interpreter when it imports vLLM (a GPU machine), else in the CPU environment of
``lch vllm-env``. ``--small`` (a tiny trained Llama, 1k-2k tokens, fp32, eager) is how the script is checked on a
CPU; its numbers say nothing about a GPU. Lengths are multiples of 1024 (BABILong's).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

AGREE_TASKS = "ppl_govreport,longppl_govreport,lch_ruler_niah_single_1,lch_babilong_qa1"
RULER_TASK = "lch_ruler_niah_single_1"
PIC_ARGS = {
    "none": "",
    "naive": ",pic=naive,pic_ratio=2",
    "ntk": ",pic=ntk,pic_ratio=4",
    "dynamic": ",pic=dynamic,pic_ratio=2,pic_initial=4,pic_recent=200",
}

WORKER = r"""
import json, statistics, sys, time
from harness.engines.vllm_pic.lm import VLLMPicLM
from vllm import SamplingParams, TokensPrompt

spec = json.loads(sys.argv[1])
out = {}
for name, extra in spec["engines"].items():
    lm = VLLMPicLM(pretrained=spec["model"], dtype=spec["dtype"], max_model_len=spec["max_model_len"], seed=0, **extra)
    llm, prompt = lm.model, TokensPrompt(prompt_token_ids=spec["prompt"])

    def run(n):
        params = SamplingParams(max_tokens=n, min_tokens=n, temperature=0.0, ignore_eos=True)
        start = time.perf_counter()
        result = llm.generate([prompt], params, use_tqdm=False)
        return time.perf_counter() - start, list(result[0].outputs[0].token_ids)

    run(4)
    rates, tokens = [], None
    for _ in range(3):
        one, _ = run(1)
        total, tokens = run(spec["new"])
        rates.append((spec["new"] - 1) / (total - one))
    out[name] = {"decode_tokens_per_s": statistics.median(rates), "runs": rates, "tokens": tokens}
    del lm, llm
    import gc; gc.collect()
print("RESULT " + json.dumps(out))
"""


def device_name() -> str:
    import torch

    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"


class Engines:
    """Where ``lch`` runs for each engine: hf-pic here, vllm-pic here when vLLM imports, else in ``lch vllm-env``."""

    def __init__(self) -> None:
        self.local_vllm = importlib.util.find_spec("vllm") is not None
        self.env = None
        if not self.local_vllm:
            from harness.engines.vllm_pic.env import ensure_vllm_env

            self.env = ensure_vllm_env()

    def lch(self, engine: str, *args: str) -> tuple[list[str], dict]:
        if engine == "hf" or self.local_vllm:
            return [sys.executable, "-m", "harness.cli", *args], self.local_environ()
        return self.env.command(*args), self.env.environ()

    def python(self) -> tuple[str, dict]:
        if self.local_vllm:
            return sys.executable, self.local_environ()
        return str(self.env.python), self.env.environ()

    @staticmethod
    def local_environ() -> dict:
        """This process's environment, with vLLM's FlashInfer sampler off where FlashInfer is not installed (the
        wheels a lent GPU machine is carried, vllm_cuda_wheels.txt): vLLM 0.26's GPU model runner imports it."""
        environ = dict(os.environ)
        if importlib.util.find_spec("flashinfer") is None:
            environ.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")
        return environ


def timed(command: list[str], environ: dict, log: Path | None = None) -> tuple[int, float, list[str]]:
    """Exit code, wall seconds and the last lines of stderr of ``command`` that are not log chatter (INFO, WARNING,
    DEBUG): a refusal's one line, or the root cause of an engine that did not start. The whole stderr goes to
    ``log`` when given."""
    start = time.perf_counter()
    done = subprocess.run(command, env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(done.stderr)
    chatter = (" INFO ", " WARNING ", " DEBUG ", "INFO ", "WARNING ", "DEBUG ")
    lines = [line for line in done.stderr.splitlines() if line.strip() and not any(c in line[:60] for c in chatter)]
    return done.returncode, time.perf_counter() - start, lines[-25:]


DYNAMIC_SEQS = 16  # Dynamic PIC's max_num_seqs on a GPU: vllm-pic cannot size it before vLLM profiles the KV cache


def model_args(engine: str, model: Path, dtype: str, method: str, mode: str, max_len: int) -> str:
    args = f"pretrained={model},dtype={dtype}{PIC_ARGS[method]}"
    if engine == "hf":
        return args + f",max_length={max_len}" + (",pic_impl=reference" if method == "dynamic" else "")
    seqs = f",max_num_seqs={DYNAMIC_SEQS}" if method == "dynamic" else ""
    # token_logprobs tasks start a second (pooling) engine on the same GPU: vllm-pic refuses more than 0.45 each
    memory = "" if device_name().startswith("CPU") else ",gpu_memory_utilization=0.45"
    return args + f",max_model_len={max_len},enforce_eager={mode == 'eager'}{seqs}{memory}"


def metadata(args: argparse.Namespace, model: Path, lengths: list[int], samples: int) -> dict:
    doc = args.lengths[0]
    return {
        "data_files": str(args.essays),
        "min_tokens": doc,
        "max_tokens": doc,
        "num_docs": args.num_docs,
        "evaluator": str(model),
        "trunc_len": min(4096, doc // 2),
        "sliding_window": min(1024, doc // 4),
        "max_seq_lengths": lengths,
        "lengths": lengths,
        "num_samples": samples,
        "essays": str(args.essays),
        "source": "synthetic",
        "filler": str(args.essays),
    }


class Rows(list):
    """The result rows, written whole to ``target`` after each one: a call cut off by the device's time limit
    still returns every row finished before it."""

    def __init__(self, target: Path, setup: dict) -> None:
        super().__init__()
        self.target, self.setup = target, setup

    def append(self, row: dict) -> None:
        super().append(row)
        self.setup["load_average_after"] = os.getloadavg()
        temporary = self.target.with_suffix(".tmp")
        temporary.write_text(json.dumps({"setup": self.setup, "rows": list(self)}, indent=1) + "\n")
        temporary.replace(self.target)


def agree_part(args: argparse.Namespace, engines: Engines, model: Path, out: Path, rows: Rows) -> None:
    for dtype in args.dtypes:
        for method in args.methods:
            lengths = args.dynamic_lengths if method == "dynamic" else args.lengths
            max_len = max(lengths + args.lengths) + 256  # the documents whole in one engine pass (no windows)
            meta = json.dumps(metadata(args, model, lengths, args.num_samples))
            runs = {}
            for engine, mode in [("hf", "eager")] + [("vllm", mode) for mode in args.modes]:
                folder = out / "runs" / f"{dtype}-{method}-{engine}-{mode}"
                command, environ = engines.lch(
                    engine,
                    "eval",
                    "--model",
                    "hf-pic" if engine == "hf" else "vllm-pic",
                    "--model_args",
                    model_args(engine, model, dtype, method, mode, max_len),
                    "--tasks",
                    args.tasks,
                    "--metadata",
                    meta,
                    "--log_samples",
                    "--output_path",
                    str(folder),
                    *(["--device", args.hf_device, "--batch_size", "1"] if engine == "hf" else []),
                )
                print(f"{dtype} {method} {engine} {mode}: lch eval ...", flush=True)
                code, seconds, last = timed(command, environ, out / "logs" / f"{folder.name}.stderr")
                rows.append(
                    {
                        "part": "eval",
                        "dtype": dtype,
                        "method": method,
                        "engine": engine,
                        "mode": mode,
                        "exit_code": code,
                        "wall_s": round(seconds, 1),
                        **({"stderr_tail": last} if code else {}),
                    }
                )
                if code == 0:
                    runs[(engine, mode)] = folder
            for mode in args.modes:
                if ("hf", "eager") not in runs or ("vllm", mode) not in runs:
                    continue
                name = f"{dtype}-{method}-hf_vs_vllm-{mode}"
                done = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "harness.cli",
                        "agree",
                        str(runs[("hf", "eager")]),
                        str(runs[("vllm", mode)]),
                        "-o",
                        str(out / name),
                    ],
                    capture_output=True,
                    text=True,
                )
                report = json.loads((out / f"{name}.json").read_text())
                rows.append(
                    {
                        "part": "agree",
                        "dtype": dtype,
                        "method": method,
                        "mode": mode,
                        "exit_code": done.returncode,
                        "agrees": report["agrees"],
                        "tasks": {
                            t["task"]: {k: t[k] for k in ("exact_match", "max_logprob_diff", "max_value_diff")}
                            for t in report["tasks"]
                        },
                    }
                )
                print(f"  {name}: {'agree' if report['agrees'] else 'differ'}", flush=True)


def essay_prompt(model: Path, essays: Path, n_tokens: int) -> list[int]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    ids: list[int] = []
    for essay in sorted(essays.glob("*.txt")) * 50:
        ids += tokenizer(essay.read_text(encoding="utf-8"), add_special_tokens=False)["input_ids"]
        if len(ids) >= n_tokens:
            return ids[:n_tokens]
    raise SystemExit(f"vllm_cuda: the essays in {essays} give fewer than {n_tokens} tokens")


def speed_part(args: argparse.Namespace, engines: Engines, model: Path, out: Path, rows: Rows) -> None:
    python, environ = engines.python()
    dynamic = {"pic": "dynamic", "pic_ratio": 2.0, "pic_initial": 4, "pic_recent": 200}
    spec = {
        "model": str(model),
        "dtype": args.speed_dtype,
        "max_model_len": args.decode_prompt + args.new + 64,
        "prompt": essay_prompt(model, args.essays, args.decode_prompt),
        "new": args.new,
        "engines": {f"vanilla-{mode}": {"enforce_eager": mode == "eager"} for mode in args.modes}
        | {f"dynamic-{mode}": {**dynamic, "enforce_eager": mode == "eager", "max_num_seqs": 4} for mode in args.modes},
    }
    decode = {}
    for name, extra in spec["engines"].items():  # one process per engine: each gets the whole GPU
        print(f"decode: {name} ...", flush=True)
        one = {**spec, "engines": {name: extra}}
        done = subprocess.run([python, "-c", WORKER, json.dumps(one)], env=environ, capture_output=True, text=True)
        result = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        if done.returncode or not result:
            rows.append(
                {
                    "part": "decode",
                    "engine": name,
                    "exit_code": done.returncode,
                    "stderr_tail": done.stderr.strip().splitlines()[-25:],
                }
            )
            continue
        decode |= json.loads(result[0][len("RESULT ") :])
        row = decode[name]
        vanilla = decode.get("vanilla-" + name.split("-")[1])
        rows.append(
            {
                "part": "decode",
                "engine": name,
                "dtype": args.speed_dtype,
                "prompt": args.decode_prompt,
                "new": args.new,
                "decode_tokens_per_s": row["decode_tokens_per_s"],
                "runs": row["runs"],
                "vs_vanilla_same_mode": vanilla and row["decode_tokens_per_s"] / vanilla["decode_tokens_per_s"],
                "tokens_equal_vanilla_same_mode": vanilla and row["tokens"] == vanilla["tokens"],
                "tokens_equal_dynamic_eager": row["tokens"] == decode.get("dynamic-eager", {}).get("tokens"),
            }
        )
    length = args.ruler_length
    rates = {}
    for engine in ("vllm", "hf"):
        walls = []
        for samples in args.ruler_samples:
            folder = out / "runs" / f"ruler-{engine}-{samples}"
            meta = json.dumps(metadata(args, model, [length], samples))
            command, environ = engines.lch(
                engine,
                "eval",
                "--model",
                "hf-pic" if engine == "hf" else "vllm-pic",
                "--model_args",
                model_args(engine, model, args.speed_dtype, args.ruler_pic, "eager", length)
                if engine == "hf"
                else model_args(engine, model, args.speed_dtype, args.ruler_pic, args.modes[-1], length),
                "--tasks",
                RULER_TASK,
                "--metadata",
                meta,
                "--output_path",
                str(folder),
                *(["--device", args.hf_device, "--batch_size", str(args.hf_batch)] if engine == "hf" else []),
            )
            print(f"ruler {length} {engine} {samples} samples ...", flush=True)
            code, seconds, last = timed(command, environ, out / "logs" / f"{folder.name}.stderr")
            walls.append(seconds)
            if code:
                rows.append({"part": "ruler", "engine": engine, "exit_code": code, "stderr_tail": last})
                break
        else:
            (n1, n2), (t1, t2) = args.ruler_samples, walls
            rate = (n2 - n1) / (t2 - t1) if t2 > t1 else None  # None: the samples' time drowned in the noise
            rows.append(
                {
                    "part": "ruler",
                    "engine": engine,
                    "length": length,
                    "pic": args.ruler_pic,
                    "samples": args.ruler_samples,
                    "wall_s": walls,
                    "samples_per_s": rate,
                }
            )
            if rate is not None:
                rates[engine] = rate
    if len(rates) == 2:
        rows.append({"part": "ruler", "vllm_over_hf": rates["vllm"] / rates["hf"]})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="gemma3-270m", help="a name of `lch models list`, or a model folder")
    parser.add_argument("--dtypes", nargs="+", default=["float32"])
    parser.add_argument("--methods", nargs="+", default=list(PIC_ARGS), choices=list(PIC_ARGS))
    parser.add_argument("--modes", nargs="+", default=["eager", "graphs"], choices=["eager", "graphs"])
    parser.add_argument("--only", nargs="+", default=["agree", "speed"], choices=["agree", "speed"])
    parser.add_argument("--lengths", type=int, nargs="+", default=[4096])
    parser.add_argument("--dynamic-lengths", type=int, nargs="+", default=[4096, 8192, 16384])
    parser.add_argument("--num-samples", type=int, default=2)
    parser.add_argument("--num-docs", type=int, default=2)
    parser.add_argument("--decode-prompt", type=int, default=8192)
    parser.add_argument("--new", type=int, default=256)
    parser.add_argument("--speed-dtype", default="bfloat16")
    parser.add_argument("--ruler-length", type=int, default=32768)
    parser.add_argument("--ruler-samples", type=int, nargs=2, default=[4, 20])
    parser.add_argument("--ruler-pic", default="ntk", choices=list(PIC_ARGS))
    parser.add_argument("--hf-device", default="cuda:0")
    parser.add_argument("--hf-batch", type=int, default=4)
    parser.add_argument(
        "--essays",
        type=Path,
        default=Path(os.environ.get("LCH_ESSAYS", ROOT.parent / "shared" / "data" / "paul_graham_essays")),
    )
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "vllm_cuda")
    parser.add_argument(
        "--tasks",
        default=AGREE_TASKS,
        help="the agreement's tasks, comma-separated (a subset of the default to fit a device call)",
    )
    parser.add_argument("--small", action="store_true", help="toy sizes on a tiny trained Llama: checks the script")
    args = parser.parse_args()
    unknown = sorted(set(args.tasks.split(",")) - set(AGREE_TASKS.split(",")))
    if unknown:
        raise SystemExit(f"vllm_cuda: --tasks {','.join(unknown)}: not an agreement task; give some of {AGREE_TASKS}")
    if args.small:  # a tiny model finds no key token for LongPPL: the plumbing is what is checked
        args.tasks = ",".join(t for t in args.tasks.split(",") if t != "longppl_govreport")
        args.dtypes, args.modes, args.lengths, args.dynamic_lengths = ["float32"], ["eager"], [1024], [1024, 2048]
        args.num_samples, args.num_docs, args.decode_prompt, args.new = 1, 1, 512, 32
        args.speed_dtype, args.ruler_length, args.ruler_samples, args.hf_device = "float32", 1024, [1, 3], "cpu"
    if not any(args.essays.glob("*.txt")):
        raise SystemExit(
            f"vllm_cuda: no essays in {args.essays}: pass --essays DIR (a folder of .txt) or set LCH_ESSAYS"
        )
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

    from harness.models.fetch import fetch_model
    from harness.models.model_check import library_versions
    from harness.models.tiny import build_tiny_model

    if args.small:
        model = build_tiny_model("llama", hidden=128, layers=2, max_positions=4096, train_steps=30, train_length=256)
    else:
        model = Path(args.model) if Path(args.model).is_dir() else fetch_model(args.model)
    engines = Engines()
    args.out.mkdir(parents=True, exist_ok=True)
    python, environ = engines.python()
    vllm_version = subprocess.run(
        [python, "-c", "import vllm; print(vllm.__version__)"], env=environ, capture_output=True, text=True
    ).stdout.strip()
    setup = {
        "device": device_name(),
        "model": args.model if not args.small else "tiny trained llama",
        "small": args.small,
        "vllm": vllm_version,
        "libraries": library_versions("torch", "transformers", "lm_eval"),
        "date": time.strftime("%Y-%m-%d"),
        "load_average_before": os.getloadavg(),
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
    }
    target = args.out / f"vllm_cuda_{'_'.join(args.only)}.json"
    rows = Rows(target, setup)
    if "agree" in args.only:
        agree_part(args, engines, model, args.out, rows)
    if "speed" in args.only:
        speed_part(args, engines, model, args.out, rows)
    for row in rows:
        print(json.dumps({k: v for k, v in row.items() if k not in ("runs", "tasks")}))
    print(f"written to {target}")


if __name__ == "__main__":
    main()
