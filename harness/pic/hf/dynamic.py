"""Dynamic PIC (the PIC paper, Eq. 9, Algorithm 1): :class:`PicLayer`, a PIC layer's cache layer, receives the new
keys rotated, recovers their pre-RoPE values (:func:`~harness.pic.hf.rope.unrotate`, fp32) and either keeps pre-RoPE
keys, re-rotating all at ``g_{l_c}`` every call (``impl="reference"``: Algorithm 1, the oracle), or rotated keys plus
the pre-RoPE keys of the last ``l_rc`` columns, the only ones that can move, re-rotating those that did
(``"cached"``). Batch reorders reorder the side state; cropped or foreign caches are refused."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from harness.core.errors import UsageError
from harness.models.hf_cache import cache_keyword, given_cache
from harness.models.masks import positions_from_mask
from harness.pic.hf.call_positions import Plan
from harness.pic.hf.rope import rotate, unrotate
from harness.pic.hf.rope_layout import RopeLayout
from harness.pic.inference import Inference

if TYPE_CHECKING:
    from transformers import PreTrainedConfig


@dataclass(frozen=True)
class CachePlan:
    """What the PIC cache layers need for one forward call under Dynamic PIC."""

    apply_rotary: Callable[..., Any]  # the family's apply_rotary_pos_emb
    cos_k: torch.Tensor | None = None  # reference: rotation of all T_total keys
    sin_k: torch.Tensor | None = None
    changed: torch.Tensor | None = None  # cached: cache columns whose position changed
    changed_in_buffer: torch.Tensor | None = None  # the same columns, indexed into the pre-RoPE buffer
    cos_changed: torch.Tensor | None = None
    sin_changed: torch.Tensor | None = None
    keep: int = 0  # cached: how many trailing pre-RoPE key columns to keep

    @staticmethod
    def hand_to(plan: Plan, cache: Any, layer_idx: int) -> None:
        """Give the cache layer of ``layer_idx`` the call's plan for its next ``update`` (no cache: nothing to do)."""
        if cache is not None:
            cache.layers[layer_idx].pending = plan


class PicLayer(DynamicLayer):
    """A ``DynamicLayer`` under Dynamic PIC: ``update`` takes the new keys rotated at this call's positions and returns
    all keys rotated at them. ``prekeys``: the fp32 pre-RoPE keys of the last ``l_rc`` columns (cached); the first PIC
    layer of a cache also keeps ``positions`` [B, T], those its columns are rotated at (shared by all PIC layers)."""

    def __init__(self, impl: str):
        super().__init__()
        self.impl = impl
        self.prekeys: torch.Tensor | None = None  # [B, H, <= l_rc, D], fp32
        self.positions: torch.Tensor | None = None
        self.pending: Plan | None = None  # the call's plan, handed over by the attention pre-hook

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        call, self.pending = self.pending, None
        if call is None or call.dynamic is None:
            raise RuntimeError("a Dynamic PIC cache layer was updated without a position plan")
        plan = call.dynamic
        pre = unrotate(plan.apply_rotary, key_states, call.cos, call.sin)
        if self.impl == "reference":  # Algorithm 1: keep pre-RoPE keys, rotate all of them every call
            keys, values = super().update(pre.to(key_states.dtype), value_states)
            return rotate(plan.apply_rotary, keys, plan.cos_k, plan.sin_k), values
        keys, values = super().update(key_states, value_states)
        assert self.keys is not None  # the update above set them
        if plan.changed is not None:
            assert self.prekeys is not None  # changed columns are in the buffer an earlier call kept
            moved = self.prekeys[:, :, plan.changed_in_buffer]
            fixed = rotate(plan.apply_rotary, moved, plan.cos_changed.float(), plan.sin_changed.float())
            self.keys.index_copy_(2, plan.changed, fixed.to(self.keys.dtype))
        merged = pre if self.prekeys is None else torch.cat((self.prekeys, pre), dim=2)
        self.prekeys = merged[:, :, merged.shape[2] - min(plan.keep, merged.shape[2]) :]
        return self.keys, values

    def _select(self, select: Callable[[torch.Tensor], torch.Tensor]) -> None:
        if self.positions is not None:
            self.positions = select(self.positions)
        if self.prekeys is not None:
            self.prekeys = select(self.prekeys)

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        super().reorder_cache(beam_idx)
        self._select(lambda t: t.index_select(0, beam_idx.to(t.device)))

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        super().batch_select_indices(indices)
        self._select(lambda t: t[indices.to(t.device)])

    def batch_repeat_interleave(self, repeats: int) -> None:
        super().batch_repeat_interleave(repeats)
        self._select(lambda t: t.repeat_interleave(repeats, dim=0))

    def reset(self) -> None:
        super().reset()
        self.prekeys = self.positions = self.pending = None


