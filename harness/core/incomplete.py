"""Metrics a run could not compute because a service (a judge server) failed: queued until the command, once its
results are written, ends with one ``lch: error:`` line and exit 2."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

_incomplete: list[str] = []  # what a run of this process could not compute for a failed service (report_incomplete)


def report_incomplete(message: str) -> None:
    """Queue ``message``: the current run could not compute a metric because a service failed it."""
    log.warning("%s", message)
    _incomplete.append(message)


def take_incomplete() -> list[str]:
    """The messages of :func:`report_incomplete` since the last call (emptied)."""
    found = list(_incomplete)
    _incomplete.clear()
    return found


def raise_if_incomplete() -> None:
    """:class:`~harness.core.errors.IncompleteError` with what :func:`report_incomplete` queued, if anything."""
    failed = take_incomplete()
    if failed:
        from harness.core.errors import IncompleteError

        raise IncompleteError("; ".join(failed))
