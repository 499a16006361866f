"""A metric a run could not compute because a service failed it (a judge server): the run still writes its
results (the metric absent, with the reason), then its command ends with one ``lch: error:`` line and exit 2.
The messages wait in this process's queue between the task that met the failure and the command that ends."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

_incomplete: list[str] = []  # what a run of this process could not compute for a failed service (report_incomplete)


def report_incomplete(message: str) -> None:
    """Say that the current run could not compute a metric it was asked for because a service failed it (a judge
    server): its results are still written (the metric absent, with the reason), then its command ends with this
    message as one ``lch: error:`` line and exit 2 (:func:`take_incomplete`)."""
    log.warning("%s", message)
    _incomplete.append(message)


def take_incomplete() -> list[str]:
    """The messages of :func:`report_incomplete` since the last call (emptied)."""
    found = list(_incomplete)
    _incomplete.clear()
    return found


def raise_if_incomplete() -> None:
    """After a command has written its results: :class:`~harness.core.errors.IncompleteError` (one line, exit 2) with
    what :func:`report_incomplete` said since the last call, if anything."""
    failed = take_incomplete()
    if failed:
        from harness.core.errors import IncompleteError

        raise IncompleteError("; ".join(failed))
