"""vllm-pic's first light on a device: does every PIC method start and generate? One short call, nothing carried but
the project and vLLM's wheels.

    python benchmarks/gpu_first_light.py [--device cuda|cpu] [--runners default v1] [--modes eager graphs]
                                         [--dynamic-only] [--step-timeout 60] [--out DIR]

A tiny Llama built here (head size 64, 2 layers, trained 30 steps so that greedy choices are not ties; cached), one
step per engine, in order: bare vLLM (``vllm.LLM``), vllm-pic with ``pic=none``, ``naive`` and ``ntk`` (eager, the
default runner), then ``dynamic`` under every ``--runners`` (``default``: the model runner vLLM picks, the V2 runner
on a GPU since vLLM 0.25; ``v1``: ``VLLM_USE_V2_MODEL_RUNNER=0``) and ``--modes`` (``eager``; ``graphs``: compiled with
full CUDA graphs of decode steps, ``FULL_DECODE_ONLY``, which vllm-pic asks for Dynamic PIC). Each step is its own
process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, so an engine's exception and its traceback reach that process's stderr)
under ``--step-timeout`` seconds: a batch of a 600- and a 300-token prompt, 16 greedy new tokens, fp32. A row per
step, written as each ends (a call cut off still returns the rows before it): whether it started, its seconds,
its tokens, ``same_as_bare`` (``pic=none``'s tokens equal bare vLLM's), and the whole stderr of a step that failed.

On the CPU (``--device cpu``: the ``lch vllm-env`` environment; eager and the default runner only, as vLLM's CPU
backend has neither CUDA graphs nor the V2 runner) it checks this script; on a GPU it is the first stage of the
standing list (benchmarks/README.md, "On a GPU").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from vllm_cuda import PIC_ARGS, Engines, Rows, device_name  # noqa: E402  (after the path)

LENGTHS, NEW = (600, 300), 16

STEP = r"""
import json, os, sys, time
spec = json.loads(sys.argv[1])
if __name__ == "__main__":
    from vllm import SamplingParams, TokensPrompt
    start = time.perf_counter()
    if spec["engine"] == "bare":
        from vllm import LLM
        llm = LLM(model=spec["model"], dtype="float32", max_model_len=2048, seed=0, **spec["engine_args"])
    else:
        from harness.engines.vllm_pic.lm import VLLMPicLM
        llm = VLLMPicLM(pretrained=spec["model"], dtype="float32", max_model_len=2048, seed=0,
                        **spec["engine_args"], **spec["pic"]).model
    started = time.perf_counter() - start
    params = SamplingParams(temperature=0.0, max_tokens=spec["new"], ignore_eos=True)
    outputs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in spec["prompts"]], params, use_tqdm=False)
    generate_s = round(time.perf_counter() - start - started, 2)
    tokens = [list(o.outputs[0].token_ids) for o in outputs]
    result = {"start_s": round(started, 1), "generate_s": generate_s, "tokens": tokens}
    print("RESULT " + json.dumps(result), flush=True)
"""


def pic_settings(method: str) -> dict:
    """vllm-pic's model args of ``method`` (``PIC_ARGS`` of vllm_cuda.py) as keyword arguments."""
    pairs = [part.split("=", 1) for part in PIC_ARGS[method].strip(",").split(",") if part]
    return {key: value for key, value in pairs}


def steps(runners: list[str], modes: list[str], dynamic_only: bool = False) -> list[dict]:
    """Bare vLLM, then ``pic=none``, naive and NTK-aware PIC (ids from positions alone: traced like vLLM's own
    rotary) on the first runner and mode, then Dynamic PIC (the step code: plan, cache probe, key moves) under every
    runner and mode; ``dynamic_only``: the Dynamic PIC steps alone."""

    def step(engine: str, method: str | None, runner: str, mode: str) -> dict:
        name = "bare vLLM" if engine == "bare" else f"vllm-pic {method}"
        return {
            "name": f"{name} ({runner} runner, {mode})",
            "engine": engine,
            "method": method,
            "runner": runner,
            "mode": mode,
        }

    out = [step("bare", None, runners[0], modes[0])]
    out += [step("vllm-pic", method, runners[0], modes[0]) for method in PIC_ARGS if method != "dynamic"]
    dynamic = [step("vllm-pic", "dynamic", runner, mode) for runner in runners for mode in modes]
    return dynamic if dynamic_only else out + dynamic


