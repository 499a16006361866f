"""RoPE arithmetic on a family's own functions (docs/formulas.md §1).

* A method of kind ``base`` (NTK-aware PIC: ``b * s_rr``) rotates with another base: :func:`rebased_rotary`
  builds a second rotary embedding of the model's own class from a config copy with that RoPE base (so
  rope types such as llama3, longrope or Gemma 3's per-layer-type parameters keep working); the PIC layers
  take their ``(cos, sin)`` from it.
* :func:`rotate` / :func:`unrotate` apply the family's ``apply_rotary_pos_emb`` forwards and backwards.
  The inverse of ``x cos + R(x) sin`` (``R`` rotates each pair by 90 degrees, so ``R(R(x)) = -x``, in the
  rotate-half and the interleaved layout alike; un-rotated dimensions of partial rotary pass through) is
  the same rotation with ``(cos, -sin) / (cos^2 + sin^2)``; the divisor undoes a rope type's attention
  scaling. It is computed in fp32.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

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
    """Give the decoder RoPE base ``base`` for good (its full-attention layers): the config is updated and
    the rotary embedding rebuilt from it, so the model behaves, and saves, as if loaded with
    ``rope_theta = base``. LongRecipe and other context extensions train and evaluate at a larger base."""
    if not base > 0:
        raise ValueError(f"rope base must be > 0, got {base}")
    rotary = decoder.rotary_emb
    _with_base(rotary.config, layer_type, base)
    # rebuilt in place (buffers and attributes of a fresh one), so hooks and references to it stay valid
    fresh = type(rotary)(rotary.config).to(_device(rotary))
    for name, buffer in fresh.named_buffers(recurse=False):
        rotary._buffers[name] = buffer
    for name, value in vars(fresh).items():
        if not name.startswith("_") and name != "training":
            setattr(rotary, name, value)
