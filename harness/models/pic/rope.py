"""RoPE arithmetic, and the two PIC variants that only change the rotary embedding (SPEC.md §1).

* naive: the rotary embedding sees ``position_ids / s_cr``;
* NTK-aware: ``inv_freq`` is rebuilt with base ``b * s_rr`` by the model's own RoPE initialiser.

Each ``patch_*`` returns the function that undoes it.
"""

from __future__ import annotations

import copy
from typing import Callable

import torch
from torch import nn

from harness.models.pic.compat import rope_init_function
from harness.positions.pic import naive_positions, ntk_base


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE on ``x`` [B, H, T, D] with per-row ``cos``/``sin`` [B, T, D] (HF's rotate-half convention)."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def patch_naive(rotary: nn.Module, ratio: float) -> Callable[[], None]:
    original = rotary.forward

    def forward(x: torch.Tensor, position_ids: torch.Tensor):
        return original(x, naive_positions(position_ids, ratio))

    rotary.forward = forward
    return lambda: delattr(rotary, "forward")


def patch_ntk(rotary: nn.Module, ratio: float) -> Callable[[], None]:
    config = copy.deepcopy(rotary.config)
    params = dict(config.rope_parameters)
    params["rope_theta"] = ntk_base(params["rope_theta"], ratio)
    config.rope_parameters = params
    device = rotary.inv_freq.device
    inv_freq, scaling = rope_init_function(rotary)(config, device=device)
    saved = (rotary.inv_freq, rotary.original_inv_freq, rotary.attention_scaling)
    rotary.inv_freq = inv_freq.to(device=device, dtype=saved[0].dtype)
    rotary.original_inv_freq = rotary.inv_freq.clone()
    rotary.attention_scaling = scaling

    def undo() -> None:
        rotary.inv_freq, rotary.original_inv_freq, rotary.attention_scaling = saved

    return undo
