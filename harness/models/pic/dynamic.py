"""Dynamic PIC (paper 000 Eq. 9, Algorithm 1): the per-call position plan and the cache layer.

Positions depend on the total length ``l_c`` of each row, so they are computed once per forward call,
for all layers, by a forward pre-hook on the decoder (:func:`plan_call`) from the 2D attention mask
(left padding and per-row lengths work). The resulting :class:`Plan` travels with the call: it is put
into the decoder's keyword arguments, which transformers passes to every attention module
(:mod:`harness.models.pic.attention`), and from there to the cache layer as ``cache_kwargs``. Nothing
per-call is stored on the model, so the patch is re-entrant.

Two implementations share the plan; both keep their state in :class:`PicLayer`, a subclass of
transformers' ``DynamicLayer`` that the pre-hook puts into an empty ``DynamicCache``:

* ``impl="reference"`` is Algorithm 1 literally: the layer holds keys *before* RoPE and every call
  re-rotates every cached key at ``g_{l_c}``. It is the test oracle and the benchmark baseline.
* ``impl="cached"`` (default) holds rotated keys. Between two calls a key's position only changes while
  it is in the last ``l_rc`` tokens (it shifts with the recent window in the contiguous layout, or
  leaves it for the middle); initial and middle positions never change again. So the layer also keeps
  the pre-RoPE keys of its last ``l_rc`` columns and each call re-rotates, from them, only the columns
  whose position changed, in its own storage. The rotation uses the same cos/sin arithmetic as the
  reference, so both agree to the rounding of the attention kernel.

Beam search and other batch reorders go through the layer's own ``reorder_cache`` /
``batch_select_indices`` / ``batch_repeat_interleave``, which reorder the side state too. Cropped caches
(assisted decoding) and caches not filled under the same Dynamic PIC are refused with a clear error.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from harness.errors import UsageError
from harness.models.pic.attention import PLAN_KWARG, pic_attention_forward
from harness.models.pic.rope import rotate
from harness.models.pic.settings import PicSettings
from harness.positions.pic import dynamic_positions, positions_from_mask


@dataclass(frozen=True)
class Plan:
    """What every attention layer needs for one forward call under Dynamic PIC."""

    cos_q: torch.Tensor  # [B, T_new, D]: rotation of the new tokens (queries and keys)
    sin_q: torch.Tensor
    cos_k: torch.Tensor | None = None  # reference: rotation of all T_total keys
    sin_k: torch.Tensor | None = None
    changed: torch.Tensor | None = None  # cached: cache columns whose position changed
    changed_in_buffer: torch.Tensor | None = None  # the same columns, indexed into the pre-RoPE buffer
    cos_changed: torch.Tensor | None = None
    sin_changed: torch.Tensor | None = None
    keep: int = 0  # cached: how many trailing pre-RoPE key columns to keep


class PicLayer(DynamicLayer):
    """A ``DynamicLayer`` under Dynamic PIC: takes keys before RoPE (``update``'s ``cache_kwargs`` carry
    the :class:`Plan`) and returns them rotated at the positions of the call.

    ``impl="reference"`` stores pre-RoPE keys; ``impl="cached"`` stores rotated keys plus ``prekeys``,
    the pre-RoPE keys of the last ``l_rc`` columns. The first layer of a cache also keeps
    ``positions`` [B, T], the positions its columns are rotated at (shared by all layers)."""

    def __init__(self, impl: str):
        super().__init__()
        self.impl = impl
        self.prekeys: torch.Tensor | None = None  # [B, H, <= l_rc, D]
        self.positions: torch.Tensor | None = None

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, cache_kwargs: Any = None,
               *args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        plan: Plan | None = cache_kwargs.get(PLAN_KWARG) if isinstance(cache_kwargs, dict) else None
        if plan is None:
            raise RuntimeError("a Dynamic PIC cache layer was updated without a position plan")
        if self.impl == "reference":  # Algorithm 1: keep pre-RoPE keys, rotate all of them every call
            keys, values = super().update(key_states, value_states)
            return rotate(keys, plan.cos_k, plan.sin_k), values
        keys, values = super().update(rotate(key_states, plan.cos_q, plan.sin_q), value_states)
        if plan.changed is not None:
            fixed = rotate(self.prekeys[:, :, plan.changed_in_buffer], plan.cos_changed, plan.sin_changed)
            self.keys.index_copy_(2, plan.changed, fixed)
        merged = key_states if self.prekeys is None else torch.cat((self.prekeys, key_states), dim=2)
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
        self.prekeys = self.positions = None


def install_dynamic(decoder: nn.Module, settings: PicSettings) -> list[Callable[[], None]]:
    """Hook the decoder and replace its attention forwards; returns the undo functions."""
    config = decoder.config
    if getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True):
        raise UsageError(
            "Dynamic PIC needs full attention; this model uses a sliding window "
            f"({config.sliding_window}). Load it with sliding_window=None or use naive/ntk PIC."
        )
    rotary = decoder.rotary_emb
    hook = decoder.register_forward_pre_hook(
        lambda module, args, kwargs: plan_call(settings, rotary, module, args, kwargs), with_kwargs=True
    )
    undo: list[Callable[[], None]] = [hook.remove]
    for layer in decoder.layers:
        attn = layer.self_attn
        attn.forward = types.MethodType(pic_attention_forward, attn)
        undo.append(lambda attn=attn: delattr(attn, "forward"))
    return undo


def _pic_layers(cache: Any, n_layers: int, impl: str, past: int) -> list[PicLayer]:
    """The cache's layers as :class:`PicLayer` s: installed into an empty cache, checked in a filled one."""
    if not isinstance(cache, DynamicCache):
        raise UsageError(f"Dynamic PIC needs a transformers DynamicCache; got {type(cache).__name__}")
    if past == 0:
        cache.layers[:] = [PicLayer(impl) for _ in range(n_layers)]
    elif not all(isinstance(layer, PicLayer) and layer.impl == impl for layer in cache.layers[:n_layers]):
        raise UsageError(
            f"this KV cache was not filled under Dynamic PIC with impl={impl!r}; start from an empty cache"
        )
    return cache.layers


