"""Judge throughput at concurrency 1 vs 8 against a local OpenAI-compatible server.

Starts `transformers serve` with a tiny model on loopback (or uses --base-url/--model), sends the same
``--requests`` chat requests with each concurrency (fresh cache each time) and prints requests/s.
Writes benchmarks/results/judge_throughput.json.

    python benchmarks/judge_throughput.py [--requests 32] [--max-tokens 64]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.judges.client import JudgeClient, JudgeSettings  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--base-url")
    parser.add_argument("--model")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "judge_throughput.json"))
    args = parser.parse_args()

    def run(base_url: str, model: str) -> dict:
        rows = {}
        for concurrency in (1, 8):
            with tempfile.TemporaryDirectory() as cache:
                client = JudgeClient(JudgeSettings(base_url=base_url, model=model, max_tokens=args.max_tokens,
                                                   concurrency=concurrency, cache_dir=cache))
                conversations = [[{"role": "user", "content": f"Grade answer {i}: the report is short."}]
                                 for i in range(args.requests)]
                start = time.perf_counter()
                answers = client.ask_many(conversations, progress=False)
                seconds = time.perf_counter() - start
                assert all(a.text is not None for a in answers)
                rows[concurrency] = {"seconds": seconds, "requests_per_s": args.requests / seconds}
        return rows

    if args.base_url:
        server, rows = args.base_url, run(args.base_url, args.model)
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from judge_servers import ServedModel, judge_model

        from harness.models.tiny import build_tiny_model

        with tempfile.TemporaryDirectory() as tmp:
            model = judge_model(build_tiny_model(train_steps=300, train_length=128), Path(tmp) / "judge")
            with ServedModel(model) as served:
                server, rows = "transformers serve (tiny Llama, CPU)", run(served.base_url, served.model)
    result = {"server": server, "requests": args.requests, "max_tokens": args.max_tokens, "by_concurrency": rows,
              "speedup_8_vs_1": rows[8]["requests_per_s"] / rows[1]["requests_per_s"]}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"judge throughput against {server}, {args.requests} requests of <= {args.max_tokens} tokens")
    for c, r in rows.items():
        print(f"  concurrency {c}: {r['requests_per_s']:.2f} req/s ({r['seconds']:.1f} s)")
    print(f"  speed-up 8 vs 1: {result['speedup_8_vs_1']:.2f}x; written to {args.out}")


if __name__ == "__main__":
    main()
