"""``lch eval``: lm-eval's own command line with the door in front (:mod:`harness.plugin.command_line`, the same front
plain ``lm_eval`` gets), after the few checks of the text of ``lch eval``'s arguments below (``lch tasks-path`` too)."""

from __future__ import annotations

import argparse


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
    run_lch_eval(argv)
    return 0


def tasks_path(args: argparse.Namespace) -> int:
    from harness.plugin.discovery import tasks_path as path

    print(path())
    return 0
