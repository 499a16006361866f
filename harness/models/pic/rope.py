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


def rope_base_of(rotary: nn.Module) -> float:
    """The RoPE base ``b`` the rotary embedding was built with (its config's ``rope_theta``)."""
    return float(rotary.config.rope_parameters["rope_theta"])


def set_rope_base(rotary: nn.Module, base: float) -> None:
    """Rebuild the rotary embedding with RoPE base ``base``, permanently: the model then behaves as if it
    had been loaded with ``rope_theta = base`` (the config is updated too, so a saved full checkpoint
    carries it). LongRecipe and other context extensions train and evaluate at a larger base."""
    if not base > 0:
        raise ValueError(f"rope base must be > 0, got {base}")
    params = dict(rotary.config.rope_parameters)
    params["rope_theta"] = float(base)
    rotary.config.rope_parameters = params
    device = rotary.inv_freq.device
    inv_freq, scaling = rope_init_function(rotary)(rotary.config, device=device)
    rotary.inv_freq = inv_freq.to(device=device, dtype=rotary.inv_freq.dtype)
    rotary.original_inv_freq = rotary.inv_freq.clone()
    rotary.attention_scaling = scaling
