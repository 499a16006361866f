"""The errors a user can act on: one line saying what is wrong and what to do, and an exit code; ``lch`` prints
``lch: error: <message>`` without a traceback (``--debug`` or ``LCH_DEBUG=1`` shows it). Exit codes of ``lch``: 0 done;
1 ``lch regress`` found a regression; 2 the user must fix something (:class:`LchError`); 3 runs put side by side
were not run alike (:mod:`harness.reporting.comparability`); 70 an internal error (a bug); 130 interrupted."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection, Iterator
from typing import Any

EXIT_OK, EXIT_REGRESSION, EXIT_USAGE, EXIT_NOT_COMPARABLE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 70, 130


class LchError(Exception):
    """A user mistake or a missing input; ``str(err)`` is one line: what is wrong; what to do."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))  # one line, whatever the message was built from


class UsageError(LchError, ValueError):
    """A bad argument, model arg, metadata key or value (a ValueError, so library callers can catch it so)."""


def check_known(what: str, value: Any, allowed: Collection[str]) -> None:
    """:class:`UsageError` "<what> <value!r> is unknown; allowed: <a, b, ...>" unless ``value`` is in ``allowed``."""
    if value not in allowed:
        raise UsageError(f"{what} {value!r} is unknown; allowed: {', '.join(allowed)}")


class DataFormatError(LchError, ValueError):
    """A file that exists but cannot be read as what it should be (names the file and the line)."""


class MissingDataError(LchError, RuntimeError):
    """Data, a model or a file that must be fetched or created first; the message says what and where."""


@contextlib.contextmanager
def missing_data_on_error(what: str, advice: str) -> Iterator[None]:
    """Any error in the block (a hub load: network, auth, cache) as MissingDataError "<what> (<type>); <advice>"."""
    try:
        yield
    except Exception as err:
        raise MissingDataError(f"{what} ({type(err).__name__}); {advice}") from err


class IncompleteError(LchError, RuntimeError):
    """A service the work needs (a judge server) did not finish: nothing is computed from a partial answer; the
    message says what failed and how the same command resumes."""


DEBUG_VARIABLE = "LCH_DEBUG"  # "1": every error keeps its traceback (what `lch --debug` sets for its command)


def debug_enabled() -> bool:
    """Whether tracebacks are shown for every error (``LCH_DEBUG=1``, or ``--debug`` on an ``lch`` command)."""
    return os.environ.get(DEBUG_VARIABLE) == "1"
