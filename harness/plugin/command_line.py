"""lm-eval's own command line (its parser, its ``run`` command, its config object) with the door in front, for
``lch eval`` (:func:`run_lch_eval`) and plain ``lm_eval`` alike: the import hook of ``lm_eval._cli.harness``
(:func:`after_cli_import`) extends its ``parse_args``. Once lm-eval has parsed a run of ours (:func:`front`), the run
builds its task index in its scope, and a user error ends in one ``lch: error:`` line with its exit code; any other
run, and a bug's traceback, stay lm-eval's. :func:`planned_run` is what ``lch plan`` reads of a command line. Nothing
here re-reads lm-eval's flags; the run's checks are the door's (:mod:`harness.plugin.preflight`)."""

from __future__ import annotations

import argparse
import contextlib
import functools
import inspect
import json
import os
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from harness.core.context import patched
from harness.core.errors import LchError, UsageError, debug_enabled
from harness.core.incomplete import collecting, raise_if_incomplete
from harness.engines.registry import model_names
from harness.plugin.discovery import our_tasks, task_index_for
from harness.plugin.preflight import RUN_SETTINGS, check_run_settings
from harness.plugin.translate import close_progress_bars, given_models, translate

_MARK = "_lch_front"


def front(args: argparse.Namespace) -> AbstractContextManager[Any] | None:
    """For a command line lm-eval has parsed: None unless it is a ``run`` that names one of our models or tasks (by its
    flags, else its ``--config`` file's); else the context its task index is to be built in
    (:func:`~harness.plugin.discovery.task_index_for`), with a ``device`` / ``batch_size`` / ``max_batch_size`` of
    ``--model_args`` moved to lm-eval's flag of that name (:func:`move_run_settings`)."""
    if getattr(args, "command", None) != "run":
        return None
    config: dict[str, Any] = {}
    if getattr(args, "config", None):
        with contextlib.suppress(Exception):  # lm-eval reports its own config file's problems
            from lm_eval.config.evaluate_config import EvaluatorConfig

            config = EvaluatorConfig.load_yaml_config(args.config)
    model = getattr(args, "model", None) or config.get("model")
    tasks = getattr(args, "tasks", None) or config.get("tasks") or []
    tasks = [t.strip() for t in (tasks.split(",") if isinstance(tasks, str) else tasks) if isinstance(t, str)]
    include_path = getattr(args, "include_path", None) or config.get("include_path")
    if not (model in model_names() or our_tasks(tasks, include_path)):
        return None
    samples = getattr(args, "samples", None)  # lm-eval's config reads a file of them with no word of which flag
    if isinstance(samples, str) and not samples.lstrip().startswith(("{", "[")) and os.path.isfile(samples):
        try:
            json.loads(Path(samples).read_text(encoding="utf-8", errors="replace"))
        except json.JSONDecodeError as err:
            raise UsageError(
                f"--samples file {samples} is not valid JSON ({err.msg} at line {err.lineno}): give a file "
                "holding '{\"<task>\": [<doc indices>]}'"
            ) from None
    move_run_settings(args)
    return task_index_for(tasks, include_path)


def move_run_settings(args: argparse.Namespace) -> None:
    """A ``device`` / ``batch_size`` / ``max_batch_size`` of a parsed ``--model_args`` becomes lm-eval's flag of that
    name; given both ways with different values: one line."""
    model_args = getattr(args, "model_args", None)
    if not isinstance(model_args, dict):
        return
    for key in RUN_SETTINGS:
        if key in model_args:
            value, flagged = model_args.pop(key), getattr(args, key, None)
            if flagged is not None and str(flagged) != str(value):
                raise UsageError(
                    f"{key} is given twice, {value} in --model_args and {flagged} by --{key}: give it once"
                )
            setattr(args, key, value)


def as_lch_eval(argv: list[str]) -> contextlib.ExitStack[bool | None]:
    """lm-eval's command line reading ``lm_eval <argv>``, its parser's errors one line naming ``lch eval``."""
    import re

    def error(parser: argparse.ArgumentParser, message: str):  # noqa: ANN202
        # argparse names a flag's type function: lm-eval's --seed type is a functools.partial, meaningless to a user
        message = re.sub(r"invalid (functools\.partial\(.*\)|<lambda>) value:", "invalid value:", message)
        raise UsageError(f"lch eval: {message}; see `lch eval --help`")

    stack: contextlib.ExitStack[bool | None] = contextlib.ExitStack()
    stack.enter_context(patched(sys, "argv", ["lm-eval", *argv]))
    stack.enter_context(patched(argparse.ArgumentParser, "error", error))
    return stack


def run_lch_eval(argv: list[str]) -> None:
    """``lm_eval <argv>`` as lm-eval's own ``cli_evaluate`` runs it, under :func:`as_lch_eval`, its command line
    fronted (:func:`after_cli_import`) as the start-up activation would; any run's ``--model_args`` settings moved
    (:func:`move_run_settings`)."""
    from lm_eval.utils import setup_logging

    from harness.plugin.discovery import harness_cli

    setup_logging()
    with as_lch_eval(argv):
        cli = harness_cli()
        after_cli_import(sys.modules[type(cli).__module__])
        args = cli.parse_args()
        move_run_settings(args)
        cli.execute(args)


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
            scope = front(args)
        except Exception as err:  # noqa: BLE001 (a user error of ours: one line; else lm-eval's command line as it is)
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
    close_progress_bars()
    print(f"lch: error: {getattr(err, 'on_command_line', err)}", file=sys.stderr)
    raise SystemExit(err.exit_code) from None


class _Arrived(Exception):
    """lm-eval's ``run`` command has called ``simple_evaluate``: its arguments."""


def planned_run(argv: list[str]) -> dict[str, Any]:
    """``simple_evaluate``'s arguments as lm-eval's own ``run`` command makes them of ``lch eval <argv>`` (its parser,
    its config object, its task manager; nothing is loaded or evaluated), lm-eval's settings checked by the door's
    :func:`~harness.plugin.preflight.check_run_settings`, and its ``include_path``; of a run that names none of ours,
    what its flags say."""
    import lm_eval.evaluator

    from harness.plugin.discovery import harness_cli

    with as_lch_eval(argv):
        cli = harness_cli()
        args = inspect.unwrap(type(cli).parse_args)(cli)  # lm-eval's own parse: what our hook adds is done here
    scope = front(args)
    if scope is None:  # none of ours: the plan says so, naming the tasks
        tasks = getattr(args, "tasks", None) or []
        return {
            "model": getattr(args, "model", None),
            "model_args": getattr(args, "model_args", None),
            "tasks": tasks.split(",") if isinstance(tasks, str) else list(tasks),
            "metadata": getattr(args, "metadata", None),
            "include_path": getattr(args, "include_path", None),
        }

    def arrive(*_: Any, **arguments: Any) -> None:
        raise _Arrived(arguments)

    lm_eval_run = inspect.unwrap(args.func)  # lm-eval's own, whatever wraps it in this process
    try:
        with patched(lm_eval.evaluator, "simple_evaluate", arrive), scope:
            lm_eval_run(args)
    except _Arrived as arrived:
        arguments = arrived.args[0]
        check_run_settings(arguments)  # what is ours: make_plan's preflight
        return {**arguments, "include_path": getattr(arguments.get("task_manager"), "include_path", None)}
    return {}  # lm-eval's run command ended before a run (nothing to plan)
