"""The one mechanism by which every PIC variant reaches a model (docs/pic.md, "One mechanism"): a decoder pre-hook
(:func:`plan_call`) computes once per call the PIC layers' positions and ``(cos, sin)`` (for kind ``base`` from a
rotary copy at the entry's base; for a method with a ``window``, ``g_{l_c}`` from the 2D attention mask plus the
cache layers' part) and passes the :class:`Plan` in the decoder's kwargs; an attention pre-hook pops it and, on a PIC
layer, replaces ``position_embeddings``. Nothing per call is stored on the model."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import torch
from torch import nn

from harness.models.hf_cache import given_cache
from harness.pic.hf.call_positions import PLAN_KWARG, Plan
from harness.pic.hf.rope_layout import RopeLayout
from harness.pic.inference import Inference

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def call_inputs(decoder: nn.Module, args: tuple, kwargs: dict) -> tuple[int, int, torch.device, torch.dtype]:
    """``(batch, new tokens, device, dtype)`` of a decoder call."""
    tokens = kwargs.get("input_ids", args[0] if args else None)
    embeds = kwargs.get("inputs_embeds")
    ref = tokens if tokens is not None else embeds
    if ref is None:  # the decoder itself refuses such a call too
        raise ValueError("a decoder call needs input_ids or inputs_embeds")
    if embeds is not None:
        dtype = embeds.dtype
    else:  # torch types a submodule attribute as Tensor | Module
        dtype = cast(torch.Tensor, cast("PreTrainedModel", decoder).get_input_embeddings().weight).dtype
    return ref.shape[0], ref.shape[1], ref.device, dtype


def _given_positions(kwargs: dict, batch: int, t_new: int, device: torch.device) -> torch.Tensor:
    """The positions the decoder itself would give the new tokens."""
    positions = kwargs.get("position_ids")
    if positions is None:
        positions = kwargs.get("cache_position")
        if positions is None:
            cache = given_cache(kwargs)
            past = cache.get_seq_length() if cache is not None else 0
            positions = torch.arange(past, past + t_new, device=device)
    return positions.expand(batch, -1) if positions.dim() == 1 or positions.shape[0] == 1 else positions


def plan_call(
    inference: Inference,
    layout: RopeLayout,
    rotary: Callable[[], nn.Module],
    decoder: nn.Module,
    args: tuple,
    kwargs: dict,
) -> tuple[tuple, dict]:
    """Decoder pre-hook: compute this call's :class:`Plan` once for all layers."""
    batch, t_new, device, dtype = call_inputs(decoder, args, kwargs)
    x = torch.empty(0, dtype=dtype, device=device)
    entry = inference.entry
    if entry.moves_cached_keys:
        from harness.pic.hf.dynamic import dynamic_plan

        plan = dynamic_plan(inference, layout, rotary(), decoder, kwargs, batch, t_new, x)
    else:
        positions = _given_positions(kwargs, batch, t_new, device)
        if entry.ids is not None:
            positions = entry.ids(positions.to(torch.float32), None, inference)
        cos, sin = layout.rotary(rotary(), x, positions)
        plan = Plan(cos, sin)
    kwargs[PLAN_KWARG] = plan
    return args, kwargs


def _attention_hook(is_pic: bool) -> Callable[[nn.Module, tuple, dict], tuple[tuple, dict]]:
    def hook(attn: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        plan: Plan | None = kwargs.pop(PLAN_KWARG, None)
        if not is_pic:
            return args, kwargs
        if plan is None:
            raise RuntimeError(
                "a PIC attention layer was called without a position plan: call the model (or its decoder), "
                "whose forward pre-hook computes the plan, not the attention layer directly"
            )
        kwargs["position_embeddings"] = (plan.cos, plan.sin)
        if plan.dynamic is not None:
            plan.dynamic.hand_to(plan, given_cache(kwargs), attn.layer_idx)
        return args, kwargs

    return hook


def install(layout: RopeLayout, inference: Inference) -> list[Callable[[], None]]:
    """Hook the decoder and its attention modules; returns the undo functions."""
    decoder = layout.decoder
    base_of = inference.entry.base
    if base_of is not None:
        from harness.pic.hf.rope import rebased_rotary, rope_base_of

        base = base_of(rope_base_of(layout.rotary_emb, layout.layer_type), inference)
        rebased = rebased_rotary(layout.rotary_emb, layout.layer_type, base)
        rotary: Callable[[], nn.Module] = lambda: rebased
    else:
        rotary = lambda: layout.rotary_emb  # looked up per call: set_rope_base may rebuild it
    handle = decoder.register_forward_pre_hook(
        lambda module, args, kwargs: plan_call(inference, layout, rotary, module, args, kwargs), with_kwargs=True
    )
    return [handle.remove] + [
        cast(nn.Module, layer.self_attn)
        .register_forward_pre_hook(_attention_hook(index in layout.pic_layers), with_kwargs=True)
        .remove
        for index, layer in enumerate(layout.layers)
    ]
