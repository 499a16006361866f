"""`lch plan` measured: how long a plan takes once its samples are cached, whether its token counts are the counts of
the samples themselves, and how far its time estimate is from a run that follows it.

1. **A RULER sweep** (the 13 tasks of `lch_ruler`, `--lengths`, `--samples` per task and length, the chat template
   applied): `lch plan` twice, the first building (and caching) the samples, the second reading the counts cached
   beside them; both timed. The plan's prompt tokens per task and length are then counted again here, independently
   of the plan's code: each cached sample's text rendered with the tokenizer's own chat template (a user turn, the
   answer prefix as the assistant's turn begun) and tokenized, its BOS as the tokenizer adds it.
2. **A small sweep, planned then run** (RULER niah_single_1 and vt at `--run-lengths`, `--run-samples` each, and
   PPL on `--run-docs` essays): `lch plan --calibrate` (its estimate), then `lch eval` of the same flags at batch
   size 1; the estimate beside the run's wall time and the seconds its engine computed (the run's `lch_cost`), and
   the planned prompt tokens beside the tokens the run recorded; then `lch plan --against` of the run (the estimate
   at the budget and at the run's own generations, each over the engine's seconds). `--skip-sweep` keeps step 1's
   numbers from the results file, with the date they were measured.

Writes `benchmarks/results/plan_cost.json` with the machine and the load average before and after each step.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RULER_LENGTHS = [4096, 8192, 16384, 32768, 65536, 131072]


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def lch(*args: str) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"lch {' '.join(args[:1])} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return seconds, done


def independent_counts(model: Path, plan: dict, metadata: dict) -> dict[str, list[int]]:
    """``{"<task> <length>": prompt tokens per cached sample}``, counted from the cached rows with the tokenizer's
    own chat template (module docstring). The rows are found by the cache's own key (the plan's code locates them;
    the count is made here)."""
    from transformers import AutoTokenizer

    from harness.core.run_record import asking_chat_template
    from harness.data.prompt_tokens import PromptCounter
    from harness.plugin.task_index import check_task_options
    from harness.tasks import TASKS_PATH
    from harness.tasks.base import LchTask
    from harness.tasks.lch_ruler.cache import cache_path, read_rows

    tokenizer = AutoTokenizer.from_pretrained(model)
    tasks = sorted({cell["task"] for cell in plan["cells"]})
    parsed = check_task_options(metadata, {"pretrained": str(model)}, tasks, str(TASKS_PATH))
    out = {}
    with asking_chat_template(True):
        for cell in plan["cells"]:
            _, _, options = parsed[cell["task"]]
            options = LchTask.resolved_options(options)
            rows = read_rows(
                cache_path(options, int(cell["length"]), PromptCounter(tokenizer, True)), options.num_samples
            )
            counts = []
            for row in rows:
                messages = [{"role": "user", "content": row["input"]}]
                if row["gen_prefix"]:
                    messages.append({"role": "assistant", "content": row["gen_prefix"]})
                text = tokenizer.apply_chat_template(
                    messages,
                    tokenize=False,
                    add_generation_prompt=not row["gen_prefix"],
                    continue_final_message=bool(row["gen_prefix"]),
                )
                bos = tokenizer.bos_token
                counts.append(len(tokenizer(text, add_special_tokens=not (bos and text.startswith(bos)))["input_ids"]))
            out[f"{cell['task']} {cell['length']}"] = counts
    return out


def ruler_sweep(model: Path, essays: str, samples: int, lengths: list[int], out: dict) -> None:
    metadata = {
        "lengths": lengths,
        "num_samples": samples,
        "essays": essays,
        "squad": "synthetic",
        "hotpotqa": "synthetic",
    }
    flags = [
        "--model",
        "hf-pic",
        "--model_args",
        f"pretrained={model},max_length={max(lengths)}",
        "--tasks",
        "lch_ruler",
        "--metadata",
        json.dumps(metadata),
        "--apply_chat_template",
    ]
    step: dict = {"metadata": metadata, "load_before": load()}
    plans = []
    for name in ("first", "cached"):
        path = ROOT / "benchmarks" / "results" / f".plan_{name}.json"
        seconds, _ = lch("plan", *flags, "--json", str(path))
        plans.append(json.loads(path.read_text()))
        path.unlink()
        step[f"{name}_seconds"] = round(seconds, 2)
        step[f"{name}_cached_cells"] = sum(1 for c in plans[-1]["cells"] if c["cached"])
    step["load_after"] = load()
    plan = plans[-1]
    step["cells"], step["totals"] = len(plan["cells"]), plan["totals"]
    counted = independent_counts(model, plan, metadata)
    planned = {f"{c['task']} {c['length']}": c["prompt_tokens"] for c in plan["cells"]}
    step["independent_prompt_tokens"] = sum(sum(v) for v in counted.values())
    step["cells_equal"] = sum(planned[k] == sum(v) for k, v in counted.items())
    step["cells_differing"] = {k: [planned[k], sum(v)] for k, v in counted.items() if planned[k] != sum(v)}
    out["ruler_sweep"] = step
    print(
        f"RULER 13 tasks x {len(lengths)} lengths x {samples}: plan {step['first_seconds']} s building, "
        f"{step['cached_seconds']} s cached; {step['totals']['prompt_tokens']:,} prompt tokens planned, "
        f"{step['independent_prompt_tokens']:,} counted here; {step['cells_equal']} of {step['cells']} cells equal"
    )


def small_sweep(model: Path, essays: str, lengths: list[int], samples: int, docs: int, out: dict, work: Path) -> None:
    metadata = {
        "lengths": lengths,
        "num_samples": samples,
        "essays": essays,
        "seed": 11,
        "data_files": essays,
        "min_tokens": max(lengths),
        "max_tokens": max(lengths),
        "num_docs": docs,
    }
    flags = [
        "--model",
        "hf-pic",
        "--model_args",
        f"pretrained={model},dtype=float32",
        "--device",
        "cpu",
        "--tasks",
        "lch_ruler_niah_single_1,lch_ruler_vt,ppl_govreport",
        "--metadata",
        json.dumps(metadata),
        "--apply_chat_template",
        "--batch_size",
        "1",
    ]
    step: dict = {"metadata": metadata, "load_before": load()}
    plan_path = work / "plan.json"
    seconds, done = lch("plan", *flags, "--calibrate", "--json", str(plan_path))
    plan = json.loads(plan_path.read_text())
    step["plan_seconds"] = round(seconds, 2)
    step["plan_stdout"] = done.stdout
    step["estimate_seconds"] = plan["estimate"]["seconds"]
    run_dir = work / "run"
    seconds, _ = lch("eval", *flags, "--output_path", str(run_dir))
    step["run_wall_seconds"] = round(seconds, 2)
    results = json.loads(max(run_dir.rglob("results_*.json")).read_text())
    cost = results["lch_cost"]
    step["run_recorded_wall_seconds"] = cost["wall_seconds"]
    step["engine_seconds"] = sum(t["seconds"] for t in cost["tasks"].values())
    step["planned_prompt_tokens"] = {
        t: sum(c["prompt_tokens"] for c in plan["cells"] if c["task"] == t) for t in cost["tasks"]
    }
    step["recorded_prompt_tokens"] = {t: v["prompt_tokens"] for t, v in cost["tasks"].items()}
    step["planned_generated_at_most"] = plan["totals"]["generated_tokens"]
    step["recorded_generated"] = sum(v["generated_tokens"] for v in cost["tasks"].values())
    step["estimate_over_engine_seconds"] = round(step["estimate_seconds"] / step["engine_seconds"], 3)
    step["estimate_over_run_wall"] = round(step["estimate_seconds"] / step["run_recorded_wall_seconds"], 3)
    step["load_after"] = load()
    # the same comparison as the command a user runs: the recorded run planned again beside its recorded cost
    against_path = work / "against.json"
    _, done = lch("plan", "--against", str(run_dir), "--json", str(against_path))
    against = json.loads(against_path.read_text())["against"]
    step["against_stdout"] = done.stdout
    total = against["tasks"][-1]
    step["against_total"] = {
        k: total[k]
        for k in ("seconds_estimated", "seconds_at_run_tokens", "seconds_run", "estimate_over_run", "model_over_run")
    }
    out["small_sweep"] = step
    print(
        f"small sweep: estimate {step['estimate_seconds']:.1f} s; the run {step['run_recorded_wall_seconds']:.1f} s "
        f"(engine {step['engine_seconds']:.1f} s): estimate / engine {step['estimate_over_engine_seconds']}, "
        f"estimate / run {step['estimate_over_run_wall']}; at the run's own generations / engine "
        f"{total['model_over_run']:.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="model folder (default: lch models path smollm2-135m)")
    parser.add_argument("--essays", default=str(ROOT.parent / "shared" / "data" / "paul_graham_essays"))
    parser.add_argument("--samples", type=int, default=25, help="RULER samples per task and length (sweep)")
    parser.add_argument("--lengths", type=int, nargs="+", default=RULER_LENGTHS)
    parser.add_argument("--run-lengths", type=int, nargs="+", default=[1024, 2048])
    parser.add_argument("--run-samples", type=int, default=4)
    parser.add_argument("--run-docs", type=int, default=2)
    parser.add_argument("--skip-sweep", action="store_true")
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "plan_cost.json"))
    args = parser.parse_args()
    model = Path(args.model) if args.model else Path(lch("models", "path", "smollm2-135m")[1].stdout.strip())
    out: dict = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "date": time.strftime("%Y-%m-%d"),
        "model": str(model),
    }
    import tempfile

    with tempfile.TemporaryDirectory() as work:
        if not args.skip_sweep:
            ruler_sweep(model, args.essays, args.samples, args.lengths, out)
        elif Path(args.output).is_file():  # the sweep measured before, kept with its own date
            before = json.loads(Path(args.output).read_text())
            if "ruler_sweep" in before:
                out["ruler_sweep"] = {**before["ruler_sweep"], "measured": before.get("date")}
        small_sweep(model, args.essays, args.run_lengths, args.run_samples, args.run_docs, out, Path(work))
    Path(args.output).write_text(json.dumps(out, indent=1) + "\n")
    print(f"written {args.output}")


if __name__ == "__main__":
    main()
