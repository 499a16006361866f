"""Task options as typed, frozen dataclasses declared with :func:`option`, and the one parser that builds them from
lm-eval's flat ``metadata`` dict (:func:`parse_options`): values convert as lm-eval's CLI delivers them (``"4"``,
``"true"``, ``"1k,2k"``, ``"none"``); a missing key, None, or an empty string for a non-string field takes the default;
keys without a field are left alone; a wrong type or a value outside the field's domain is one line."""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from collections.abc import Callable, Iterable, KeysView, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, Union

from harness.core.errors import UsageError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")
# no released model reads more tokens: a length or budget above it is a typo (1e12), not a run
MAX_TOKENS = 10_000_000
# items a task evaluates: about 6x the largest evaluation set our tasks read (MRQA's SearchQA dev, ~17k questions)
MAX_SAMPLES = 100_000
MAX_SEED = 2**32 - 1  # numpy's and torch's generators take seeds in [0, 2**32)
_NONE_WORDS = frozenset({"none", "null"})
_TRUE = frozenset({"true", "yes", "1", "on"})
_FALSE = frozenset({"false", "no", "0", "off"})


# how a field enters the key of cached task data (harness.core.cache_keys.data_key): declared, so never forgotten
CACHE_KEY_KINDS = {
    "value": "its value",
    "source": "the content of the file or folder it names, when the task reads it (the task's fingerprint of it)",
    "tokenizer": "the tokenizer the prompts are counted in, chat template included (the counter's fingerprint)",
    "entry": "one cached entry per value (a length): the entry's own value is in the entry's key",
    "no": "nothing: it changes how the data is cut, scored or read, not the data",
}


def option(
    default: Any = dataclasses.MISSING,
    help: str = "",
    choices: Iterable[str] | None = None,
    *,
    low: float | None = None,
    high: float | None = None,
    above: float | None = None,
    nonempty: bool = False,
    **metadata: Any,
) -> Any:
    """A dataclass field with its default, help string, domain (``choices``: allowed words; ``low`` / ``high``:
    inclusive bounds of a number or of each number of a list; ``above``: exclusive lower bound; ``nonempty``) and
    other metadata its readers use (``cache_key``: one of :data:`CACHE_KEY_KINDS`, else ``TypeError``)."""
    if "cache_key" in metadata and metadata["cache_key"] not in CACHE_KEY_KINDS:
        raise TypeError(f"cache_key={metadata['cache_key']!r} is not one of {', '.join(CACHE_KEY_KINDS)}")
    meta: dict[str, Any] = {"help": help, **metadata}
    if choices is not None:  # a registry's keys stay a live view: a method registered later is allowed
        meta["choices"] = choices if isinstance(choices, KeysView) else tuple(choices)
    meta.update({key: value for key, value in (("low", low), ("high", high), ("above", above)) if value is not None})
    if nonempty:
        meta["nonempty"] = True
    return dataclasses.field(default=default, metadata=meta)


def closest(word: Any, known: Iterable[str]) -> str:
    """``"; did you mean X?"`` for the known name closest to ``word`` (difflib's ratio >= 0.6), else ``""``."""
    import difflib

    match = difflib.get_close_matches(str(word), [str(k) for k in known], n=1, cutoff=0.6)
    return f"; did you mean {match[0]}?" if match else ""


def domain_problem(field: dataclasses.Field[Any], value: Any) -> str | None:
    """What is wrong with ``value`` (already of the field's type) in the field's declared domain, as the end of
    a sentence about the key (``"must be >= 1, got 0"``); None when it is inside."""
    meta = field.metadata
    if value is None:
        return None
    choices = meta.get("choices")
    if choices is not None and value not in choices:
        allowed = ", ".join(c or repr(c) for c in choices)
        return f"{value!r} is unknown; allowed: {allowed}{closest(value, [c for c in choices if c])}"
    if (
        meta.get("nonempty")
        and isinstance(value, (str, tuple, list))
        and not (value.strip() if isinstance(value, str) else value)
    ):
        return f"must not be empty, got {value!r}"
    low, high, above = meta.get("low"), meta.get("high"), meta.get("above")
    if low is None and high is None and above is None:
        return None
    numbers = value if isinstance(value, (tuple, list)) else (value,)
    for number in numbers:
        if not isinstance(number, (int, float)) or isinstance(number, bool):
            continue  # a word of a mixed list (a length label): its dataclass checks it
        if (
            (low is not None and number < low)
            or (high is not None and number > high)
            or (above is not None and not number > above)
            or number != number
        ):
            where = " (each value)" if isinstance(value, (tuple, list)) else ""
            return f"must be {_bounds(meta)}{where}, got {number!r}"
    return None


def _bounds(meta: Mapping[str, Any]) -> str:
    """A number's declared bounds in words (``>= 1``, ``> 0``, ``between 0 and 1``); ``""`` when none."""
    low, high, above = meta.get("low"), meta.get("high"), meta.get("above")
    if low is not None and high is not None:
        return f"between {_bound(low)} and {_bound(high)}"
    lower = f">= {_bound(low)}" if low is not None else f"> {_bound(above)}" if above is not None else ""
    upper = f"<= {_bound(high)}" if high is not None else ""
    return " and ".join(part for part in (lower, upper) if part)


def _bound(value: float) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


