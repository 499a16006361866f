"""``Inference``: the PIC / RoPE settings a model is run with, as one typed value (the PIC paper, docs/formulas.md §1).

Owns their defaults, checks (one-line ``UsageError`` naming the field), spellings (``hf-pic`` / ``vllm-pic`` model
args; a variant file's ``inference`` block: the same keys but ``pic_impl``), what matters, their words. Torch-free."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.core.errors import UsageError
from harness.core.options import check_fields, convert, option
from harness.pic.methods import NO_PIC, PIC_METHODS, PicMethod
from harness.pic.positions import DEFAULT_INITIAL, DEFAULT_LAYOUT, DEFAULT_RECENT, LAYOUTS

IMPLEMENTATIONS = ("cached", "reference")  # Dynamic PIC: the shipped fast path, paper Algorithm 1


@dataclass(frozen=True)
class Inference:
    """PIC and RoPE settings: ``method`` (a key of ``PIC_METHODS``); ``ratio``: ``s_cr`` (naive, dynamic) or ``s_rr``
    (ntk), 1 the identity; ``initial`` / ``recent``: Dynamic PIC's ``l_ic`` / ``l_rc``; ``layout``: ``paper`` (literal
    Eq. 9) or ``contiguous``; ``rope_base``: the base the weights expect (``None``: the model's own); ``impl``:
    ``cached`` or ``reference`` (Algorithm 1). A bad value raises a one-line ``UsageError`` naming the field."""

    # each field's ``arg`` (model arg; variant key unless variant=False) and ``symbol`` feed MODEL_ARGS and
    # VARIANT_KEYS; each variant key is also an option of `lch train` (options_class); ``label`` (default
    # "{symbol} {value}") and ``shown_at_default`` (default True) say how label() writes it
    method: str = option(NO_PIC, "the PIC method (docs/pic.md)", choices=PIC_METHODS.keys(), arg="pic")
    ratio: float = option(
        1.0,
        "s_cr (naive, dynamic) or s_rr (ntk); 1 leaves positions alone, below 1 expands them",
        above=0,
        arg="pic_ratio",
    )
    initial: int = option(
        DEFAULT_INITIAL,
        "l_ic: Dynamic PIC's initial tokens at full resolution",
        low=0,
        arg="pic_initial",
        symbol="l_ic",
    )
    recent: int = option(
        DEFAULT_RECENT, "l_rc: Dynamic PIC's recent tokens at full resolution", low=0, arg="pic_recent", symbol="l_rc"
    )
    layout: str = option(
        DEFAULT_LAYOUT,
        "Dynamic PIC's layout: paper (literal Eq. 9) or contiguous (monotone)",
        choices=LAYOUTS,
        arg="pic_layout",
        label="{value} layout",
        shown_at_default=False,
    )
    rope_base: float | None = option(
        None, "the RoPE base the weights expect (none: the model's own)", above=0, arg="rope_base"
    )
    impl: str = option(
        "cached",
        "Dynamic PIC: cached (the fast path) or reference (paper Algorithm 1)",
        choices=IMPLEMENTATIONS,
        arg="pic_impl",
        variant=False,
    )  # how hf-pic runs it, not the model

    def __post_init__(self) -> None:
        check_fields(self, self._label)

    def _label(self, name: str) -> str:
        """A field as the user names it (``pic_initial (l_ic)``; the ratio's symbol is the method's)."""
        f = _FIELD_BY_NAME[name]
        symbol = f.metadata.get("symbol")
        if name == "ratio" and self.method in PIC_METHODS and PIC_METHODS[self.method].acts:
            symbol = PIC_METHODS[self.method].symbol
        return f"{f.metadata['arg']} ({symbol})" if symbol else f.metadata["arg"]

    # ------------------------------------------------------------------ the method and what matters

    @property
    def entry(self) -> PicMethod:
        """The method's registry entry."""
        return PIC_METHODS[self.method]

    @property
    def used_fields(self) -> tuple[str, ...]:
        """The fields that change the model: the method, the fields its entry reads, the RoPE base."""
        return ("method", *self.entry.fields, "rope_base")

    def effective(self) -> Inference:
        """This inference with every field that does not change the model (``impl`` always) at its default, so that
        two inferences that run the same model compare equal."""
        return dataclasses.replace(Inference(), **{name: getattr(self, name) for name in self.used_fields})

    def replace(self, **fields: Any) -> Inference:
        """A copy with ``fields`` changed (checked again)."""
        return dataclasses.replace(self, **fields)

    # ------------------------------------------------------------------ label

    def label(self) -> str:
        """``Dynamic PIC (s_cr 2, l_ic 10, l_rc 600)``, ``NTK-aware PIC (s_rr 16)``, ``RoPE base 1e+06``, or
        ``standard inference``: each field the method reads as it declares (a non-default layout: ``contiguous
        layout``)."""
        parts = []
        entry = self.entry
        if entry.acts:
            settings = []
            for name in entry.fields:
                declared, value = _FIELD_BY_NAME[name], getattr(self, name)
                if not declared.metadata.get("shown_at_default", True) and value == declared.default:
                    continue
                symbol = entry.symbol if name == "ratio" else declared.metadata.get("symbol", name)
                shown = f"{value:g}" if name == "ratio" else value  # the ratio's symbol is the method's
                form = declared.metadata.get("label", "{symbol} {value}")
                settings.append(form.format(symbol=symbol, value=shown))
            parts.append(f"{entry.label} ({', '.join(settings)})" if settings else entry.label)
        if self.rope_base is not None:
            parts.append(f"RoPE base {self.rope_base:g}")
        return ", ".join(parts) or "standard inference"

    # ------------------------------------------------------------------ model args and the variant file

    @staticmethod
    def fields_from(values: Mapping[str, Any], keys: Mapping[str, str] | None = None) -> dict[str, Any]:
        """``{field: value}`` of the keys of ``values`` named in ``keys`` (field -> key; default: the model args) that
        are not ``None``, converted to the fields' types (``"none"`` -> None for ``rope_base``); a value that does not
        convert is a one-line ``UsageError`` naming the key. Other keys are ignored."""
        keys = MODEL_ARGS if keys is None else keys
        return {
            name: convert(values[key], _HINTS[name], key) for name, key in keys.items() if values.get(key) is not None
        }

    @classmethod
    def from_model_args(cls, args: Mapping[str, Any]) -> Inference:
        """From ``hf-pic`` / ``vllm-pic`` model args (other args ignored; missing ones at their defaults)."""
        return cls(**cls.fields_from(args))

    def to_model_args(self) -> dict[str, Any]:
        """All seven model args (``lch_inference`` in the results), ``rope_base`` ``None`` for the model's own."""
        return {key: getattr(self, name) for name, key in MODEL_ARGS.items()}

    @classmethod
    def from_variant_json(cls, block: Mapping[str, Any]) -> Inference:
        """From a variant file's ``inference`` block (missing keys at their defaults); unknown keys refused."""
        unknown = set(block) - set(VARIANT_KEYS)
        if unknown:
            raise UsageError(f"unknown inference keys {sorted(unknown)}; allowed: {', '.join(VARIANT_KEYS)}")
        return cls(**cls.fields_from(block, _VARIANT_FIELDS))

    def to_variant_json(self) -> dict[str, Any]:
        """The variant file's ``inference`` block (every key but ``pic_impl``)."""
        return {key: getattr(self, name) for name, key in _VARIANT_FIELDS.items()}


_FIELDS = dataclasses.fields(Inference)
MODEL_ARGS = {f.name: f.metadata["arg"] for f in _FIELDS}
VARIANT_KEYS = tuple(f.metadata["arg"] for f in _FIELDS if f.metadata.get("variant", True))
_VARIANT_FIELDS = {name: key for name, key in MODEL_ARGS.items() if key in VARIANT_KEYS}
_FIELD_BY_NAME = {f.name: f for f in _FIELDS}
_HINTS = typing.get_type_hints(Inference)
_NAMING_KEYS = ("arg", "symbol", "variant", "label", "shown_at_default")  # how Inference names a field, not its domain


def options_class(name: str, base: type, changes: Mapping[str, Mapping[str, Any]]) -> type:
    """A dataclass ``name`` deriving from ``base`` that adds one option per variant key of :class:`Inference`, in its
    order, named by the key and declared as its field (help, domain), with ``changes[field]`` (``default``, ``help``,
    bounds) applied (a ``None`` default makes the option optional): for a command that takes the settings as options."""
    options = []
    for field_name, key in _VARIANT_FIELDS.items():
        meta = {k: v for k, v in _FIELD_BY_NAME[field_name].metadata.items() if k not in _NAMING_KEYS}
        meta.update(changes.get(field_name, {}))
        default = meta.pop("default", _FIELD_BY_NAME[field_name].default)
        hint = _HINTS[field_name] if default is not None else _HINTS[field_name] | None
        options.append((key, hint, option(default, **meta)))
    return dataclasses.make_dataclass(name, options, bases=(base,), namespace={"__module__": base.__module__})