def engine_args(step: dict, device: str) -> dict:
    args: dict = {"enforce_eager": step["mode"] == "eager"}
    if step["mode"] == "graphs" and step["engine"] == "bare":
        args["compilation_config"] = {"cudagraph_mode": "FULL_DECODE_ONLY"}
    if device == "cuda":
        args["gpu_memory_utilization"] = 0.5
        if step["method"] == "dynamic":
            args["max_num_seqs"] = 8  # vllm-pic cannot size it before vLLM profiles the KV cache on a GPU
    else:
        args["num_gpu_blocks_override"] = 64  # a KV cache of known size (the CPU backend has no memory profile)
    return args


def prompts(model: Path) -> list[list[int]]:
    from transformers import AutoTokenizer

    from harness.data.synthetic import synthetic_reports

    tokenizer = AutoTokenizer.from_pretrained(model)
    ids = tokenizer(" ".join(synthetic_reports(1, 2000, seed=7)), add_special_tokens=False)["input_ids"]
    return [ids[i * 97 : i * 97 + n] for i, n in enumerate(LENGTHS)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--runners", nargs="+", default=None, choices=["default", "v1"])
    parser.add_argument("--modes", nargs="+", default=None, choices=["eager", "graphs"])
    parser.add_argument(
        "--step-timeout", type=float, default=60.0, help="seconds for one step (engine start and generation)"
    )
    parser.add_argument(
        "--dynamic-only",
        action="store_true",
        help="run the Dynamic PIC steps only (a step left over from an earlier call)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "gpu_first_light")
    args = parser.parse_args()
    gpu = args.device == "cuda"
    runners = args.runners or (["default", "v1"] if gpu else ["default"])
    modes = args.modes or (["eager", "graphs"] if gpu else ["eager"])
    if not gpu and (runners != ["default"] or modes != ["eager"]):
        raise SystemExit(
            "gpu_first_light: on the CPU vLLM runs eager steps on its default runner only: drop --runners "
            "and --modes, or run with --device cuda"
        )
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from harness.models.tiny import build_tiny_model

    model = build_tiny_model("llama", hidden=128, layers=2, max_positions=4096, train_steps=30, train_length=256)
    engines = Engines()
    python, environ = engines.python()
    environ = {**environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "PYTHONPATH": str(ROOT)}
    version = subprocess.run(
        [python, "-c", "import vllm; print(vllm.__version__)"], env=environ, capture_output=True, text=True
    ).stdout.strip()
    args.out.mkdir(parents=True, exist_ok=True)
    setup = {
        "device": device_name() if gpu else f"{device_name()} (vLLM's CPU backend)",
        "vllm": version,
        "model": "tiny trained llama (hidden 128, head size 64, 2 layers)",
        "date": time.strftime("%Y-%m-%d"),
        "load_average_before": os.getloadavg(),
        "step_timeout_s": args.step_timeout,
    }
    rows = Rows(args.out / f"first_light_{args.device}.json", setup)
    token_prompts, bare = prompts(model), None
    for step in steps(runners, modes, args.dynamic_only):
        spec = {
            "engine": step["engine"],
            "model": str(model),
            "prompts": token_prompts,
            "new": NEW,
            "engine_args": engine_args(step, args.device),
            "pic": pic_settings(step["method"]) if step["method"] else {},
        }
        env = dict(environ)
        if step["runner"] == "v1":
            env["VLLM_USE_V2_MODEL_RUNNER"] = "0"
        start = time.perf_counter()
        try:
            done = subprocess.run(
                [python, "-c", STEP, json.dumps(spec)],
                env=env,
                capture_output=True,
                text=True,
                timeout=args.step_timeout,
                cwd=ROOT,
            )
            code, stdout, stderr = done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired as err:
            code, stdout = (
                "timeout",
                (err.stdout or b"").decode() if isinstance(err.stdout, bytes) else err.stdout or "",
            )
            stderr = (err.stderr or b"").decode() if isinstance(err.stderr, bytes) else err.stderr or ""
        seconds = round(time.perf_counter() - start, 1)
        result = next((json.loads(l[len("RESULT ") :]) for l in stdout.splitlines() if l.startswith("RESULT ")), None)
        row = {**step, "started": result is not None, "exit_code": code, "wall_s": seconds}
        if result is not None:
            row.update(result)
            if step["engine"] == "bare":
                bare = result["tokens"]
            elif step["method"] == "none" and bare is not None:
                row["same_as_bare"] = result["tokens"] == bare
        else:
            row["stderr"] = stderr
        rows.append(row)
        status = "started" if result else f"FAILED ({code})"
        print(
            f"{step['name']}: {status} in {seconds} s"
            + (f", same as bare: {row['same_as_bare']}" if "same_as_bare" in row else ""),
            flush=True,
        )
    print(f"written to {rows.target}")


if __name__ == "__main__":
    main()