def _pic_layers(cache: Any, layout: RopeLayout, impl: str, past: int) -> PicLayer:
    """Install :class:`PicLayer` s at the PIC layers of an empty cache, or check a filled one; returns the
    first PIC layer (the one that keeps the positions)."""
    if not isinstance(cache, DynamicCache):
        raise UsageError(f"Dynamic PIC needs a transformers DynamicCache; got {type(cache).__name__}")
    if past == 0:
        while len(cache.layers) < len(layout.layers):  # a cache built without a config grows its layers lazily
            cache.layers.append(DynamicLayer())
        for index in layout.pic_layers:
            cache.layers[index] = PicLayer(impl)
    elif not all(isinstance(layer := cache.layers[i], PicLayer) and layer.impl == impl for i in layout.pic_layers):
        raise UsageError(
            f"this KV cache was not filled under Dynamic PIC with impl={impl!r}; start from an empty cache"
        )
    first = cache.layers[layout.pic_layers[0]]
    assert isinstance(first, PicLayer)  # installed or checked above
    return first


def dynamic_plan(
    inference: Inference,
    layout: RopeLayout,
    rotary: nn.Module,
    decoder: nn.Module,
    kwargs: dict,
    batch: int,
    t_new: int,
    x: torch.Tensor,
) -> Plan:
    """This call's positions ``g_{l_c}`` (the method's ``ids`` of the ids and lengths of the 2D attention mask)
    and what the cache layers need: only the last ``window`` cache columns (Dynamic: ``l_rc``) may move."""
    entry = inference.entry
    cache = given_cache(kwargs)
    use_cache = kwargs.get("use_cache")
    if use_cache is None:  # resolved the way the decoder itself does, after this hook
        use_cache = getattr(decoder.config, "use_cache", False) and not decoder.training
    if cache is None and use_cache:
        cache = DynamicCache(config=cast("PreTrainedConfig", decoder.config))
        kwargs[cache_keyword()] = cache  # created here so that its PIC layers are PicLayers from the start
    past = cache.get_seq_length() if cache is not None else 0
    total = past + t_new

    mask = kwargs.get("attention_mask")
    if mask is None:
        mask = torch.ones(batch, total, dtype=torch.long, device=x.device)
        kwargs["attention_mask"] = mask  # custom positions always travel with an explicit mask
    elif mask.dim() != 2 or mask.shape[-1] != total:
        raise UsageError(
            "Dynamic PIC derives positions from a 2D attention mask covering cached and new tokens; "
            f"got shape {tuple(mask.shape)} for {past} cached + {t_new} new tokens"
        )
    ids, lengths = positions_from_mask(mask)
    assert entry.ids is not None and entry.window is not None  # a method that moves cached keys: kind ids, a window
    g = entry.ids(ids.to(torch.float32), lengths[:, None], inference)
    cos_q, sin_q = layout.rotary(rotary, x, g[:, past:])
    if cache is None:
        return Plan(cos_q, sin_q)
    fields: dict[str, Any] = {}
    first = _pic_layers(cache, layout, inference.impl, past)
    if past > 0 and (first.positions is None or first.positions.shape != (batch, past)):
        raise UsageError("this KV cache was not filled under Dynamic PIC (or was cropped); start from an empty cache")
    if inference.impl == "cached":
        window = fields["keep"] = entry.window(inference)
        changed = (g[:, :past] != first.positions).any(0).nonzero().squeeze(-1) if past else None
        if changed is not None and changed.numel():
            first_buffered = past - min(past, window)
            if int(changed.min()) < first_buffered:  # would contradict the method's window (Eq. 9: l_rc)
                raise RuntimeError(f"{entry.label}: a position outside the recent window changed")
            cos_changed, sin_changed = layout.rotary(rotary, x, g[:, changed])
            fields.update(
                changed=changed,
                changed_in_buffer=changed - first_buffered,
                cos_changed=cos_changed,
                sin_changed=sin_changed,
            )
    else:
        fields["cos_k"], fields["sin_k"] = layout.rotary(rotary, x, g)
    first.positions = g
    return Plan(cos_q, sin_q, CachePlan(layout.apply_rotary, **fields))
