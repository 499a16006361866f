"""``lch demo``: the README's main command (a registry model under PIC variants; ``--tiny``: tiny models)."""

from __future__ import annotations

import argparse

from harness.data.haystacks import BUILTIN_ESSAYS
from harness.demo.real import DEFAULT_MODEL, DEMO_MODELS


def add(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser(
        "demo",
        help="offline demo: a real model (SmolLM2-135M-Instruct or Gemma 3 270M) under PIC "
        "variants (RULER, BABILong, PPL, LongPPL), leaderboard, plot, correlations",
    )
    demo.add_argument("--output", default="results/demo", help="folder for the results (default results/demo)")
    demo.add_argument(
        "--essays",
        help=f"folder of .txt essays, or {BUILTIN_ESSAYS} (default $LCH_ESSAYS, else "
        "../shared/data/paul_graham_essays beside a checkout, else the essays shipped "
        f"with the package, {BUILTIN_ESSAYS})",
    )
    demo.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        choices=list(DEMO_MODELS),
        help=f"registry model to run (default {DEFAULT_MODEL})",
    )
    demo.add_argument("--tiny", action="store_true", help="the tiny-model demo instead (seconds, synthetic reports)")
    demo.add_argument("--docs", type=int, default=4, help="--tiny: number of synthetic documents")
    demo.add_argument("--words", type=int, default=1500, help="--tiny: words per document")
    demo.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.tiny:
        from harness.demo.tiny import run_demo

        run_demo(output=args.output, n_docs=args.docs, n_words=args.words)
    else:
        from harness.demo.real import demo_corpus, run_real_demo

        demo_corpus(args.essays)  # checked before any work (lm-eval's import, the model fetch, the output folder)
        run_real_demo(output=args.output, essays=args.essays, model=args.model)
    return 0
