"""``lch eval``: lm-eval's own command line with the door in front (``lch tasks-path`` too). The front is the same for
plain ``lm_eval``, whose command line gets it from the import hook of ``lm_eval._cli.harness``
(:func:`after_cli_import`): once lm-eval has parsed a run of ours (:func:`harness.plugin.command_line.front`), the run
builds its task index in its scope, and a user error ends in one ``lch: error:`` line with its exit code; any other
run, and a bug's traceback, stay lm-eval's. The run's checks are the door's, in ``simple_evaluate``."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from typing import Any

_MARK = "_lch_front"


def add(sub: argparse._SubParsersAction) -> None:
    # `lch eval` is dispatched before argparse (every argument is lm-eval's); listed here for --help.
    sub.add_parser("eval", help="lm_eval drop-in (all lm_eval flags)", add_help=False)
    sub.add_parser("tasks-path", help="print our task folder (lm-eval finds it as a task plugin)").set_defaults(
        handler=tasks_path
    )


def run_eval(argv: list[str]) -> int:
    """``lm_eval <argv>`` in this process with our hooks applied: argparse's errors one line, ``--model_args`` /
    ``--metadata`` text giving a key twice refused (lm-eval keeps the last) or JSON that does not parse named by its
    flag, ``--tasks list`` as ``ls tasks``."""
    import json

    from harness.core.errors import UsageError
    from harness.plugin.activation import activate
    from harness.plugin.command_line import run_lch_eval
    from harness.plugin.preflight import unreadable_samples

    activate()
    given = [
        tuple(a.split("=", 1)) if a.startswith("--") and "=" in a else (a, b) for a, b in zip(argv, [*argv[1:], ""])
    ]
    for flag, value in given:
        if flag in ("--model_args", "-a", "--metadata") and "{" not in value:
            keys = [part.partition("=")[0].strip() for part in value.split(",") if "=" in part]
            if len(set(keys)) < len(keys):
                twice = sorted({k for k in keys if keys.count(k) > 1})
                raise UsageError(f"{flag} gives {', '.join(twice)} more than once: give each key once")
        elif flag in ("--model_args", "-a", "--metadata") and value.lstrip().startswith("{"):
            try:
                json.loads(value)
            except json.JSONDecodeError as err:
                raise UsageError(
                    f"{flag} is not valid JSON ({err.msg} at column {err.colno}): write a JSON object "
                    "with double quotes, e.g. '{\"num_docs\": 2}'"
                ) from None
        elif flag in ("--samples", "-E") and value.lstrip().startswith(("{", "[")):  # lm-eval's parser: a traceback
            try:
                json.loads(value)
            except json.JSONDecodeError as err:
                raise UsageError(unreadable_samples(value, err.msg).on_command_line) from None
    if ("--tasks", "list") in given or ("-t", "list") in given:  # lm-eval 0.4.13 moved it to `lm-eval ls tasks`
        include = [value for flag, value in given if flag == "--include_path"][:1]
        argv = ["ls", "tasks", *(["--include_path", *include] if include else [])]
    run_lch_eval(argv, after_cli_import)
    return 0


def after_cli_import(cli_module: Any) -> None:
    """Extend ``HarnessCLI.parse_args`` (module docstring)."""
    cli = cli_module.HarnessCLI
    original = cli.parse_args
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def parse_args(self: Any) -> argparse.Namespace:
        args = original(self)
        try:
            from harness.plugin.command_line import front

            scope = front(args)
        except Exception as err:  # noqa: BLE001 (a user error of ours: one line; else lm-eval's command line as it is)
            from harness.core.errors import LchError

            if isinstance(err, LchError):
                _one_line(err)
            return args
        if scope is not None:
            args.func = _fronted(args.func, scope, getattr(args, "include_path", None))
        return args

    setattr(parse_args, _MARK, True)
    cli.parse_args = parse_args


def _fronted(func: Callable[[argparse.Namespace], Any], scope: Any, include_path: Any) -> Callable:
    """lm-eval's ``run`` command on a run of ours (module docstring); results written but missing a metric a failed
    service kept from being computed end in one line too."""

    @functools.wraps(func)
    def run(args: argparse.Namespace) -> Any:
        from harness.cli.translate import given_models, translate
        from harness.core.errors import LchError, debug_enabled
        from harness.core.incomplete import collecting, raise_if_incomplete

        try:
            with collecting() as incomplete, scope:
                done = func(args)
            raise_if_incomplete(incomplete)  # results written, a metric asked for missing: the command fails
            return done
        except Exception as err:
            user_error = (
                err
                if isinstance(err, LchError)
                else translate(err, given_models(["eval", *sys.argv[1:]]), include_path)
            )
            if user_error is None or debug_enabled():
                raise
            _one_line(user_error)

    return run


def _one_line(err: Any) -> None:
    """``lch: error: ...`` (lm-eval's flag named where the door refused a setting) and the error's exit code."""
    from harness.cli.translate import close_progress_bars

    close_progress_bars()
    print(f"lch: error: {getattr(err, 'on_command_line', err)}", file=sys.stderr)
    raise SystemExit(err.exit_code) from None


def tasks_path(args: argparse.Namespace) -> int:
    from harness.plugin.discovery import tasks_path as path

    print(path())
    return 0
