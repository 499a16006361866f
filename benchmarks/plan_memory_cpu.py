"""``lch plan``'s memory against measurement on the CPU (or the GPU a run finds), hf-pic or vllm-pic (where vLLM is
not installed, in the CPU vLLM environment of ``lch vllm-env``): per model, kind and length one ``lch eval`` run (a
process of its own, one at a time), then ``lch plan --against`` the run: the memory planned for the run's largest
cell beside the peak resident memory the run recorded (``lch_cost``), and their ratio (the band: 0.95x to 1.25x).
The kinds:

* ``generation``: RULER ``niah_single_1``, one sample, its 128-token answer budget, NTK-aware PIC (s_rr 4);
* ``dynamic``: the same under Dynamic PIC (s_cr 4, its default l_ic and l_rc);
* ``scoring``: ``ppl_govreport``, one document of the Paul Graham essays joined, NTK-aware PIC (s_rr 4);
* ``longppl``: ``longppl_govreport`` of that document with the other model as its evaluator (SmolLM2 evaluated by
  Gemma 3 270M and the reverse; fp32, its key tokens not cached: the evaluator runs in the run), K 4096 and d 1024,
  so from 8k on (a document of K tokens or fewer holds no key token).

    python benchmarks/plan_memory_cpu.py [--engine hf-pic|vllm-pic] [--models smollm2-135m gemma3-270m]
                                         [--lengths 4096 16384] [--kinds generation scoring] [--essays DIR]

``--work DIR`` keeps the runs in DIR (with each run's resident memory sampled every 0.2 s, ``*.rss.json``); given
again, it plans the runs there again without rerunning them (after a change to the plan). ``--plan-only`` plans the
output's rows again from their commands (``lch plan``, no run; the plan of a run's command is the plan against it: a
LongPPL cell's key-token cache is its own, never filled), each row's recorded memory and ``run_commit`` kept. Writes
benchmarks/results/plan_memory_cpu[_vllm].json (rows of earlier runs at other lengths, models or kinds kept).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
COMMIT = subprocess.run(
    ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
).stdout.strip()


def on_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


KINDS = ("generation", "dynamic", "scoring", "longppl")
OTHER = {"smollm2-135m": "gemma3-270m", "gemma3-270m": "smollm2-135m"}  # each model's evaluator in a longppl cell


def model_path(name: str) -> str:
    return subprocess.run(
        [str(BIN / "lch"), "models", "path", name], check=True, capture_output=True, text=True
    ).stdout.strip()


def cell_run(kind: str, name: str, tokens: int, data: Path, out: Path) -> tuple[str, dict, str]:
    """``(task, metadata, PIC model args)`` of one cell."""
    if kind in ("generation", "dynamic"):
        task, meta = "lch_ruler_niah_single_1", {"lengths": [tokens], "num_samples": 1, "essays": "synthetic"}
    elif kind == "scoring":
        task, meta = (
            "ppl_govreport",
            {"data_files": str(data), "min_tokens": tokens, "max_tokens": tokens, "num_docs": 1},
        )
    else:  # the other model its evaluator, in a key-token cache of the run's own: the evaluator runs
        task, meta = (
            "longppl_govreport",
            {
                "evaluator": model_path(OTHER[name]),
                "evaluator_dtype": "float32",
                "key_cache_dir": str(out.with_suffix(".keys")),
                "data_files": str(data),
                "min_tokens": tokens,
                "max_tokens": tokens,
                "num_docs": 1,
            },
        )
    return task, meta, "pic=dynamic,pic_ratio=4" if kind == "dynamic" else "pic=ntk,pic_ratio=4"


def sampled_peak(command: list[str], environ: dict | None, samples: Path) -> subprocess.CompletedProcess:
    """``command`` run to its end, its resident memory (children included) sampled every 0.2 s into ``samples``."""
    import threading

    import psutil

    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environ)
    start, timeline = time.perf_counter(), []

    def sample() -> None:
        watched = psutil.Process(process.pid)
        while process.poll() is None:
            try:
                rss = sum(p.memory_info().rss for p in [watched, *watched.children(recursive=True)])
            except psutil.Error:
                break
            timeline.append((round(time.perf_counter() - start, 1), rss))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = process.communicate()
    sampler.join()
    samples.write_text(json.dumps(timeline))
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def eval_args(engine: str, model_dir: str, name: str, kind: str, tokens: int, data: Path, out: Path) -> list[str]:
    """The ``--model ... --metadata ...`` arguments of the cell's ``lch eval`` (and of its ``lch plan``)."""
    tasks, meta, pic = cell_run(kind, name, tokens, data, out)
    if engine == "vllm-pic":  # vLLM refuses a max_model_len past the positions PIC reaches (window x ratio)
        window = json.loads((Path(model_dir) / "config.json").read_text())["max_position_embeddings"]
        length = f"max_model_len={min(tokens + 1024, window * 4)}"
    else:
        length = f"max_length={tokens + 1024}"
    args = f"pretrained={model_dir},dtype=float32,{pic},{length}"
    if engine == "vllm-pic" and kind in ("scoring", "longppl") and on_gpu():
        args += ",gpu_memory_utilization=0.45"  # its pooling engine beside the generating one, on one GPU
    return ["--model", engine, "--model_args", args, "--tasks", tasks, "--metadata", json.dumps(meta)]


