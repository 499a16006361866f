"""Position ID Compression (PIC) position layouts — pure functions, no model code.

Paper 000 (docs/formulas.md §1). With 0-based original ids ``m`` and ``l_c`` tokens seen so far:

* Naive PIC:     ``m -> m / s_cr``.
* NTK-aware PIC: ids unchanged; the RoPE base ``b`` becomes ``b * s_rr`` (see :func:`ntk_base`).
* Dynamic PIC (Eq. 9), with ``b = l_c - l_rc``:

  - ``layout="paper"`` (literal Eq. 9): ``g(m) = m`` if ``m < l_ic`` or ``m >= b``, else ``m / s_cr``;
  - ``layout="contiguous"`` (monotone): initial ``m``; middle ``l_ic + (m - l_ic) / s_cr``;
    recent ``l_ic + (b - l_ic) / s_cr + (m - b)``.

  With ``l_c <= l_ic + l_rc`` nothing changes.

Default arguments come from :class:`harness.positions.inference.Inference` (their one source); which
method runs which of these functions is its entry in :data:`harness.positions.methods.PIC_METHODS`.

Positions are float32 tensors: fractional ids are legal and every caller (the model patches, the
reference oracle, the tests) computes them through these functions, so they agree bit for bit.
"""

from __future__ import annotations

import torch

from harness.errors import UsageError
from harness.positions.inference import LAYOUTS, Inference
from harness.positions.methods import naive_ids, ntk_base

__all__ = ["dynamic_position_list", "dynamic_positions", "naive_positions", "ntk_base", "positions_from_mask"]

_INITIAL, _RECENT, _LAYOUT = Inference.initial, Inference.recent, Inference.layout


def naive_positions(ids: torch.Tensor, ratio: float) -> torch.Tensor:
    """Naive PIC: ``m / s_cr`` as float32 (the same arithmetic RoPE applies to integer ids)."""
    return naive_ids(ids.to(torch.float32), ratio)


def dynamic_positions(
    ids: torch.Tensor,
    length: torch.Tensor | int,
    ratio: float,
    initial: int = _INITIAL,
    recent: int = _RECENT,
    layout: str = _LAYOUT,
) -> torch.Tensor:
    """Dynamic PIC positions ``g_{l_c}(m)`` for original ids ``ids`` (any shape).

    ``length`` is ``l_c``: an int, or a tensor broadcastable against ``ids`` (e.g. ``[B, 1]`` for a
    batch whose rows have different lengths).  Returns float32 positions of ``ids``'s shape.
    """
    m = ids.to(torch.float32)
    l_c = torch.as_tensor(length, dtype=torch.float32, device=m.device)
    boundary = l_c - recent  # b: first id of the recent window
    is_middle = (m >= initial) & (m < boundary)
    if layout == "paper":
        squeezed = m / ratio
        return torch.where(is_middle, squeezed, m)
    if layout == "contiguous":
        middle = initial + (m - initial) / ratio
        # Only rows with a non-empty middle shift their recent window down.
        shift = torch.clamp(boundary - initial, min=0) * (1.0 / ratio - 1.0)
        recent_pos = m + shift
        out = torch.where(is_middle, middle, recent_pos)
        return torch.where(m < initial, m, out)
    raise UsageError(f"pic layout {layout!r} is unknown; allowed: {', '.join(LAYOUTS)}")


def dynamic_position_list(
    length: int, ratio: float, initial: int = _INITIAL, recent: int = _RECENT, layout: str = _LAYOUT
) -> list[float]:
    """``g_{l_c}(0..l_c-1)`` as a Python list — the form the fixtures in the tests are written in."""
    ids = torch.arange(length)
    return dynamic_positions(ids, length, ratio, initial, recent, layout).tolist()


def positions_from_mask(attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Original 0-based ids and lengths of left- or right-padded rows.

    Returns ``(ids, lengths)``: ``ids[b, t]`` is the index of token t among row b's real tokens
    (0 at padding), ``lengths[b]`` the number of real tokens of row b.
    """
    mask = attention_mask.to(torch.long)
    ids = (mask.cumsum(-1) - 1).clamp(min=0) * mask
    return ids, mask.sum(-1)
