"""Position ID Compression on a loaded Hugging Face causal LM, in place (paper 000, SPEC.md §1).

``apply_pic(model, method, ...)`` makes plain ``model(...)`` and ``model.generate(...)`` follow a PIC
variant; ``remove_pic(model)`` restores the model exactly; ``pic_settings(model)`` tells which is applied.

* ``naive`` / ``ntk`` change the rotary embedding only (:mod:`~harness.models.pic.rope`).
* ``dynamic``: positions depend on each row's total length, so a decoder pre-hook computes them once
  per call and the attention forwards are replaced (:mod:`~harness.models.pic.dynamic`,
  :mod:`~harness.models.pic.attention`).

Defaults come from :data:`harness.positions.defaults.PIC_DEFAULTS`; the transformers versions the
patches support from :mod:`~harness.models.pic.compat`, checked when a variant is applied.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from torch import nn

from harness.errors import UsageError
from harness.models.pic.compat import (
    SUPPORTED_TRANSFORMERS,
    UnsupportedTransformersError,
    check_transformers_version,
)
from harness.models.pic.settings import DEFAULT_IMPL, IMPLEMENTATIONS, SUPPORTED_MODEL_TYPES, PicSettings
from harness.models.unwrap import unwrap_model
from harness.positions.defaults import PIC_DEFAULTS
from harness.positions.pic import check_pic_args

__all__ = [
    "DEFAULT_IMPL", "IMPLEMENTATIONS", "SUPPORTED_MODEL_TYPES", "SUPPORTED_TRANSFORMERS", "PicSettings",
    "UnsupportedTransformersError", "apply_pic", "pic_settings", "remove_pic", "rope_base", "set_rope_base",
]

_ATTR = "_lch_pic"  # set on the unwrapped model while PIC is applied


@dataclass
class _Installed:
    settings: PicSettings
    undo: list[Callable[[], None]] = field(default_factory=list)


def _decoder(model: nn.Module) -> nn.Module:
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise UsageError(
            f"PIC supports model types {', '.join(SUPPORTED_MODEL_TYPES)}; got {model_type!r}"
        )
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else model
    if not hasattr(decoder, "rotary_emb") or not hasattr(decoder, "layers"):
        raise UsageError(f"{type(model).__name__} has no decoder with rotary_emb and layers")
    return decoder


def pic_settings(model: nn.Module) -> PicSettings | None:
    """The PIC variant currently applied to ``model`` (``None`` if none)."""
    installed = getattr(unwrap_model(model), _ATTR, None)
    return installed.settings if installed else None


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
    from harness.models.pic.rope import rope_base_of

    return rope_base_of(_decoder(unwrap_model(model)).rotary_emb)  # NTK's patch works on a config copy


def set_rope_base(model: nn.Module, base: float) -> nn.Module:
    """Give the model RoPE base ``base`` for good (as if loaded with ``rope_theta = base``); a PIC
    variant applied afterwards (e.g. NTK-aware PIC multiplies it) works on top of it. Apply it before
    :func:`apply_pic`. Returns ``model``."""
    from harness.models.pic.rope import set_rope_base as rebuild

    base_model = unwrap_model(model)
    if getattr(base_model, _ATTR, None) is not None:
        raise UsageError("set the RoPE base before applying PIC (remove_pic first)")
    rebuild(_decoder(base_model).rotary_emb, float(base))
    return model


def apply_pic(
    model: nn.Module,
    method: str,
    ratio: float = PIC_DEFAULTS["ratio"],
    initial: int = PIC_DEFAULTS["initial"],
    recent: int = PIC_DEFAULTS["recent"],
    layout: str = PIC_DEFAULTS["layout"],
    impl: str = DEFAULT_IMPL,
) -> nn.Module:
    """Patch a loaded HF causal LM (Llama / Mistral / Qwen2, optionally PEFT-wrapped) in place.

    ``method``: ``none | naive | ntk | dynamic``; ``ratio`` is ``s_cr`` (naive, dynamic) or ``s_rr``
    (ntk); ``initial``/``recent`` are ``l_ic``/``l_rc`` and ``layout`` is ``paper`` (Eq. 9) or
    ``contiguous`` for Dynamic PIC; ``impl`` is ``cached`` or ``reference`` (Algorithm 1, the oracle).
    Re-applying replaces the previous variant. Returns ``model``.
    """
    check_pic_args(method, ratio, initial, recent, layout)
    if impl not in IMPLEMENTATIONS:
        raise UsageError(f"pic impl {impl!r} is unknown; allowed: {', '.join(IMPLEMENTATIONS)}")
    check_transformers_version()
    base = unwrap_model(model)
    decoder = _decoder(base)
    remove_pic(model)
    settings = PicSettings(method, float(ratio), int(initial), int(recent), layout, impl)
    installed = _Installed(settings)
    if method in ("naive", "ntk"):
        from harness.models.pic.rope import patch_naive, patch_ntk

        patch = patch_naive if method == "naive" else patch_ntk
        installed.undo.append(patch(decoder.rotary_emb, settings.ratio))
    elif method == "dynamic":
        from harness.models.pic.dynamic import install_dynamic

        installed.undo.extend(install_dynamic(decoder, settings))
    setattr(base, _ATTR, installed)
    return model