def planned_only(engine: str, model_dir: str, name: str, kind: str, tokens: int, data: Path, out: Path) -> dict:
    """``lch plan`` of the cell's command, run by no one here: the memory planned for its largest cell."""
    planned = out.with_suffix(".plan-only.json")
    arguments = eval_args(engine, model_dir, name, kind, tokens, data, out)
    subprocess.run([str(BIN / "lch"), "plan", *arguments, "--json", str(planned)], check=True, capture_output=True)
    return {"planned_bytes": json.loads(planned.read_text())["totals"]["memory"]}


def run_cell(engine: str, model_dir: str, name: str, kind: str, tokens: int, data: Path, out: Path) -> dict:
    """One ``lch eval`` of ``kind`` (:data:`KINDS`) at ``tokens``, then the plan against it."""
    arguments = eval_args(engine, model_dir, name, kind, tokens, data, out)
    if engine == "vllm-pic" and importlib.util.find_spec("vllm") is None:  # on a GPU machine vLLM is installed here
        from harness.engines.vllm_pic.env import ensure_vllm_env

        env = ensure_vllm_env(log=lambda line: print(line, file=sys.stderr))
        # this checkout's code even where another checkout installed itself into the vLLM environment since
        lch, environ = env.command(), env.environ({**os.environ, "PYTHONPATH": str(ROOT)})
    elif engine == "vllm-pic":
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from vllm_cuda import Engines

        lch, environ = [str(BIN / "lch")], Engines.local_environ()
    else:
        lch, environ = [str(BIN / "lch")], None
    ran = out.with_suffix(".run.json")  # the run's row: a later --work of the same folder plans it again only
    if ran.exists():
        row = json.loads(ran.read_text())
    else:
        load = os.getloadavg()
        start = time.perf_counter()
        done = sampled_peak(
            [
                *lch,
                "eval",
                *arguments,
                "--batch_size",
                "1",
                "--output_path",
                str(out),
            ],
            environ,
            out.with_suffix(".rss.json"),
        )
        row = {
            "kind": kind,
            "tokens": tokens,
            "run_commit": COMMIT,
            "exit": done.returncode,
            "wall_seconds": round(time.perf_counter() - start, 1),
            "load_before": load,
            "load_after": os.getloadavg(),
        }
        if done.returncode != 0:
            return {**row, "last_line": (done.stderr.strip().splitlines() or [""])[-1]}
        ran.write_text(json.dumps(row))
    planned = out.with_suffix(".plan.json")
    subprocess.run(
        [str(BIN / "lch"), "plan", "--against", str(out), "--json", str(planned)], check=True, capture_output=True
    )
    return {**row, **json.loads(planned.read_text())["against"]["memory"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=["hf-pic", "vllm-pic"], default="hf-pic")
    parser.add_argument("--models", nargs="+", default=["smollm2-135m", "gemma3-270m"])
    parser.add_argument("--lengths", type=int, nargs="+", default=[4096, 16384])
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--essays", default=str(ROOT.parent / "shared" / "data" / "paul_graham_essays"))
    parser.add_argument("--output")
    parser.add_argument("--work", help="folder of the runs; the runs it already holds are planned again, not rerun")
    parser.add_argument(
        "--plan-only",
        action="store_true",
        help="plan the cells of the output's rows again with `lch plan` of their commands, their recorded memory kept",
    )
    args = parser.parse_args()
    suffix = "_vllm" if args.engine == "vllm-pic" else ""
    output = Path(args.output or ROOT / "benchmarks" / "results" / f"plan_memory_cpu{suffix}.json")
    kept = json.loads(output.read_text())["rows"] if output.exists() else []
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="plan-memory-"))
    work.mkdir(parents=True, exist_ok=True)
    data = work / "essays.jsonl"
    essays = sorted(Path(args.essays).glob("*.txt"))
    if not essays:
        sys.exit(f"plan_memory_cpu: no essays (*.txt) in {args.essays}; give --essays DIR")
    text = "\n\n".join(p.read_text(encoding="utf-8") for p in essays)
    data.write_text(json.dumps({"report": text}) + "\n")
    if args.plan_only:
        chosen = [
            row
            for row in kept  # a run that was refused recorded no memory
            if row["model"] in args.models
            and row["kind"] in args.kinds
            and row["tokens"] in args.lengths
            and "recorded_bytes" in row
        ]
        if not chosen:
            sys.exit(f"plan_memory_cpu: --plan-only plans recorded runs again; {output} holds none of the cells asked")
        for row in chosen:
            out = work / f"{row['model']}-{row['kind']}-{row['tokens']}"
            cell = (args.engine, model_path(row["model"]), row["model"], row["kind"], row["tokens"], data, out)
            row.setdefault("run_commit", row["commit"])  # a row kept from before run_commit was recorded
            row.pop("note", None)  # what it said of an older plan
            row.update(planned_only(*cell), commit=COMMIT, date_planned=time.strftime("%Y-%m-%d %H:%M"))
            row["planned_over_recorded"] = row["planned_bytes"] / row["recorded_bytes"]
            print(json.dumps(row), flush=True)
        machine = f"{os.uname().machine}, {os.cpu_count()} cores"
        output.write_text(json.dumps({"machine": machine, "rows": kept}, indent=1) + "\n")
        return
    rows = []
    for name in args.models:
        model_dir = model_path(name)
        for kind in args.kinds:
            for tokens in args.lengths:
                row = {
                    "model": name,
                    "engine": args.engine,
                    "commit": COMMIT,
                    "date": time.strftime("%Y-%m-%d %H:%M"),
                    **run_cell(args.engine, model_dir, name, kind, tokens, data, work / f"{name}-{kind}-{tokens}"),
                }
                print(json.dumps(row), flush=True)
                rows.append(row)
                measured = {(r["model"], r["kind"], r["tokens"]) for r in rows}
                rows_now = [r for r in kept if (r["model"], r["kind"], r["tokens"]) not in measured] + rows
                rows_now.sort(key=lambda r: (r["model"], r["kind"], r["tokens"]))
                output.write_text(
                    json.dumps({"machine": f"{os.uname().machine}, {os.cpu_count()} cores", "rows": rows_now}, indent=1)
                    + "\n"
                )


if __name__ == "__main__":
    main()
