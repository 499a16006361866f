"""Which attention layers of a decoder PIC changes, and the family's own RoPE functions. PIC substitutes only the
``(cos, sin)`` a full-attention RoPE layer receives; sliding-window and no-RoPE layers keep their positions, and a
model with no full-attention RoPE layer is refused (docs/pic.md, "Which layers")."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from torch import nn

from harness.core.errors import UsageError

if TYPE_CHECKING:
    from transformers import PreTrainedConfig

# covered by tests/pic/test_pic_families.py; other decoders built the same way are accepted with a warning
TESTED_MODEL_TYPES = (
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen3",
    "qwen3_moe",
    "glm",
    "glm4",
    "gemma2",
    "gemma3_text",
    "phi3",
    "olmo2",
    "smollm3",
    "granite",
)


@dataclass(frozen=True)
class RopeLayout:
    """The decoder of a model as PIC sees it."""

    decoder: nn.Module
    pic_layers: tuple[int, ...]  # attention layers whose positions PIC changes
    kept: dict[int, str]  # the others, with why ("sliding window 512", "no RoPE")
    layer_type: str | None  # the rotary embedding's ``layer_type`` argument for PIC layers (Gemma 3), else None
    apply_rotary: Callable[..., Any]  # the family's apply_rotary_pos_emb(q, k, cos, sin)

    # torch types a submodule attribute as Tensor | Module; rope_layout checked both are modules
    @property
    def rotary_emb(self) -> nn.Module:
        """The decoder's rotary embedding (looked up now: :func:`~harness.pic.hf.rope.set_rope_base` rebuilds it)."""
        return cast(nn.Module, self.decoder.rotary_emb)

    @property
    def layers(self) -> nn.ModuleList:
        """The decoder's layers."""
        return cast(nn.ModuleList, self.decoder.layers)

    def rotary(self, rotary: nn.Module, x: Any, positions: Any) -> tuple[Any, Any]:
        """``(cos, sin)`` of the PIC layers at ``positions`` from ``rotary`` (the model's or a rebased copy)."""
        if self.layer_type is None:
            return rotary(x, positions)
        return rotary(x, positions, self.layer_type)


def _refuse(model: nn.Module, what: str) -> UsageError:
    model_type = getattr(getattr(model, "config", None), "model_type", None) or type(model).__name__
    return UsageError(f"PIC cannot be applied to {model_type}: {what}")


def kept_layers(config: Any) -> dict[int, str]:
    """The layers PIC leaves alone, with why (``"no RoPE"``, ``"sliding window 512"``), from a model's config (a
    transformers config or a ``config.json`` dict; a multimodal one's ``text_config``), for HF and vLLM alike: those
    ``no_rope_layers`` marks 0, those ``layer_types`` calls anything but ``full_attention``, or, without
    ``layer_types``, all when the config has a ``sliding_window`` that ``use_sliding_window`` does not switch off."""
    get = config.get if isinstance(config, dict) else lambda key, default=None: getattr(config, key, default)
    text = get("text_config")
    if text is not None:
        return kept_layers(text)
    no_rope, types, window = get("no_rope_layers"), get("layer_types"), get("sliding_window")
    # a config without a layer count (hand-written, partial) has as many layers as its per-layer lists
    layers = int(get("num_hidden_layers") or max(len(no_rope or ()), len(types or ()), 1))
    kept = {}
    for index in range(layers):
        if no_rope is not None and not no_rope[index]:
            kept[index] = "no RoPE"
        elif types:
            if types[index] != "full_attention":
                kept[index] = f"sliding window {window}" if window else str(types[index])
        elif window and get("use_sliding_window", True):
            kept[index] = f"sliding window {window}"
    return kept


def rope_layout(model: nn.Module) -> RopeLayout:
    """Find the decoder, its PIC layers and the family's rotary function, or refuse in one line naming
    what is missing."""
    get_decoder = getattr(model, "get_decoder", None)
    decoder: nn.Module = get_decoder() if get_decoder is not None else model
    layers = getattr(decoder, "layers", None)
    if not isinstance(layers, nn.ModuleList) or not all(hasattr(layer, "self_attn") for layer in layers):
        raise _refuse(model, "its decoder has no list of layers with self_attn modules")
    rotary = getattr(decoder, "rotary_emb", None)
    if not isinstance(rotary, nn.Module):
        raise _refuse(model, "it has no rotary_emb module (positions are not RoPE, e.g. learned or ALiBi)")
    attn0 = cast(nn.Module, layers[0].self_attn)
    if "position_embeddings" not in inspect.signature(attn0.forward).parameters:
        raise _refuse(model, f"{type(attn0).__name__}.forward takes no position_embeddings (cos, sin)")
    apply_rotary = getattr(sys.modules[type(attn0).__module__], "apply_rotary_pos_emb", None)
    if apply_rotary is None:
        raise _refuse(model, f"{type(attn0).__module__} has no apply_rotary_pos_emb")
    config = cast("PreTrainedConfig", decoder.config)
    typed = "layer_type" in inspect.signature(rotary.forward).parameters
    kept = kept_layers(config)
    pic = [index for index in range(len(layers)) if index not in kept]
    types = {config.layer_types[index] for index in pic} if typed else set()
    if not pic:
        reasons = ", ".join(sorted(set(kept.values())))
        raise _refuse(
            model,
            f"no layer has full attention with RoPE ({reasons}); PIC changes only those layers, so it would "
            "change nothing (load the model with sliding_window=None to give every layer full attention)",
        )
    if len(types) > 1:
        raise _refuse(model, f"its full-attention layers use different RoPE types ({', '.join(sorted(types))})")
    return RopeLayout(decoder, tuple(pic), kept, types.pop() if typed else None, apply_rotary)
