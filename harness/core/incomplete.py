"""Metrics a run could not compute because a service (a judge server) failed: collected while a command runs
(:func:`collecting`), which, once its results are written, ends with one ``lch: error:`` line and exit 2."""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager
from contextvars import ContextVar

from harness.core.context import setting

log = logging.getLogger(__name__)

_CURRENT: ContextVar[list[str] | None] = ContextVar("lch_incomplete", default=None)


def collecting() -> AbstractContextManager[list[str]]:
    """Within it, :func:`report_incomplete`'s messages go to the list it yields."""
    return setting(_CURRENT, [])


def report_incomplete(message: str) -> None:
    """Warn with ``message`` (the current run could not compute a metric because a service failed it) and collect it
    for the command running the run, if one collects."""
    log.warning("%s", message)
    found = _CURRENT.get()
    if found is not None:
        found.append(message)


def raise_if_incomplete(found: list[str]) -> None:
    """:class:`~harness.core.errors.IncompleteError` with the messages ``found`` (:func:`collecting`), if any."""
    if found:
        from harness.core.errors import IncompleteError

        raise IncompleteError("; ".join(found))
