"""``Inference``: the PIC / RoPE settings a model is run with, as one typed value (the PIC paper, docs/formulas.md §1).

The one home of these settings: their defaults (the dataclass fields below; Dynamic PIC's from its formula's
module, :mod:`harness.pic.positions`), their
checks (one-line :class:`~harness.core.errors.UsageError` naming the field), their two spellings —

* ``hf-pic`` / ``vllm-pic`` model args: ``pic``, ``pic_ratio``, ``pic_initial``, ``pic_recent``,
  ``pic_layout``, ``rope_base``, ``pic_impl`` (strings converted, ``rope_base=none`` for the model's own);
* the ``inference`` block of a variant file (``lch_variant.json``): the same keys without ``pic_impl``;

— which fields matter (:meth:`Inference.effective`, from the method's registry entry) and the settings in
words (:meth:`Inference.words`). What a method does is its entry in
:data:`harness.pic.methods.PIC_METHODS` (how to add one is said there). Torch-free.
"""

from __future__ import annotations

import dataclasses
import math
import re
import typing
from dataclasses import dataclass
from typing import Any, Mapping

from harness.core.errors import UsageError
from harness.core.options import convert, describe_type, option
from harness.pic.methods import NO_PIC, PIC_METHODS, PicMethod
from harness.pic.positions import DEFAULT_INITIAL, DEFAULT_LAYOUT, DEFAULT_RECENT, LAYOUTS

IMPLEMENTATIONS = ("cached", "reference")  # Dynamic PIC: the shipped fast path, paper Algorithm 1


