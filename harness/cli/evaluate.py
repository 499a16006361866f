"""``lch eval`` (lm-eval's CLI with our models and tasks) and ``lch tasks-path``."""

from __future__ import annotations

import argparse


def add(sub: argparse._SubParsersAction) -> None:
    # `lch eval` is dispatched before argparse (every argument is lm-eval's); listed here for --help.
    sub.add_parser("eval", help="lm_eval drop-in (all lm_eval flags)", add_help=False)
    sub.add_parser("tasks-path", help="print our task folder (lm-eval finds it as a task plugin)").set_defaults(handler=tasks_path)


def run_eval(argv: list[str]) -> int:
    from harness.plugin.lm_eval_cli import run_lm_eval

    run_lm_eval(argv)
    return 0


def tasks_path(args: argparse.Namespace) -> int:
    from harness.plugin.discovery import tasks_path as path

    print(path())
    return 0