def _check_domain(field: dataclasses.Field[Any], value: Any, name: str) -> None:
    problem = domain_problem(field, value)
    if problem:
        raise UsageError(f"{name} {problem}")


def check_domains(obj: Any, label: Callable[[str], str] = lambda name: name) -> None:
    """Every field of the dataclass ``obj`` inside its declared domain (:func:`domain_problem`), else a one-line
    :class:`UsageError` ``{label(name)} {problem}`` (``label``: how the user wrote the key, e.g. :func:`flag_name`)."""
    for f in dataclasses.fields(obj):
        _check_domain(f, getattr(obj, f.name), label(f.name))


def check_fields(obj: Any, label: Callable[[str], str] = lambda name: name) -> None:
    """Each field of the dataclass ``obj`` (frozen or not), in order, converted by :func:`convert`'s rules, checked
    against its domain and set back; else one-line :class:`UsageError` (``label`` may read fields already checked)."""
    cls: type = type(obj)
    hints = _hints(cls)
    for f in dataclasses.fields(obj):
        value = convert(getattr(obj, f.name), hints[f.name], label(f.name))
        _check_domain(f, value, label(f.name))
        object.__setattr__(obj, f.name, value)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def describe_domain(field: dataclasses.Field[Any]) -> str:
    """A field's declared domain in words (``naive, ntk``; ``>= 1``; ``not empty``); ``""`` when it declares none."""
    meta = field.metadata
    choices = ", ".join(c or repr(c) for c in meta["choices"]) if meta.get("choices") is not None else ""
    parts = (choices, _bounds(meta), "not empty" if meta.get("nonempty") else "")
    return "; ".join(part for part in parts if part)


def option_help(cls: type) -> dict[str, str]:
    """``{key: help}`` of an options dataclass, in field order."""
    return {f.name: f.metadata.get("help", "") for f in dataclasses.fields(cls)}


class _BadValue(ValueError):
    """A value that does not convert to a field's type (the parser words the message)."""


def describe_type(tp: Any) -> str:
    """A field's type in words, as the error lines say it (``an integer (int) or none``)."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        words = " or ".join(describe_type(a) for a in args)
        return f"{words} or none" if type(None) in typing.get_args(tp) else words
    if origin in (tuple, list):
        return f"a list ({describe_type(args[0])} each; e.g. 1k,2k or [1024, 2048])"
    return {
        int: "an integer (int)",
        float: "a number (float)",
        bool: "true or false (bool)",
        str: "a string (str)",
    }.get(tp, getattr(tp, "__name__", str(tp)))


# pydantic (installed with openai; lch sweep's spec uses it) was tried for these conversions and not taken: its lax mode
# takes True for the number 1, "4.0" for the integer 4 and "t" / "y" for true, and has no "none" word, no "1k,2k" list
# and no str from a number or a Path, so every rule here would stay, as a validator around it, and every refusal
# would be re-worded from its errors: more code, not less, and the options' domains (a registry's live keys) its own.
def _convert(value: Any, tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        members = typing.get_args(tp)
        if type(None) in members and (
            value is None or (isinstance(value, str) and value.strip().lower() in _NONE_WORDS)
        ):
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
    raise TypeError(f"options of type {tp!r} are not supported by harness.core.options")


def convert(value: Any, tp: Any, name: str) -> Any:
    """``value`` as ``tp`` by :func:`parse_options`'s rules; else :class:`UsageError` ``{name} must be ...``."""
    try:
        return _convert(value, tp)
    except _BadValue:
        raise UsageError(f"{name} must be {describe_type(tp)}, got {value!r}") from None


def _takes_str(tp: Any) -> bool:
    return tp is str or tp is Any or str in typing.get_args(tp)


def metadata_key(name: str) -> str:
    """How a task option is written on lm-eval's command line: ``--metadata num_docs``."""
    return f"--metadata {name}"


def flag_name(name: str) -> str:
    """How an option is written as a flag of ``lch``: ``--num-docs``."""
    return "--" + name.replace("_", "-")


def parse_options(
    cls: type[T],
    metadata: Mapping[str, Any] | None,
    task: str | None = None,
    label: Callable[[str], str] = metadata_key,
) -> T:
    """``cls`` (an options dataclass) built from the keys of ``metadata`` that are its fields, converted to their
    types. A value that does not convert or is outside its domain is a one-line :class:`UsageError` naming ``task``
    and the key as ``label`` writes it; a :class:`UsageError` of ``cls``'s ``__post_init__`` gets the task named."""
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
        value = convert(raw, hints[f.name], f"{prefix}{label(f.name)}")
        _check_domain(f, value, f"{prefix}{label(f.name)}")
        values[f.name] = value
    try:
        return cls(**values)
    except UsageError as err:
        if task and not str(err).startswith(prefix):
            raise UsageError(f"{prefix}{err}") from None
        raise


def _number(value: Any, tp: type[int] | type[float]) -> int | float:
    """``value`` (a number or a numeric string) as an int or float; never a bool, nan, inf or a fraction for an int."""
    if isinstance(value, bool):
        raise _BadValue
    if isinstance(value, str):
        try:
            value = float(value.strip()) if tp is float else int(value.strip())
        except ValueError:
            raise _BadValue from None
    if tp is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, int) or (tp is float and isinstance(value, float) and math.isfinite(value)):
        return tp(value)
    raise _BadValue  # a bool, a fraction for an int, nan or inf: no value a user meant
