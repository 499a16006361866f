"""``lch_sdpa``: transformers' SDPA attention with its ``[batch, 1, queries, keys]`` mask built one block of queries at
a time, over the keys the block attends, so mask memory grows linearly with the length (else a sliding-window layer or a
padded batch gets a whole ``T x T`` mask, and the CPU kernel a float copy of it). Masks of at most
:data:`MASK_BLOCK_ELEMENTS` pairs are transformers' own; results equal ``sdpa``'s up to rounding."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

NAME = "lch_sdpa"
MASK_BLOCK_ELEMENTS = 1 << 25  # query-key pairs of one block's mask (a 128 MiB float mask in the CPU kernel)


class RowBlockedMask:
    """An unbuilt ``sdpa_mask`` (its arguments); :meth:`rows` builds the mask of one block of queries."""

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments
        self._key_ranges: dict[tuple[int, int], tuple[int, int]] = {}

    @property
    def shape(self) -> tuple[int, int, int, int]:
        args = self.arguments
        return (args["batch_size"], 1, args["q_length"], args["kv_length"])

    def block_rows(self) -> int:
        batch, _, _, keys = self.shape
        return max(1, MASK_BLOCK_ELEMENTS // max(1, batch * keys))

    def _build(self, first: int, stop: int, key_start: int, key_stop: int) -> torch.Tensor:
        from transformers.masking_utils import sdpa_mask

        args = self.arguments
        mask = sdpa_mask(
            **{
                **args,
                "q_length": stop - first,
                "q_offset": args["q_offset"] + first,
                "kv_length": key_stop - key_start,
                "kv_offset": args["kv_offset"] + key_start,
                "allow_is_causal_skip": False,
                "allow_is_bidirectional_skip": False,
            }
        )
        assert mask is not None  # None only where a skip is allowed
        return mask

    def rows(self, first: int, stop: int) -> tuple[int, int, torch.Tensor]:
        """``(k0, k1, mask)``: queries ``[first, stop)`` attend only keys ``[k0, k1)``, with ``mask`` (boolean,
        ``[batch, 1, stop - first, k1 - k0]``) the whole mask's block there."""
        span = self._key_ranges.get((first, stop))
        if span is None:
            mask = self._build(first, stop, 0, self.shape[3])
            attended = mask.reshape(-1, mask.shape[-1]).any(dim=0).nonzero()
            span = (int(attended[0]), int(attended[-1]) + 1) if len(attended) else (0, 1)
            self._key_ranges[(first, stop)] = span
            if span == (0, self.shape[3]):
                return (*span, mask)
        return (*span, self._build(first, stop, *span))


def blocked_sdpa_mask(
    batch_size: int,
    q_length: int,
    kv_length: int,
    q_offset: int = 0,
    kv_offset: int = 0,
    attention_mask: torch.Tensor | None = None,
    local_size: int | None = None,
    allow_is_causal_skip: bool = True,
    allow_is_bidirectional_skip: bool = False,
    **arguments: Any,
) -> torch.Tensor | RowBlockedMask | None:
    """Transformers' ``sdpa_mask`` (None where SDPA's causal flag stands in for it) when its mask has at most
    :data:`MASK_BLOCK_ELEMENTS` pairs or needs none; else a :class:`RowBlockedMask` of the same arguments."""
    from transformers import masking_utils

    arguments.update(
        batch_size=batch_size,
        q_length=q_length,
        kv_length=kv_length,
        q_offset=q_offset,
        kv_offset=kv_offset,
        attention_mask=attention_mask,
        local_size=local_size,
        allow_is_causal_skip=allow_is_causal_skip,
        allow_is_bidirectional_skip=allow_is_bidirectional_skip,
    )
    if batch_size * q_length * kv_length <= MASK_BLOCK_ELEMENTS or _needs_no_mask(arguments):
        return masking_utils.sdpa_mask(**arguments)
    return RowBlockedMask(arguments)


def _needs_no_mask(arguments: dict[str, Any]) -> bool:
    """Whether ``sdpa_mask`` would return None here (asked of its private checks; without them, a mask is needed)."""
    from transformers import masking_utils

    padding = masking_utils.prepare_padding_mask(
        arguments["attention_mask"], arguments["kv_length"], arguments["kv_offset"]
    )
    causal = getattr(masking_utils, "_ignore_causal_mask_sdpa", None)
    bidirectional = getattr(masking_utils, "_ignore_bidirectional_mask_sdpa", None)
    if arguments["allow_is_causal_skip"] and causal is not None:
        return bool(
            causal(
                padding,
                arguments["q_length"],
                arguments["kv_length"],
                arguments["q_offset"],
                arguments["kv_offset"],
                arguments["local_size"],
            )
        )
    if arguments["allow_is_bidirectional_skip"] and bidirectional is not None:
        return bool(bidirectional(padding, arguments["kv_length"], arguments["local_size"]))
    return False


def blocked_sdpa_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | RowBlockedMask | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Transformers' SDPA attention; with a :class:`RowBlockedMask`, block of queries by block: ``softmax(q k^T
    * scaling + mask) v`` of each block over the keys it attends. Returns ``[batch, queries, heads, head_dim]``."""
    from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward

    if (
        not isinstance(attention_mask, RowBlockedMask)
        or kwargs.get("position_bias") is not None
        or kwargs.get("softcap") is not None
    ):
        if isinstance(attention_mask, RowBlockedMask):
            attention_mask = attention_mask.rows(0, attention_mask.shape[2])[2]  # whole, as sdpa would (rare kinds)
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    groups = int(getattr(module, "num_key_value_groups", 1) or 1)
    key, value = repeat_kv(key, groups), repeat_kv(value, groups)  # once per layer, not once per block
    batch, heads, length, _ = query.shape
    out = query.new_empty(batch, length, heads, value.shape[-1])
    step = attention_mask.block_rows()
    for first in range(0, length, step):
        stop = min(length, first + step)
        k0, k1, mask = attention_mask.rows(first, stop)
        block = nn.functional.scaled_dot_product_attention(
            query[:, :, first:stop],
            key[:, :, k0:k1],
            value[:, :, k0:k1],
            attn_mask=mask,
            dropout_p=dropout,
            scale=scaling,
        )
        out[:, first:stop] = block.transpose(1, 2)
    return out, None


def register() -> None:
    """Register ``lch_sdpa`` with transformers' attention and mask interfaces (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(NAME, blocked_sdpa_attention)
    AttentionMaskInterface.register(NAME, blocked_sdpa_mask)


def use_blocked_masks(model: nn.Module) -> bool:
    """Switch a model from transformers' ``sdpa`` to ``lch_sdpa`` (other implementations are left as they are); returns
    whether it now runs ``lch_sdpa``."""
    from harness.models.unwrap import unwrap_model

    base = unwrap_model(model)
    config = getattr(base, "config", None)
    current = getattr(config, "_attn_implementation", None)
    if current == NAME:
        return True
    if current != "sdpa" or not hasattr(base, "set_attn_implementation"):
        return False
    register()
    base.set_attn_implementation(NAME)
    return getattr(base.config, "_attn_implementation", None) == NAME
