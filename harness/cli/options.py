"""Command-line options generated from a dataclass's fields: ``--field-name`` (``metadata["flag"]``; ``False``: none),
the annotation's type, ``metadata["choices"]`` and ``["help"]``; a bool is a switch flipping its default; a field
without a default is required, and an option not given stays out of the namespace (the dataclass default applies)."""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, Field, fields
from typing import Any


def _type(annotation: Any) -> type:
    """``X`` of an annotation ``X`` or ``X | None``."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        kinds = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(kinds) == 1:
            return kinds[0]
    if annotation in (bool, int, float, str):
        return annotation
    raise TypeError(f"no command-line type for the annotation {annotation!r}")


def flag(f: Field) -> str | None:
    """The option string of field ``f`` (``None``: the field is not an option)."""
    given = f.metadata.get("flag")
    if given is False:
        return None
    if given:
        return given
    name = f.name.replace("_", "-")
    return f"--no-{name}" if f.default is True else f"--{name}"


def default_text(cls: type, name: str, shown: Mapping[str, str] | None = None) -> str:
    """``" (default X)"`` for field ``name``'s help: its default, else ``shown[name]``; ``""`` when there is none."""
    f = next(f for f in fields(cls) if f.name == name)
    value = f.default if f.default not in (MISSING, None) else (shown or {}).get(name)
    return "" if value is None else f" (default {value})"


def add_options(parser: argparse.ArgumentParser, cls: type, shown: Mapping[str, str] | None = None) -> None:
    """Add one option per field of the dataclass ``cls`` to ``parser``; ``shown``: help defaults for ``None`` ones."""
    hints = typing.get_type_hints(cls)
    for f in fields(cls):
        option = flag(f)
        if option is None:
            continue
        text = f.metadata.get("help", "")
        kind = _type(hints[f.name])
        if kind is bool:
            parser.add_argument(
                option,
                dest=f.name,
                action="store_false" if f.default else "store_true",
                default=argparse.SUPPRESS,
                help=text.replace("%", "%%"),
            )
            continue
        help_text = (text + default_text(cls, f.name, shown)).replace("%", "%%")
        extra: dict[str, Any] = {"required": True} if f.default is MISSING else {"default": argparse.SUPPRESS}
        if "choices" in f.metadata:
            extra["choices"] = list(f.metadata["choices"])
        parser.add_argument(option, dest=f.name, type=kind, help=help_text, **extra)


def given_options(cls: type, args: argparse.Namespace) -> dict[str, Any]:
    """The fields of ``cls`` that ``args`` holds (the options given, and required ones)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in vars(args).items() if k in names}