def _number(value: float) -> str:
    return f"{value:g}"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class Inference:
    """PIC and RoPE settings: ``method`` (a name in ``PIC_METHODS``: ``none | naive | ntk | dynamic``);
    ``ratio``: ``s_cr`` (naive, dynamic) or ``s_rr`` (ntk), 1 is the identity for every method; ``initial`` /
    ``recent``: ``l_ic`` / ``l_rc`` of Dynamic PIC (the paper's inference sweeps: 4 and 200); ``layout``:
    ``paper`` (literal Eq. 9) or ``contiguous``; ``rope_base``: the RoPE base the weights expect (``None``:
    the model's own); ``impl``: ``cached`` or ``reference`` (paper Algorithm 1, the oracle).

    Built checked: a bad value raises a one-line ``UsageError`` naming the field; ratio / base become floats,
    ``l_ic`` / ``l_rc`` ints."""

    # Each field declares its model arg (``arg``; the variant file's key too, unless ``variant=False``) and the symbol
    # the settings are said with (``symbol``; the ratio's is the method's: s_cr or s_rr): MODEL_ARGS, VARIANT_KEYS and
    # the conversions of model-arg strings below are read from here.
    method: str = option(NO_PIC, "the PIC method (docs/pic.md)", choices=tuple(PIC_METHODS), arg="pic")
    ratio: float = option(1.0, "s_cr (naive, dynamic) or s_rr (ntk); 1 leaves positions alone", arg="pic_ratio")
    initial: int = option(DEFAULT_INITIAL, "l_ic: Dynamic PIC's initial tokens at full resolution", low=0,
                          arg="pic_initial", symbol="l_ic")
    recent: int = option(DEFAULT_RECENT, "l_rc: Dynamic PIC's recent tokens at full resolution", low=0,
                         arg="pic_recent", symbol="l_rc")
    layout: str = option(DEFAULT_LAYOUT, "Dynamic PIC's layout: paper (literal Eq. 9) or contiguous (monotone)",
                         choices=LAYOUTS, arg="pic_layout")
    rope_base: float | None = option(None, "the RoPE base the weights expect (none: the model's own)", arg="rope_base")
    impl: str = option("cached", "Dynamic PIC: cached (the fast path) or reference (paper Algorithm 1)",
                       choices=IMPLEMENTATIONS, arg="pic_impl", variant=False)  # how hf-pic runs it, not the model

    def __post_init__(self) -> None:
        if self.method not in PIC_METHODS:
            raise UsageError(f"pic method {self.method!r} is unknown; allowed: {', '.join(PIC_METHODS)}")
        ratio = self.ratio
        if not _is_number(ratio) or not math.isfinite(ratio):
            raise UsageError(f"pic ratio must be a finite number > 0, got {ratio!r}")
        if ratio <= 0:
            raise UsageError(f"pic ratio must be > 0 (ratios below 1 expand positions), got {ratio!r}")
        for name, symbol in _FIELD_SYMBOLS.items():
            value = getattr(self, name)
            if not _is_number(value) or not math.isfinite(value) or int(value) != value or value < 0:
                raise UsageError(f"pic {name} ({symbol}) must be an integer >= 0, got {value!r}")
        if self.layout not in LAYOUTS:
            raise UsageError(f"pic layout {self.layout!r} is unknown; allowed: {', '.join(LAYOUTS)}")
        if self.rope_base is not None:
            if not _is_number(self.rope_base):
                raise UsageError(f"rope_base must be a number or none; got {self.rope_base!r}")
            if self.rope_base <= 0:
                raise UsageError(f"rope_base must be > 0, got {self.rope_base}")
        if self.impl not in IMPLEMENTATIONS:
            raise UsageError(f"pic_impl {self.impl!r} is unknown; allowed: {', '.join(IMPLEMENTATIONS)}")
        for name, kind in (("ratio", float), ("initial", int), ("recent", int)):
            object.__setattr__(self, name, kind(getattr(self, name)))
        if self.rope_base is not None:
            object.__setattr__(self, "rope_base", float(self.rope_base))

    # ------------------------------------------------------------------ the method and what matters

    @property
    def entry(self) -> PicMethod:
        """The method's registry entry."""
        return PIC_METHODS[self.method]

    @property
    def used_fields(self) -> tuple[str, ...]:
        """The fields that change the model: the method, the fields its entry reads, the RoPE base."""
        return ("method", *self.entry.fields, "rope_base")

    def effective(self) -> "Inference":
        """This inference with every field that does not change the model at its default (no ratio / l_ic /
        l_rc / layout without PIC, no l_ic / l_rc / layout for naive or NTK-aware PIC; ``impl`` never), so
        that two inferences that run the same model compare equal."""
        defaults = Inference()
        return dataclasses.replace(defaults, **{name: getattr(self, name) for name in self.used_fields})

    def replace(self, **fields: Any) -> "Inference":
        """A copy with ``fields`` changed (checked again)."""
        return dataclasses.replace(self, **fields)

    # ------------------------------------------------------------------ words

    def words(self) -> str:
        """``Dynamic PIC (s_cr 2, l_ic 10, l_rc 600)``, ``NTK-aware PIC (s_rr 16)``, ``RoPE base 1e+06``, or
        ``standard inference``; a non-default layout is added as ``, contiguous layout``."""
        parts = []
        entry = self.entry
        if entry.acts:
            settings = []
            for name in entry.fields:
                value = getattr(self, name)
                if name == "ratio":
                    settings.append(f"{entry.symbol} {_number(value)}")
                elif name == "layout":
                    if value != Inference.layout:
                        settings.append(f"{value} layout")
                else:
                    settings.append(f"{_FIELD_SYMBOLS.get(name, name)} {value}")
            parts.append(f"{entry.words} ({', '.join(settings)})" if settings else entry.words)
        if self.rope_base is not None:
            parts.append(f"RoPE base {_number(self.rope_base)}")
        return ", ".join(parts) or "standard inference"

    # ------------------------------------------------------------------ model args and the variant file

    @staticmethod
    def fields_from(values: Mapping[str, Any], keys: Mapping[str, str] | None = None) -> dict[str, Any]:
        """``{field: value}`` of the keys of ``values`` named in ``keys`` (field -> key; model args by default)
        that are given (not ``None``), converted: ratio / base to float, l_ic / l_rc to int, ``"none"`` for
        ``rope_base`` to ``None``; raises ``UsageError`` naming the key. Other keys are ignored."""
        out: dict[str, Any] = {}
        for name, key in (MODEL_ARGS if keys is None else keys).items():
            value = values.get(key)
            if value is None:
                continue
            if name == "rope_base" and str(value).lower() == "none":
                out[name] = None
                continue
            kind = _TYPES[name]
            if kind is not str:
                try:  # the rules of every option (harness.core.options): no bool as a number, no 4.7 as an int
                    value = convert(value, kind, key)
                except UsageError:
                    what = re.sub(r" \(\w+\)", "", describe_type(kind))  # "a number or none"
                    raise UsageError(f"{key} must be {what}; got {value!r}") from None
            out[name] = value
        return out

    @classmethod
    def from_model_args(cls, args: Mapping[str, Any]) -> "Inference":
        """From ``hf-pic`` / ``vllm-pic`` model args (other args ignored; missing ones at their defaults)."""
        return cls(**cls.fields_from(args))

    def to_model_args(self) -> dict[str, Any]:
        """All seven model args (``lch_inference`` in the results), ``rope_base`` ``None`` for the model's own."""
        return {key: getattr(self, name) for name, key in MODEL_ARGS.items()}

    @classmethod
    def from_variant_json(cls, block: Mapping[str, Any]) -> "Inference":
        """From a variant file's ``inference`` block (missing keys at their defaults); unknown keys refused."""
        unknown = set(block) - set(VARIANT_KEYS)
        if unknown:
            raise UsageError(f"unknown inference keys {sorted(unknown)}; allowed: {', '.join(VARIANT_KEYS)}")
        return cls(**cls.fields_from(block, _VARIANT_FIELDS))

    def to_variant_json(self) -> dict[str, Any]:
        """The variant file's ``inference`` block (every key but ``pic_impl``)."""
        return {key: getattr(self, name) for name, key in _VARIANT_FIELDS.items()}


_FIELDS = dataclasses.fields(Inference)
# field -> model arg; the variant file's keys: the same but those declared variant=False (pic_impl)
MODEL_ARGS = {f.name: f.metadata["arg"] for f in _FIELDS}
VARIANT_KEYS = tuple(f.metadata["arg"] for f in _FIELDS if f.metadata.get("variant", True))
_VARIANT_FIELDS = {name: key for name, key in MODEL_ARGS.items() if key in VARIANT_KEYS}
_FIELD_SYMBOLS = {f.name: f.metadata["symbol"] for f in _FIELDS if "symbol" in f.metadata}
_TYPES = typing.get_type_hints(Inference)  # how a model-arg string converts, from each field's annotation
