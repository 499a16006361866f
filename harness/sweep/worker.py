"""One cell run where Ray placed it: ``lch eval`` in a child process of the Ray worker, its output written into a
temporary folder renamed to the cell's folder only when the run ends well, its log kept. A user error (exit 2, 3)
is the cell's outcome, never retried; a child killed by a signal raises :class:`CellKilled`, which Ray retries as it
retries a worker that died (the child dies with its worker: ``PR_SET_PDEATHSIG``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import EXIT_INTERRUPTED, EXIT_OK
from harness.core.files import atomic_folder, write_json_atomic

CELLS = "cells"  # <sweep>/cells/<label>-<identity>/: a cell's result
COMPLETE = "cell.json"  # written last inside a cell's folder: the cell has a complete result
LOGS = "logs"


class CellKilled(RuntimeError):
    """The cell's ``lch eval`` was killed by a signal (out of memory, a node going away): Ray runs it again."""


@dataclass(frozen=True)
class Outcome:
    """How a cell's run ended: ``status`` done / failed, the exit code, its one line when it failed, seconds, where."""

    status: str
    exit_code: int
    line: str
    seconds: float
    node: str
    attempt: int
    began: float = 0.0  # epoch seconds the Ray task's body began and ended (Ray's own overhead is around them)
    ended: float = 0.0


def _die_with_parent() -> None:  # pragma: no cover (runs in the child between fork and exec)
    """The child gets SIGKILL when the Ray worker that started it dies (Linux), so a retried cell never runs twice."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def error_line(log: Path) -> str:
    """The last ``lch: error:`` line of a cell's log (else its last line): what the sweep reports for a failed cell."""
    try:
        lines = [
            line.strip() for line in log.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()
        ]
    except OSError:
        return "no log was written"
    errors = [line for line in lines if line.startswith("lch: error:")]
    return (errors or lines or ["no output"])[-1]


def run_cell(argv: list[str], folder: str, record: dict, env: dict[str, str], threads: int, cwd: str) -> Outcome:
    """Run ``lch eval argv --output_path <tmp>`` in ``cwd`` and move its output to ``folder`` with ``record`` as
    :data:`COMPLETE`; the log goes to ``<sweep>/logs/<folder name>.log`` (appended, one block per attempt)."""
    began = time.time()
    target = Path(folder)
    log = target.parent.parent / LOGS / f"{target.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    node = _node()
    attempt = _attempt(log)
    environ = {**os.environ, **env, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    start = time.perf_counter()
    with atomic_folder(target, prefix=f".{target.name}.attempt{attempt}.") as tmp:
        with log.open("a", encoding="utf-8") as out:
            out.write(f"=== attempt {attempt} on node {node}, pid {os.getpid()}: lch eval {' '.join(argv)}\n")
            out.flush()
            done = subprocess.run(
                [sys.executable, "-m", "harness.cli", "eval", *argv, "--output_path", str(tmp)],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=environ,
                preexec_fn=_die_with_parent,
                check=False,
            )
        seconds = time.perf_counter() - start
        if done.returncode < 0 or done.returncode == EXIT_INTERRUPTED:
            raise CellKilled(f"lch eval ended by signal {-done.returncode} after {seconds:.0f} s")
        if done.returncode != EXIT_OK:  # nothing of a failed run becomes the cell's result
            raise _Failed(
                Outcome("failed", done.returncode, error_line(log), seconds, node, attempt, began, time.time())
            )
        write_json_atomic(
            tmp / COMPLETE, {**record, "seconds": round(seconds, 2), "node": node, "attempt": attempt}, indent=2
        )
    return Outcome("done", EXIT_OK, "", seconds, node, attempt, began, time.time())


def _node() -> str:
    """The Ray node this runs on (the first 8 hex digits of its id), "local" outside a Ray task."""
    try:
        import ray

        return str(ray.get_runtime_context().get_node_id())[:8] if ray.is_initialized() else "local"
    except ImportError:
        return "local"


class _Failed(Exception):
    """Leaves :func:`atomic_folder` without renaming; carries the failed cell's outcome out of it."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.line)
        self.outcome = outcome


def run_cell_reporting(
    argv: list[str], folder: str, record: dict, env: dict[str, str], threads: int, cwd: str
) -> Outcome:
    """:func:`run_cell` with a failed run returned as its :class:`Outcome` (the Ray task's body)."""
    try:
        return run_cell(argv, folder, record, env, threads, cwd)
    except _Failed as failed:
        return failed.outcome


def _attempt(log: Path) -> int:
    """This attempt's number: one more than the attempts the cell's log records."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return 1
    return 1 + sum(line.startswith("=== attempt ") for line in text.splitlines())
