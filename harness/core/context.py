"""A context variable's value for the length of a ``with`` block (a run's cost, its chat template, what it collects)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any, TypeVar, overload

T = TypeVar("T")


@overload
def setting(var: ContextVar[T | None], value: T) -> contextlib.AbstractContextManager[T]: ...
@overload
def setting(var: ContextVar[T], value: T) -> contextlib.AbstractContextManager[T]: ...


@contextlib.contextmanager
def setting(var: ContextVar[Any], value: Any) -> Iterator[Any]:
    """``var`` set to ``value`` (yielded) within the block, and back to what it was after it."""
    token = var.set(value)
    try:
        yield value
    finally:
        var.reset(token)


@contextlib.contextmanager
def patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    """``owner``'s attribute ``name`` set to ``value`` within the block, and back to what it was after it."""
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


if sys.version_info >= (3, 11):
    from contextlib import chdir
else:  # contextlib.chdir is Python 3.11's

    @contextlib.contextmanager
    def chdir(path: str | os.PathLike[str]) -> Iterator[None]:
        """The working directory set to ``path`` within the block, and back to what it was after it."""
        before = os.getcwd()
        os.chdir(path)
        try:
            yield
        finally:
            os.chdir(before)
