"""lch: the harness command line: lm-eval runs with our checks first (eval), what a run will cost before it runs (plan),
a result made again from its file (rerun), what a task or model reads (options),
models and environments, LongPPL key tokens, the judge stage, training, and reports read from result files. Each
command's one-line summary below is its own help (the ``help=`` it registers); ``lch COMMAND --help`` says the rest.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path

from harness.cli import (
    demo,
    describe,
    engines,
    evaluate,
    judging,
    longppl,
    models,
    plan,
    reports,
    rerun,
    sweep,
    training,
)
from harness.core.errors import (
    DEBUG_VARIABLE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    LchError,
    UsageError,
    debug_enabled,
)
from harness.plugin.translate import close_progress_bars, given_models, translate

EPILOG = (
    "errors: one line 'lch: error: ...' and exit 2 (user input), 1 (lch regress: regression), 70 (a bug, "
    "with its traceback); --debug or LCH_DEBUG=1 shows the traceback of any error."
)
# commands whose arguments are lm-eval's (plan: and a few of ours), dispatched before argparse
BEFORE_ARGPARSE = {"eval": evaluate.run_eval, "plan": plan.run_plan}
COMMANDS = (
    evaluate,
    plan,
    sweep,
    rerun,
    describe,
    demo,
    models,
    engines,
    longppl,
    judging,
    training,
    reports,
)  # help lists them in this order


def plain_text(text: str) -> str:
    """Docstring markup as a terminal shows it: ``x`` and :role:`~x` become x."""
    text = re.sub(r"``([^`]+)``", r"\1", text)
    return re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", text)


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are our one-line user errors and whose help is plain text (descriptions are docstrings)."""

    def error(self, message: str):
        where = "" if self.prog == "lch" else f"{self.prog}: "  # the top level is already "lch: error:"
        raise UsageError(f"{where}{message}; see `{self.prog} --help`")

    def format_help(self) -> str:
        return plain_text(super().format_help())


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="lch", description=__doc__, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one ``lch`` command; a user error becomes ``lch: error: ...`` and its exit code (harness.core.errors)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--debug" in argv:  # the whole command, lm-eval's part of `lch eval` included, keeps its tracebacks
        with _debugging():
            return main([a for a in argv if a != "--debug"])
    debug = debug_enabled()
    try:
        previous = _on_sigterm_interrupt()
        try:
            return _run(argv)
        finally:  # inside the outer try: an interrupt arriving while the handler is restored is still one line
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
    except KeyboardInterrupt:
        close_progress_bars()
        print(f"lch: error: interrupted; {interrupted_hint(argv)}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except SystemExit as done:  # --help / --version (argparse, lm-eval): their own exit code, as an int
        return done.code if isinstance(done.code, int) else (EXIT_OK if done.code is None else EXIT_USAGE)
    except Exception as err:  # noqa: BLE001 (sorted below: user errors become one line, bugs keep their traceback)
        user_error = err if isinstance(err, LchError) else translate(err, given_models(argv), _include_path(argv))
        if user_error is None or debug:
            if user_error is None:
                print("lch: internal error (a bug; please report it with this traceback):", file=sys.stderr)
            traceback.print_exc()
            return user_error.exit_code if user_error is not None else EXIT_INTERNAL
        close_progress_bars()
        print(f"lch: error: {user_error}", file=sys.stderr)
        return user_error.exit_code


def _include_path(argv: list[str]) -> str | None:
    """``lch eval``'s ``--include_path`` (lm-eval's flag), for the error that names the closest task."""
    given = [
        b if a == "--include_path" else a.partition("=")[2]
        for a, b in zip(argv, [*argv[1:], ""])
        if a == "--include_path" or a.startswith("--include_path=")
    ]
    return given[0] if argv[:1] == ["eval"] and given else None


@contextlib.contextmanager
def _debugging() -> Iterator[None]:
    """``LCH_DEBUG=1`` for the duration of one command (restored after it: ``main`` is also called in-process)."""
    previous = os.environ.get(DEBUG_VARIABLE)
    os.environ[DEBUG_VARIABLE] = "1"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(DEBUG_VARIABLE, None)
        else:
            os.environ[DEBUG_VARIABLE] = previous


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled as Ctrl-C (SIGINT) is: the command stops, says what it kept, exits 130."""


def _raise_terminated(signum: int, frame) -> None:
    raise Terminated()


def _on_sigterm_interrupt():
    """Install the SIGTERM handler (main thread only); returns the previous one to restore, or None."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _raise_terminated)


def interrupted_hint(argv: list[str]) -> str:
    """What an interrupted command kept and how to resume it, in words (one line)."""
    command = argv[0] if argv else ""
    if command == "eval":
        return (
            "responses computed so far are kept in the --use_cache response cache: run the same command to resume"
            if "--use_cache" in argv or any(a.startswith("--use_cache=") for a in argv)
            else "nothing was kept (add --use_cache PATH to keep responses across runs); run it again"
        )
    if command == "judge":
        return "the judge answers received so far are cached: run the same command to resume"
    if command == "train" and argv[1:2] != ["merge"]:
        return "the last checkpoint (if one was saved) is in --output: add --resume to the same command to continue"
    if command == "models":
        return "nothing was kept: run it again"
    return "run the same command again"


OUTPUT_ARGS = ("output", "junit")  # the arguments that name what a command writes


def _new_paths(args: argparse.Namespace) -> list[Path]:
    """The outermost paths a command's outputs would create (each one's first missing ancestor); the outputs are what
    the subcommand declares (``set_defaults(outputs=f)``), else the values of :data:`OUTPUT_ARGS`."""
    declared = getattr(args, "outputs", None)
    outputs = declared(args) if callable(declared) else [getattr(args, name, None) for name in OUTPUT_ARGS]
    found = []
    for value in outputs:
        if not isinstance(value, str) or not value:
            continue
        path = Path(value).expanduser().absolute()
        try:
            while not path.parent.exists() and path.parent != path:
                path = path.parent
            if not path.exists():
                found.append(path)
        except OSError:  # a name too long for the file system: nothing can be created there
            continue
    return found


def _remove(paths: list[Path]) -> None:
    for path in paths:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        elif path.exists() or path.is_symlink():
            path.unlink(missing_ok=True)


def _run(argv: list[str]) -> int:
    from harness.core.cache import check_folder_variables

    check_folder_variables()  # a cache variable naming a file fails here, in a second, for every command
    if argv and argv[0] in BEFORE_ARGPARSE:
        return BEFORE_ARGPARSE[argv[0]](argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "handler", None) is None:
        parser.print_help()
        return EXIT_USAGE
    created = _new_paths(args)
    try:
        return args.handler(args)
    except Exception:
        _remove(created)  # a failed command leaves no half-written output (an interrupted one keeps it: resume)
        raise


if __name__ == "__main__":
    sys.exit(main())
