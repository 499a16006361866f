"""The errors a user can act on: one line saying what is wrong and what to do, and an exit code.

Raised wherever the package checks its input; ``lch`` prints ``lch: error: <message>`` on stderr and exits
with the error's code, without a traceback (``--debug`` or ``LCH_DEBUG=1`` shows it). Anything else that
escapes is a bug and keeps its traceback (exit 70).

Exit codes of ``lch``:

* 0: done;
* 1: ``lch regress`` found a regression;
* 2: something the user must fix: a bad argument, model arg, metadata key or value (:class:`UsageError`),
  a malformed file (:class:`DataFormatError`), data or a model that must be fetched first
  (:class:`MissingDataError`), a service that failed the run (:class:`IncompleteError`: a judge server);
* 3: runs put side by side that were not run alike (``lch agree``, ``lch leaderboard``, ``lch correlate``,
  ``lch plot``, ``lch regress``: :mod:`harness.reporting.comparability`);
* 70: an internal error (a bug: please report it with the traceback);
* 130: interrupted.
"""

from __future__ import annotations

import os

EXIT_OK, EXIT_REGRESSION, EXIT_USAGE, EXIT_NOT_COMPARABLE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 70, 130


class LchError(Exception):
    """A user mistake or a missing input; ``str(err)`` is one line: what is wrong; what to do."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))  # one line, whatever the message was built from


class UsageError(LchError, ValueError):
    """A bad argument, model arg, metadata key or value (a ValueError, so library callers can catch it so)."""


class DataFormatError(LchError, ValueError):
    """A file that exists but cannot be read as what it should be (names the file and the line)."""


class MissingDataError(LchError, RuntimeError):
    """Data, a model or a file that must be fetched or created first; the message says what and where."""


class IncompleteError(LchError, RuntimeError):
    """Work a service it needs failed to finish (a judge server that did not answer every request): what was asked
    for is not computed from what happened to arrive; the message says what failed and how the same command
    resumes from what was kept."""


DEBUG_VARIABLE = "LCH_DEBUG"  # "1": every error keeps its traceback (what `lch --debug` sets for its command)


def debug_enabled() -> bool:
    """Whether tracebacks are shown for every error (``LCH_DEBUG=1``, or ``--debug`` on an ``lch`` command)."""
    return os.environ.get(DEBUG_VARIABLE) == "1"
