"""Logits from final hidden states as the model's own forward computes them.

Our estimators apply the LM head to slices of hidden states (never ``[tokens x vocab]`` at once), so they
must also apply what some families do after the head, elementwise:

* Granite divides by ``config.logits_scaling``;
* Cohere multiplies by ``config.logit_scale``;
* Gemma 2 / 3 soft-cap: ``c * tanh(x / c)`` with ``c = config.final_logit_softcapping``.

Every other family of :data:`harness.models.tiny.ARCHITECTURES` returns the head's output unchanged
(tests/models/test_scoring_heads.py compares with ``model(...).logits`` family by family).
"""

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
