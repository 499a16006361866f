"""The per-call position plan the decoder pre-hook (:mod:`harness.pic.hf.hooks`) computes once per forward call and
hands to every PIC layer and, when cached keys move, to their cache layers (:mod:`harness.pic.hf.dynamic`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

PLAN_KWARG = "lch_pic_plan"  # the keyword under which the per-call plan travels


@dataclass(frozen=True)
class Plan:
    """What the PIC layers need for one forward call."""

    cos: torch.Tensor  # [B, T_new, d]: rotation of the new tokens (queries and keys) in PIC layers
    sin: torch.Tensor
    dynamic: Any = None  # Dynamic PIC: the cache layers' part (harness.pic.hf.dynamic.CachePlan)
