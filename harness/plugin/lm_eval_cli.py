"""``lch eval``: lm-eval's own command line with our plugin discovery applied and our checks run first (lm-eval's
flags as :mod:`harness.plugin.lm_eval_flags` declares them, then the preflight)."""

from __future__ import annotations

import contextlib
import sys
from typing import Any

from harness.core.context import patched
from harness.core.errors import UsageError
from harness.core.incomplete import collecting, raise_if_incomplete
from harness.plugin.activation import activate
from harness.plugin.lm_eval_flags import check_json_args, split_tasks
from harness.plugin.preflight import (as_dict, check_cli_run, check_destinations, command_line_run, preflight,
                                      task_index_for)


def _flag_values(argv: list[str], flag: str) -> list[str]:
    """Every value ``flag`` is given in ``argv`` (``flag value`` or ``flag=value``), in order."""
    return [argv[i + 1] if arg == flag else arg.split("=", 1)[1] for i, arg in enumerate(argv)
            if (arg == flag and i + 1 < len(argv)) or arg.startswith(flag + "=")]


def include_path_of(argv: list[str]) -> str | None:
    """The ``--include_path`` of an ``lch eval`` command line (lm-eval's flag), or None."""
    values = _flag_values(argv, "--include_path")
    return values[0] if values else None


def _model_args(args) -> dict:
    return as_dict(getattr(args, "model_args", None))


def _parse_as_lch(cli):
    """lm-eval's ``cli.parse_args()``, argparse's errors raised as our one-line ``UsageError``."""
    import argparse
    import re

    def error(parser: argparse.ArgumentParser, message: str):
        # argparse names a flag's type function: lm-eval's --seed type is a functools.partial, meaningless to a user
        message = re.sub(r"invalid (functools\.partial\(.*\)|<lambda>) value:", "invalid value:", message)
        raise UsageError(f"lch eval: {message}; see `lch eval --help`")

    with patched(argparse.ArgumentParser, "error", error):
        return cli.parse_args()


def run_lm_eval(argv: list[str]) -> None:
    """Run lm-eval's own CLI on ``argv`` with our plugin discovery applied, lm-eval's flags (:func:`check_cli_run`) and
    the run's preflight checked before lm-eval indexes its tasks."""
    check_json_args(argv)
    activate()
    from lm_eval.utils import setup_logging

    if "list" in _flag_values(argv, "--tasks"):  # lm-eval 0.4.13 moved this to `lm-eval ls tasks`
        user = include_path_of(argv)
        argv = ["ls", "tasks"] + (["--include_path", user] if user else [])
    setup_logging()
    with patched(sys, "argv", ["lm-eval", *argv]), command_line_run(), collecting() as incomplete:
        cli, args = parse_command_line(argv)
        index_scope: Any = contextlib.nullcontext()
        if getattr(args, "model", None) is not None or getattr(args, "tasks", None):
            check_destinations(getattr(args, "output_path", None))
            check_cli_run(args)
            tasks = split_tasks(args.tasks)
            preflight(getattr(args, "model", None), _model_args(args), tasks, getattr(args, "metadata", None),
                      include_path_of(argv))
            index_scope = task_index_for(tasks, include_path_of(argv))
        with index_scope:
            cli.execute(args)
    raise_if_incomplete(incomplete)  # the results are written; a metric asked for is missing: the command fails


def parse_command_line(argv: list[str]) -> tuple[Any, Any]:
    """lm-eval's CLI and its parse of ``argv`` (errors one line; run settings moved out of ``--model_args``)."""
    from harness.plugin.discovery import harness_cli

    with patched(sys, "argv", ["lm-eval", *argv]):
        cli = harness_cli()
        args = _parse_as_lch(cli)
    move_run_settings(args, argv)
    return cli, args


# lm-eval always passes these to the model's constructor from its own flags: the same key in --model_args would reach
# it twice (a TypeError)
RUN_SETTINGS = ("device", "batch_size", "max_batch_size")


def move_run_settings(args, argv: list[str]) -> None:
    """A ``device`` / ``batch_size`` / ``max_batch_size`` given in ``--model_args`` becomes the value of lm-eval's
    flag of that name; given both ways with different values, it is refused in one line."""
    model_args = _model_args(args)
    moved = {key: model_args.pop(key) for key in RUN_SETTINGS if key in model_args}
    if not moved:
        return
    for key, value in moved.items():
        flagged = any(a == f"--{key}" or a.startswith(f"--{key}=") for a in argv)
        if flagged and str(getattr(args, key, None)) != str(value):
            raise UsageError(f"lch eval: {key} is given twice, {value} in --model_args and {getattr(args, key)} by "
                             f"--{key}: give it once")
        setattr(args, key, value)
    args.model_args = model_args
