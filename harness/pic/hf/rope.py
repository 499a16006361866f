"""RoPE arithmetic on a family's own functions (docs/formulas.md §1): a rotary embedding rebased for NTK-aware PIC
(:func:`rebased_rotary`, a copy of the model's class, so any rope type keeps working), :func:`rotate` and
:func:`unrotate`: the inverse of ``x cos + R(x) sin`` (``R(R(x)) = -x`` in both pairings; un-rotated dimensions pass
through) is the same rotation at ``(cos, -sin) / (cos^2 + sin^2)`` in fp32 (the divisor undoes rope scaling)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, cast

import torch
from torch import nn


def rotate(apply_rotary: Callable[..., Any], x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """``x`` [B, H, T, D] rotated by the family's function at ``cos``/``sin`` [B, T, d]."""
    return apply_rotary(x, x, cos, sin)[1]


def unrotate(apply_rotary: Callable[..., Any], x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The pre-RoPE ``x`` (fp32) of keys the family's function rotated at ``cos``/``sin``."""
    c, s = cos.float(), sin.float()
    norm = c * c + s * s
    return apply_rotary(x.float(), x.float(), c / norm, -s / norm)[1]


def _rope_params(config: Any, layer_type: str | None) -> dict:
    params = config.rope_parameters
    return params[layer_type] if layer_type is not None and "rope_theta" not in params else params


def _with_base(config: Any, layer_type: str | None, base: float) -> None:
    """Set the RoPE base of ``layer_type``'s parameters (or the only ones) in ``config``."""
    params = dict(config.rope_parameters)
    if layer_type is not None and "rope_theta" not in params:
        params[layer_type] = {**params[layer_type], "rope_theta": float(base)}
    else:
        params["rope_theta"] = float(base)
    config.rope_parameters = params


def rope_base_of(rotary: nn.Module, layer_type: str | None) -> float:
    """The RoPE base ``b`` of the PIC layers (their config's ``rope_theta``)."""
    return float(_rope_params(rotary.config, layer_type)["rope_theta"])


def _device(rotary: nn.Module) -> torch.device:
    return next(iter(rotary.buffers())).device


def rebased_rotary(rotary: nn.Module, layer_type: str | None, base: float) -> nn.Module:
    """A rotary embedding of the model's class at RoPE base ``base`` (NTK-aware PIC: ``b * s_rr``)."""
    config = copy.deepcopy(rotary.config)
    _with_base(config, layer_type, base)
    return type(rotary)(config).to(_device(rotary))  # some families take no device argument


def set_rope_base(decoder: nn.Module, layer_type: str | None, base: float) -> None:
    """Give the decoder (its full-attention layers) RoPE base ``base`` for good: the config is updated and the rotary
    embedding rebuilt from it, so the model behaves, and saves, as if loaded with ``rope_theta = base``."""
    if not base > 0:
        raise ValueError(f"rope base must be > 0, got {base}")
    rotary = cast(nn.Module, decoder.rotary_emb)  # torch types a submodule attribute as Tensor | Module
    _with_base(rotary.config, layer_type, base)
    # rebuilt in place (buffers and attributes of a fresh one), so hooks and references to it stay valid
    fresh = type(rotary)(rotary.config).to(_device(rotary))
    rotary._buffers.update(fresh.named_buffers(recurse=False))
    for name, value in vars(fresh).items():
        if not name.startswith("_") and name != "training":
            setattr(rotary, name, value)