def plan_call(settings: PicSettings, rotary: nn.Module, decoder: nn.Module, args: tuple,
              kwargs: dict) -> tuple[tuple, dict]:
    """Forward pre-hook of the decoder: compute this call's positions once for all layers and pass the
    :class:`Plan` on in ``kwargs[PLAN_KWARG]``."""
    s = settings
    tokens = kwargs.get("input_ids", args[0] if args else None)
    embeds = kwargs.get("inputs_embeds")
    ref = tokens if tokens is not None else embeds
    batch, t_new = ref.shape[0], ref.shape[1]
    device = ref.device
    dtype = embeds.dtype if embeds is not None else decoder.get_input_embeddings().weight.dtype

    cache = kwargs.get("past_key_values")
    use_cache = kwargs.get("use_cache")
    if use_cache is None:  # resolved the way the decoder itself does, after this hook
        use_cache = getattr(decoder.config, "use_cache", False) and not decoder.training
    if cache is None and use_cache:
        cache = DynamicCache(config=decoder.config)
        kwargs["past_key_values"] = cache  # created here so that its layers are PicLayers from the start
    past = cache.get_seq_length() if cache is not None else 0
    total = past + t_new

    mask = kwargs.get("attention_mask")
    if mask is None:
        mask = torch.ones(batch, total, dtype=torch.long, device=device)
    elif mask.dim() != 2 or mask.shape[-1] != total:
        raise UsageError(
            "Dynamic PIC derives positions from a 2D attention mask covering cached and new tokens; "
            f"got shape {tuple(mask.shape)} for {past} cached + {t_new} new tokens"
        )
    ids, lengths = positions_from_mask(mask)
    g = dynamic_positions(ids, lengths[:, None], s.ratio, s.initial, s.recent, s.layout)
    x = torch.empty(0, dtype=dtype, device=device)
    cos_q, sin_q = rotary(x, g[:, past:])
    plan: dict[str, Any] = {}

    if cache is not None:
        first = _pic_layers(cache, len(decoder.layers), s.impl, past)[0]
        if past > 0 and (first.positions is None or first.positions.shape != (batch, past)):
            raise UsageError(
                "this KV cache was not filled under Dynamic PIC (or was cropped); start from an empty cache"
            )
        if s.impl == "cached":
            plan["keep"] = s.recent
            changed = (g[:, :past] != first.positions).any(0).nonzero().squeeze(-1) if past else None
            if changed is not None and changed.numel():
                first_buffered = past - min(past, s.recent)
                if int(changed.min()) < first_buffered:  # would contradict Eq. 9; never expected
                    raise RuntimeError("Dynamic PIC: a position outside the recent window changed")
                cos_changed, sin_changed = rotary(x, g[:, changed])
                plan.update(changed=changed, changed_in_buffer=changed - first_buffered,
                            cos_changed=cos_changed, sin_changed=sin_changed)
        first.positions = g
    if s.impl == "reference":
        plan["cos_k"], plan["sin_k"] = rotary(x, g)
    kwargs[PLAN_KWARG] = Plan(cos_q=cos_q, sin_q=sin_q, **plan)
    return args, kwargs
