"""Position ID Compression on a loaded Hugging Face causal LM, in place (the PIC paper, docs/formulas.md §1).

:func:`apply_pic` applies an :class:`~harness.pic.inference.Inference`, :func:`remove_pic` restores the model
exactly, :func:`pic_settings` tells which is applied. The mechanism is :mod:`~harness.pic.hf.hooks` (docs/pic.md)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from harness.core.errors import UsageError
from harness.models.scoring import WHOLE_ROW_POSITIONS
from harness.models.unwrap import unwrap_model
from harness.pic.hf.compat import (
    SUPPORTED_TRANSFORMERS,
    UnsupportedTransformersError,
    check_transformers_version,
)
from harness.pic.hf.rope_layout import TESTED_MODEL_TYPES, RopeLayout, rope_layout
from harness.pic.inference import MODEL_ARGS, Inference

LAYER = "models"  # harness/devtools/layers.py

__all__ = [
    "SUPPORTED_TRANSFORMERS",
    "TESTED_MODEL_TYPES",
    "Inference",
    "UnsupportedTransformersError",
    "apply_pic",
    "pic_settings",
    "remove_pic",
    "rope_base",
    "set_rope_base",
]

_ATTR = "_lch_pic"  # set on the unwrapped model while PIC is applied


@dataclass
class _Installed:
    inference: Inference
    undo: list[Callable[[], None]] = field(default_factory=list)


def _layout(model: nn.Module) -> RopeLayout:
    layout = rope_layout(model)
    model_type = getattr(model.config, "model_type", None)
    if model_type not in TESTED_MODEL_TYPES and model_type not in _WARNED:
        _WARNED.add(model_type)
        warnings.warn(
            f"PIC on model type {model_type!r} follows the same mechanism but is not covered by the tests "
            f"(tested: {', '.join(TESTED_MODEL_TYPES)})",
            stacklevel=3,
        )
    return layout


_WARNED: set[str | None] = set()


def pic_settings(model: nn.Module) -> Inference | None:
    """The :class:`Inference` :func:`apply_pic` applied to ``model`` (``None`` if none)."""
    installed = getattr(unwrap_model(model), _ATTR, None)
    return installed.inference if installed else None


def remove_pic(model: nn.Module) -> nn.Module:
    """Undo :func:`apply_pic`; a no-op on an unpatched model."""
    base = unwrap_model(model)
    installed: _Installed | None = getattr(base, _ATTR, None)
    if installed is not None:
        for undo in reversed(installed.undo):
            undo()
        delattr(base, _ATTR)
    return model


def rope_base(model: nn.Module) -> float:
    """The RoPE base the model's rotary embedding uses now (NTK-aware PIC not counted)."""
    return _layout_rope_base(rope_layout(unwrap_model(model)))


def _layout_rope_base(layout: RopeLayout) -> float:
    from harness.pic.hf.rope import rope_base_of

    return rope_base_of(layout.rotary_emb, layout.layer_type)  # NTK's copy is not the model's


def set_rope_base(model: nn.Module, base: float) -> nn.Module:
    """Give the model RoPE base ``base`` for good (as if loaded with ``rope_theta = base``); refused once PIC is
    applied. A PIC variant applied afterwards (NTK-aware PIC multiplies it) works on top of it. Returns ``model``."""
    from harness.pic.hf.rope import set_rope_base as rebuild

    base_model = unwrap_model(model)
    if getattr(base_model, _ATTR, None) is not None:
        raise UsageError("set the RoPE base before applying PIC (remove_pic first)")
    layout = rope_layout(base_model)
    rebuild(layout.decoder, layout.layer_type, float(base))
    return model


def apply_pic(model: nn.Module, inference: Inference | str | None = None, **fields: Any) -> nn.Module:
    """Apply an :class:`Inference` in place to a loaded HF causal LM of a RoPE family (optionally PEFT-wrapped): its
    RoPE base for good (as :func:`set_rope_base`; skipped when the model has it already), then its PIC method (undone
    by :func:`remove_pic`); re-applying replaces the previous variant. ``inference``: an :class:`Inference` or a method
    name (also as ``method=``); ``fields``: :class:`Inference` fields by name, replacing its values or the defaults.
    Returns ``model``."""
    unknown = sorted(set(fields) - set(MODEL_ARGS))
    if unknown:
        raise UsageError(
            f"apply_pic: {', '.join(unknown)} is not a field of Inference; allowed: {', '.join(MODEL_ARGS)}"
        )
    if isinstance(inference, Inference):
        inference = inference.replace(**fields)
    elif inference is not None:
        if "method" in fields:
            raise UsageError("apply_pic: give the method once (positionally or as method=)")
        inference = Inference(method=inference, **fields)
    else:
        inference = Inference(**fields)
    check_transformers_version()
    base = unwrap_model(model)
    rope = _layout(base)
    remove_pic(model)
    if inference.rope_base is not None and inference.rope_base != _layout_rope_base(rope):
        set_rope_base(model, inference.rope_base)
    installed = _Installed(inference)
    if inference.entry.acts:
        from harness.pic.hf.hooks import install

        installed.undo.extend(install(rope, inference))
    if inference.entry.ids is not None:  # positions computed per call from the row's whole length
        setattr(base, WHOLE_ROW_POSITIONS, True)
        installed.undo.append(lambda: delattr(base, WHOLE_ROW_POSITIONS))
    setattr(base, _ATTR, installed)
    return model
