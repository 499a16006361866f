"""Task options as typed, frozen dataclasses, and the one parser that builds them from ``--metadata``.

lm-eval hands every task (and its ``custom_dataset`` function) one flat ``metadata`` dict: the YAML's
``metadata:``, the model args and ``--metadata`` merged. A group of options is a frozen dataclass whose
fields are declared with :func:`option` (default written once, a help string, optional ``choices``);
:func:`parse_options` picks that dataclass's fields out of a metadata dict and converts the values the
way lm-eval's CLI delivers them (``"4"`` -> 4, ``"true"`` -> True, ``"1k,2k"`` -> ``("1k", "2k")``,
``"none"`` -> None), refusing a wrong value in one line that names the task, the key, the expected type
and the value. Keys the dataclass has no field for are left alone (other groups read them).

A missing key, a value of None, or an empty string for a field that is not a string takes the field's
default.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Iterable, Mapping, TypeVar, Union

from harness.errors import UsageError

T = TypeVar("T")
_NONE_WORDS = frozenset({"none", "null"})
_TRUE = frozenset({"true", "yes", "1", "on"})
_FALSE = frozenset({"false", "no", "0", "off"})


def option(default: Any = dataclasses.MISSING, help: str = "", choices: Iterable[str] | None = None,
           **metadata: Any) -> Any:
    """A dataclass field with its default, its help string, for a word option the allowed values, and any
    other metadata its readers use (``lch train``'s ``record`` / ``flag``: harness/train/config.py). Task
    options, training configs and their generated command lines all declare fields with it."""
    meta: dict[str, Any] = {"help": help, **metadata}
    if choices is not None:
        meta["choices"] = tuple(choices)
    return dataclasses.field(default=default, metadata=meta)


def option_help(cls: type) -> dict[str, str]:
    """``{key: help}`` of an options dataclass, in field order."""
    return {f.name: f.metadata.get("help", "") for f in dataclasses.fields(cls)}


class _BadValue(ValueError):
    """A value that does not convert to a field's type (the parser words the message)."""


def _describe(tp: Any) -> str:
    """The expected type in words, as the error line says it."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        words = " or ".join(_describe(a) for a in args)
        return f"{words} or none" if type(None) in typing.get_args(tp) else words
    if origin in (tuple, list):
        return f"a list ({_describe(args[0])} each; e.g. 1k,2k or [1024, 2048])"
    return {int: "an integer (int)", float: "a number (float)", bool: "true or false (bool)",
            str: "a string (str)"}.get(tp, getattr(tp, "__name__", str(tp)))


def _convert(value: Any, tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        members = typing.get_args(tp)
        if type(None) in members and (value is None or (isinstance(value, str) and value.strip().lower() in _NONE_WORDS)):
            return None
        for member in (m for m in members if m is not type(None)):
            try:
                return _convert(value, member)
            except _BadValue:
                continue
        raise _BadValue
    if origin in (tuple, list):
        item = typing.get_args(tp)[0]
        if isinstance(value, str):
            items = [part.strip() for part in value.strip().strip("[]").split(",") if part.strip()]
        elif isinstance(value, (list, tuple)):
            items = list(value)
        else:
            items = [value]
        return tuple(_convert(x, item) for x in items)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise _BadValue
    if tp in (int, float):
        return _number(value, tp)
    if tp is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):  # lm-eval's literal_eval made it a number
            return str(value)
        if hasattr(value, "__fspath__"):  # a Path given from Python
            return str(value.__fspath__())
        raise _BadValue
    raise TypeError(f"options of type {tp!r} are not supported by harness.options")


def convert(value: Any, tp: Any, name: str) -> Any:
    """``value`` as type ``tp`` by the rules :func:`parse_options` applies to each field (strings parsed, no
    bool taken for a number, no fractional float for an int); a value that does not convert is a one-line
    :class:`UsageError`: ``{name} must be {the type in words}, got {value!r}``."""
    try:
        return _convert(value, tp)
    except _BadValue:
        raise UsageError(f"{name} must be {_describe(tp)}, got {value!r}") from None


def _takes_str(tp: Any) -> bool:
    return tp is str or tp is Any or str in typing.get_args(tp)


def parse_options(cls: type[T], metadata: Mapping[str, Any] | None, task: str | None = None) -> T:
    """``cls`` (an options dataclass) built from the keys of ``metadata`` that are its fields.

    Values are converted to the field types (module docstring); a value that does not convert, or a word
    outside a field's ``choices``, raises :class:`UsageError` with one line naming ``task``, the key, the
    expected type and the value. A check the dataclass makes itself (``__post_init__``) raising
    :class:`UsageError` is re-raised with the task named."""
    metadata = metadata or {}
    hints = typing.get_type_hints(cls)
    prefix = f"{task}: " if task else ""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in metadata or metadata[f.name] is None:
            continue
        raw = metadata[f.name]
        if isinstance(raw, str) and not raw.strip() and not _takes_str(hints[f.name]):
            continue  # `key=` with nothing after it: not given
        try:
            value = _convert(raw, hints[f.name])
        except _BadValue:
            raise UsageError(f"{prefix}--metadata {f.name} must be {_describe(hints[f.name])}, got {raw!r}") from None
        choices = f.metadata.get("choices")
        if choices is not None and value is not None and value not in choices:
            raise UsageError(f"{prefix}--metadata {f.name} {value!r} is unknown; allowed: {', '.join(c or repr(c) for c in choices)}")
        values[f.name] = value
    try:
        return cls(**values)
    except UsageError as err:
        if task and not str(err).startswith(prefix):
            raise UsageError(f"{prefix}{err}") from None
        raise


def _number(value: Any, tp: type) -> int | float:
    """``value`` as an int or a float: numbers (an int only from a whole float), or a string that parses as
    one; never a bool (``True`` is no number a user meant)."""
    if isinstance(value, bool):
        raise _BadValue
    if isinstance(value, str):
        try:
            return tp(value.strip())
        except ValueError:
            raise _BadValue from None
    if tp is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, int) or (tp is float and isinstance(value, float)):
        return tp(value)
    raise _BadValue
