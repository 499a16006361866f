"""PIC position layouts (the PIC paper, docs/formulas.md §1): pure functions, torch imported only when one runs.

0-based original ids ``m``, ``l_c`` tokens seen so far, ``b = l_c - l_rc``. Naive: ``m -> m / s_cr``. NTK-aware:
ids unchanged, the RoPE base times ``s_rr`` (:func:`ntk_base`). Dynamic (Eq. 9), ``layout="paper"``: ``g(m) = m``
if ``m < l_ic`` or ``m >= b``, else ``m / s_cr``; ``layout="contiguous"``: initial ``m``, middle
``l_ic + (m - l_ic) / s_cr``, recent ``l_ic + (b - l_ic) / s_cr + (m - b)``; with ``l_c <= l_ic + l_rc`` nothing
changes. Positions are float32 and every caller computes them here, so they agree bit for bit."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.core.errors import UsageError

if TYPE_CHECKING:
    import torch

LAYOUTS = ("paper", "contiguous")  # Dynamic PIC: literal Eq. 9, or monotone
# l_ic and l_rc of the PIC paper's inference sweeps; the literal Eq. 9 layout
DEFAULT_INITIAL, DEFAULT_RECENT, DEFAULT_LAYOUT = 4, 200, "paper"


def naive_ids(m: Any, ratio: float) -> Any:
    """Naive PIC: ``m / s_cr`` (``m`` float32 ids or a number)."""
    return m / ratio


def ntk_base(base: float, ratio: float) -> float:
    """NTK-aware PIC (paper Eq. 8): the RoPE base multiplied by ``s_rr`` — not the ``s^(d/(d-2))`` rule."""
    return base * ratio


def naive_positions(ids: torch.Tensor, ratio: float) -> torch.Tensor:
    """Naive PIC: ``m / s_cr`` as float32 (the same arithmetic RoPE applies to integer ids)."""
    import torch

    positions: torch.Tensor = naive_ids(ids.to(torch.float32), ratio)
    return positions


def dynamic_positions(
    ids: torch.Tensor,
    length: torch.Tensor | int,
    ratio: float,
    initial: int = DEFAULT_INITIAL,
    recent: int = DEFAULT_RECENT,
    layout: str = DEFAULT_LAYOUT,
) -> torch.Tensor:
    """Dynamic PIC positions ``g_{l_c}(m)`` (float32, ``ids``'s shape) of original ids ``ids`` (any shape); ``length``
    is ``l_c``: an int, or a tensor broadcastable against ``ids`` (``[B, 1]`` for rows of different lengths)."""
    import torch

    m = ids.to(torch.float32)
    l_c = torch.as_tensor(length, dtype=torch.float32, device=m.device)
    boundary = l_c - recent  # b: first id of the recent window
    is_middle = (m >= initial) & (m < boundary)
    if layout == "paper":
        return torch.where(is_middle, m / ratio, m)
    if layout == "contiguous":
        middle = initial + (m - initial) / ratio
        # Only rows with a non-empty middle shift their recent window down.
        shift = torch.clamp(boundary - initial, min=0) * (1.0 / ratio - 1.0)
        out = torch.where(is_middle, middle, m + shift)
        return torch.where(m < initial, m, out)
    raise UsageError(f"pic layout {layout!r} is unknown; allowed: {', '.join(LAYOUTS)}")


def dynamic_position_list(
    length: int,
    ratio: float,
    initial: int = DEFAULT_INITIAL,
    recent: int = DEFAULT_RECENT,
    layout: str = DEFAULT_LAYOUT,
) -> list[float]:
    """``g_{l_c}(0..l_c-1)`` as a Python list — the form the fixtures in the tests are written in."""
    import torch

    return dynamic_positions(torch.arange(length), length, ratio, initial, recent, layout).tolist()
