"""Plain lm-eval's command line (``lm_eval``, ``python -m lm_eval``) ends a run of our models or tasks that fails on
user input with one ``lch: error:`` line and exit 2, as ``lch eval`` does, instead of a traceback. Installed by the
import hook of ``lm_eval._cli.harness`` (:mod:`harness.lm_eval_activation`); runs that name neither our models
nor our tasks, and errors that are not recognised as user errors (bugs: their traceback is kept), are untouched.
``LCH_DEBUG=1`` keeps every traceback."""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

_MARK = "_lch_errors"


def _tasks(args: Any) -> list[str]:
    value = getattr(args, "tasks", None)
    if isinstance(value, str):
        value = value.split(",")
    return [t.strip() for t in value or [] if isinstance(t, str) and t.strip()]


def after_cli_import(cli_module: Any) -> None:
    """Wrap ``HarnessCLI.execute`` (the one call both forms of lm-eval's command line make)."""
    from harness.lmeval.preflight import involves_us

    cli = cli_module.HarnessCLI
    original = cli.execute
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def execute(self: Any, args: Any) -> Any:
        try:
            if involves_us(getattr(args, "model", None), _tasks(args), getattr(args, "include_path", None)):
                from harness.lmeval.preflight import check_destinations, check_task_names

                check_destinations(getattr(args, "output_path", None))  # before the run, not after it
                # before lm-eval looks the tasks up: its "Tasks not found" names no close match
                check_task_names(_tasks(args), getattr(args, "include_path", None))
            return original(self, args)
        except Exception as err:
            from harness.cli import _close_progress_bars
            from harness.cli.translate import given_models, translate
            from harness.errors import LchError

            if os.environ.get("LCH_DEBUG") == "1" or not involves_us(getattr(args, "model", None), _tasks(args), getattr(args, "include_path", None)):
                raise
            user_error = err if isinstance(err, LchError) else translate(err, given_models(["eval", *sys.argv[1:]]))
            if user_error is None:
                raise
            _close_progress_bars()
            print(f"lch: error: {user_error}", file=sys.stderr)
            raise SystemExit(user_error.exit_code) from None

    setattr(execute, _MARK, True)
    cli.execute = execute
