"""``lch judge`` (the judge stage on logged samples) and ``lch gentable`` (the PIC paper, Table 1 from files)."""

from __future__ import annotations

import argparse
import json


def add(sub: argparse._SubParsersAction) -> None:
    judge = sub.add_parser("judge", help="judge logged samples (samples_<task>_*.jsonl); writes judgements beside them")
    judge.add_argument("samples", help="lm-eval samples file of longbench_write or hellobench_htg*")
    judge.add_argument("--judge-base-url", required=True)
    judge.add_argument("--judge-model", required=True)
    judge.add_argument("--policy", default="drop", choices=["drop", "zero", "rejudge"])
    judge.add_argument("--concurrency", type=int, default=8)
    judge.add_argument("--judge-cache-dir", default=None)
    from harness.judges.config import JudgeConfig

    defaults = JudgeConfig()
    judge.add_argument(
        "--judge-timeout",
        type=float,
        default=defaults.timeout,
        help=f"seconds one judge request attempt may take (default {defaults.timeout:g})",
    )
    judge.add_argument(
        "--judge-idle-timeout",
        type=float,
        default=defaults.idle_timeout,
        help=f"seconds without a byte from the judge that fail an attempt as silent; a server silent "
        f"on every request is asked nothing more (default {defaults.idle_timeout:g})",
    )
    judge.add_argument(
        "--judge-max-attempts",
        type=int,
        default=defaults.max_attempts,
        help=f"attempts per request: 5xx, 429, timeouts, dropped connections and malformed replies are "
        f"retried (default {defaults.max_attempts})",
    )
    judge.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help="judge reply budget in tokens (default: as logged with the samples, else 1024)",
    )
    judge.add_argument("--judge-prompt", default=None, help="LongBench-Write judge prompt file")
    judge.add_argument("--weights-file", default=None, help="HelloEval weights file (default: as logged)")
    judge.set_defaults(handler=run_judge)
    table = sub.add_parser("gentable", help="Length / Tokens / Quality / CR table across runs (the PIC paper App. A)")
    table.add_argument("runs", nargs="+", help="lm-eval output folders (run with --log_samples, then lch judge)")
    table.add_argument("--task", required=True, help="e.g. longbench_write or hellobench_htg")
    table.add_argument("--threshold", type=float, default=0.2, help="CR at which a model uses its own samples")
    table.set_defaults(handler=run_gentable)


def run_judge(args: argparse.Namespace) -> int:
    from harness.judges.config import JudgeConfig
    from harness.judges.stage import judge_samples_file

    JudgeConfig(
        policy=args.policy,
        timeout=args.judge_timeout,
        max_attempts=args.judge_max_attempts,
        idle_timeout=args.judge_idle_timeout,
    )  # checked first

    print(
        json.dumps(
            judge_samples_file(
                args.samples,
                {
                    "base_url": args.judge_base_url,
                    "model": args.judge_model,
                    "policy": args.policy,
                    "concurrency": args.concurrency,
                    "cache_dir": args.judge_cache_dir,
                    "max_tokens": args.max_tokens,
                    "timeout": args.judge_timeout,
                    "max_attempts": args.judge_max_attempts,
                    "idle_timeout": args.judge_idle_timeout,
                },
                prompt_path=args.judge_prompt,
                weights_file=args.weights_file,
            ),
            indent=2,
        )
    )
    return 0


def run_gentable(args: argparse.Namespace) -> int:
    from harness.reporting.generation_table import format_table, generation_table

    print(format_table(generation_table(args.runs, args.task, args.threshold)))
    return 0
