"""The one place where transformers code is replaced: the attention ``forward`` under Dynamic PIC.

Contract. :func:`pic_attention_forward` is bound as ``forward`` of every attention module of a
Llama-family decoder (``LlamaAttention``, ``MistralAttention``, ``Qwen2Attention``: the same projections
and the same ``forward`` apart from a sliding window, which Dynamic PIC refuses). It is that ``forward``
of the versions :data:`~harness.models.pic.compat.SUPPORTED_TRANSFORMERS` names, with two differences:

1. the queries, and the keys when there is no cache, are rotated at this call's Dynamic PIC positions
   (``plan.cos_q`` / ``plan.sin_q``); the model's own ``position_embeddings`` are ignored;
2. the keys go to the cache *before* RoPE, with the plan as ``cache_kwargs``: the cache layer
   (:class:`~harness.models.pic.dynamic.PicLayer`) keeps what it needs and returns the keys rotated at
   the positions of this call.

The plan arrives in ``kwargs[PLAN_KWARG]``: the decoder's forward pre-hook
(:func:`~harness.models.pic.dynamic.plan_call`) adds it to the decoder's keyword arguments, which
transformers hands on unchanged to every decoder layer and attention module. Nothing is stored on the
module between calls, so calls on different caches may interleave (threads, nested calls).

Why a replacement rather than transformers' extension points: the queries must be rotated at the
positions of the new tokens while the cached keys are rotated at positions that differ from them, and
the cache must see the keys before RoPE. In the original ``forward`` one ``(cos, sin)`` pair rotates
queries and new keys together before the cache update, and nothing runs between that rotation and the
attention kernel except the kernel itself. A registered attention function (``AttentionInterface``)
would have to be selected through ``config._attn_implementation``, which flash attention also reads to
load its kernels, so it would break flash attention; rope init functions and cache layers see the keys
only after rotation. So the rotation happens here, and everything else (positions, cache side state)
lives in :mod:`~harness.models.pic.dynamic`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from harness.models.pic.compat import attention_function, eager_attention
from harness.models.pic.rope import rotate

PLAN_KWARG = "lch_pic_plan"  # the keyword under which the per-call plan travels


def pic_attention_forward(
    self: nn.Module,
    hidden_states: torch.Tensor,
    position_embeddings: Any = None,
    attention_mask: torch.Tensor | None = None,
    past_key_values: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Llama-family attention at Dynamic PIC positions (see the module docstring)."""
    plan = kwargs.pop(PLAN_KWARG, None)
    if plan is None:
        raise RuntimeError(
            "Dynamic PIC attention was called without a position plan: call the model (or its decoder), "
            "whose forward pre-hook computes the plan, not the attention layer directly"
        )
    input_shape = hidden_states.shape[:-1]
    hidden_shape = (*input_shape, -1, self.head_dim)
    query = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
    key = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
    value = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
    query = rotate(query, plan.cos_q, plan.sin_q)
    if past_key_values is not None:
        key, value = past_key_values.update(key, value, self.layer_idx, {PLAN_KWARG: plan})
    else:
        key = rotate(key, plan.cos_q, plan.sin_q)

    attention = attention_function(self.config, eager_attention())
    output, weights = attention(
        self,
        query,
        key,
        value,
        attention_mask,
        dropout=0.0 if not self.training else self.attention_dropout,
        scaling=self.scaling,
        **kwargs,
    )
    output = output.reshape(*input_shape, -1).contiguous()
    return self.o_proj(output), weights
