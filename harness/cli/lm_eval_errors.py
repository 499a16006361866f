"""Plain lm-eval's command line (``lm_eval``, ``python -m lm_eval``) on a run of our models or tasks: the places it
writes are checked before the run, and a failure on user input ends with one ``lch: error:`` line and exit 2, as
``lch eval`` does, instead of a traceback. Installed by the import hook of ``lm_eval._cli.harness``
(:mod:`lch_harness_lm_eval`).

Whether the run is ours is known only once lm-eval has parsed its command line (its flags, or a ``--config`` YAML
holding them), so the hook extends ``HarnessCLI.parse_args``: the parsed run is looked up in lm-eval's task index and
our model names (:func:`harness.plugin.preflight.involves_us`); a run of ours gets its subcommand's function wrapped
(``args.func``), any other run gets back exactly what lm-eval parsed, runs with lm-eval's own ``simple_evaluate``,
and keeps lm-eval's own errors, tracebacks and exit codes. Errors that are not recognised as user errors (bugs:
their traceback is kept) are untouched; ``LCH_DEBUG=1`` (``lch --debug``) keeps every traceback."""

from __future__ import annotations

import functools
import sys
from argparse import Namespace
from typing import Any, Callable

_MARK = "_lch_errors"


def after_cli_import(cli_module: Any) -> None:
    """Extend ``HarnessCLI.parse_args`` (module docstring)."""
    cli = cli_module.HarnessCLI
    original = cli.parse_args
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def parse_args(self: Any) -> Namespace:
        args = original(self)
        try:
            from harness.plugin.preflight import cli_decided, cli_run_settings, involves_us

            ours = callable(getattr(args, "func", None)) and involves_us(*cli_run_settings(args))
            cli_decided(ours)
        except Exception:  # noqa: BLE001 (deciding must never break lm-eval's command line)
            return args
        if ours:
            args.func = checked(args.func)
        return args

    setattr(parse_args, _MARK, True)
    cli.parse_args = parse_args


def checked(func: Callable[[Namespace], Any]) -> Callable[[Namespace], Any]:
    """A subcommand of a run of ours: its destinations and lm-eval's flags checked first
    (:func:`harness.plugin.lm_eval_cli.check_cli_run`), its user errors one line and their exit code, and
    a run that wrote its results without a metric a failed service kept it from computing (a judge server) ends as
    one line and exit 2 too (:func:`harness.core.incomplete.report_incomplete`)."""

    @functools.wraps(func)
    def run(args: Namespace) -> Any:
        from harness.core.errors import LchError, debug_enabled

        try:
            from harness.core.incomplete import raise_if_incomplete
            from harness.plugin.lm_eval_cli import check_cli_run
            from harness.plugin.preflight import (check_destinations, cli_run_settings, command_line_run,
                                                  task_index_for)

            check_destinations(getattr(args, "output_path", None))  # before the run, not after it
            check_cli_run(args)  # lm-eval's own flags, before it indexes its tasks
            _, tasks, include_path = cli_run_settings(args)
            with command_line_run(), task_index_for(tasks, include_path):
                done = func(args)
            raise_if_incomplete()  # results written, a metric asked for missing: the command fails
            return done
        except Exception as err:
            from harness.cli import _close_progress_bars
            from harness.cli.translate import given_models, translate

            if debug_enabled():
                raise
            user_error = err if isinstance(err, LchError) else translate(
                err, given_models(["eval", *sys.argv[1:]]), getattr(args, "include_path", None))
            if user_error is None:
                raise
            _close_progress_bars()
            print(f"lch: error: {user_error}", file=sys.stderr)
            raise SystemExit(user_error.exit_code) from None

    return run
