"""Positions of the real tokens of padded rows, from their attention mask (the ids a model without PIC would see)."""

from __future__ import annotations

import torch


def positions_from_mask(attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids, lengths)`` of left- or right-padded rows: ``ids[b, t]`` is token t's 0-based index among row b's real
    tokens (0 at padding), ``lengths[b]`` the number of real tokens of row b."""
    mask = attention_mask.to(torch.long)
    ids = (mask.cumsum(-1) - 1).clamp(min=0) * mask
    return ids, mask.sum(-1)
