"""Logits from final hidden states as the model's own forward computes them, for estimators that apply the LM head to
slices: the family's elementwise post-head transform (Granite: ``/ logits_scaling``; Cohere: ``* logit_scale``;
Gemma 2 / 3: ``c * tanh(x / c)``, ``c = final_logit_softcapping``); identity for other families."""

from __future__ import annotations

import torch
from torch import nn

from harness.models.unwrap import unwrap_model


def finish_logits(config, logits: torch.Tensor) -> torch.Tensor:
    """The family's elementwise transform of the LM head's output (identity for most)."""
    scaling = getattr(config, "logits_scaling", None)
    if scaling:
        logits = logits / scaling
    scale = getattr(config, "logit_scale", None)
    if scale:
        logits = logits * scale
    cap = getattr(config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits


def output_logits(model: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """fp32 logits of ``hidden`` [..., H] (PEFT wrappers looked through)."""
    base = unwrap_model(model)
    return finish_logits(base.config, base.get_output_embeddings()(hidden).float())
