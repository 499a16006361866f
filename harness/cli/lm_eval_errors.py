"""Plain lm-eval's command line (``lm_eval``, ``python -m lm_eval``) on a run of ours: destinations checked first, a
user-input failure one ``lch: error:`` line and exit 2, as in ``lch eval``. The import hook of ``lm_eval._cli.harness``
extends ``HarnessCLI.parse_args`` (a run is ours only once parsed); other runs and bugs' tracebacks stay lm-eval's."""

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
            from harness.plugin.lm_eval_flags import cli_run_settings
            from harness.plugin.preflight import cli_decided, involves_us

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
    """A subcommand of a run of ours: destinations and lm-eval's flags checked first, user errors one line with their
    exit code, and so too results missing a metric a failed service kept from being computed."""

    @functools.wraps(func)
    def run(args: Namespace) -> Any:
        from harness.core.errors import LchError, debug_enabled

        try:
            from harness.core.incomplete import collecting, raise_if_incomplete
            from harness.plugin.lm_eval_flags import cli_run_settings
            from harness.plugin.preflight import check_cli_run, check_destinations, command_line_run, task_index_for

            check_destinations(getattr(args, "output_path", None))  # before the run, not after it
            check_cli_run(args)  # lm-eval's own flags, before it indexes its tasks
            _, tasks, include_path = cli_run_settings(args)
            with command_line_run(), collecting() as incomplete, task_index_for(tasks, include_path):
                done = func(args)
            raise_if_incomplete(incomplete)  # results written, a metric asked for missing: the command fails
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
