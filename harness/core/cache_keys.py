"""The key of data a task generates from its options and caches, derived from the options' declaration: each field
says with its ``option(..., shapes=...)`` how it changes the data (:data:`harness.core.options.SHAPES`), so that an
option added to a cached task's options enters the key by being declared, and one that says nothing is refused."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

from harness.core.options import SHAPES


def undeclared_shapes(cls: type) -> list[str]:
    """The fields of the options dataclass ``cls`` that do not declare how they shape its data (``shapes``)."""
    return [f.name for f in dataclasses.fields(cls) if "shapes" not in f.metadata]


OMIT = object()  # a resolver's answer for a field that does not enter this key (a source the task does not read)


def data_key(options: Any, resolve: Mapping[str, Callable[[str], Any]]) -> dict[str, Any]:
    """The part of a cached dataset's key that its options give: ``{field: keyed value}`` for every field whose
    declared ``shapes`` is not ``no``: the value itself for ``value``, else ``resolve[shapes](field name)`` (a
    fingerprint, the entry's length; :data:`OMIT` leaves the field out). A field that declares nothing is a
    ``TypeError``: every field of a cached task's options says whether it changes the data."""
    missing = undeclared_shapes(type(options))
    if missing:
        raise TypeError(f"{type(options).__name__}: {', '.join(missing)} declare no shapes= (how each changes the "
                        "cached data; one of " + ", ".join(SHAPES) + ")")
    key: dict[str, Any] = {}
    for f in dataclasses.fields(options):
        how = f.metadata["shapes"]
        if how == "no":
            continue
        value = getattr(options, f.name) if how == "value" else resolve[how](f.name)
        if value is not OMIT:
            key[f.name] = value
    return key
