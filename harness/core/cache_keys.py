"""The key of data a task generates from its options and caches: each field declares how it enters that key with
``option(..., cache_key=...)`` (:data:`harness.core.options.CACHE_KEY_KINDS`); a field that declares nothing is
refused."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from harness.core.options import CACHE_KEY_KINDS


def undeclared_cache_key(cls: type) -> list[str]:
    """The fields of the options dataclass ``cls`` that do not declare how they shape its data (``cache_key``)."""
    return [f.name for f in dataclasses.fields(cls) if "cache_key" not in f.metadata]


OMIT = object()  # a resolver's answer for a field that does not enter this key (a source the task does not read)


def data_key(options: Any, resolve: Mapping[str, Callable[[str], Any]]) -> dict[str, Any]:
    """The options' part of a cached dataset's key: ``{field: keyed value}`` for each field whose ``cache_key`` is not
    ``no``: the value for ``value``, else ``resolve[cache_key](field name)`` (:data:`OMIT` leaves the field out).
    ``TypeError`` when a field declares no ``cache_key``."""
    missing = undeclared_cache_key(type(options))
    if missing:
        raise TypeError(
            f"{type(options).__name__}: {', '.join(missing)} declare no cache_key= (how each changes the "
            "cached data; one of " + ", ".join(CACHE_KEY_KINDS) + ")"
        )
    key: dict[str, Any] = {}
    for f in dataclasses.fields(options):
        how = f.metadata["cache_key"]
        if how == "no":
            continue
        value = getattr(options, f.name) if how == "value" else resolve[how](f.name)
        if value is not OMIT:
            key[f.name] = value
    return key
