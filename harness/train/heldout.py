"""The held-out loss of a training run (CE at the training positions, every recipe alike) and its divergence warning."""

from __future__ import annotations

import math

import torch
from tqdm import tqdm

from harness.train.batches import collate
from harness.train.losses import masked_nll


@torch.no_grad()
def heldout_loss(model, examples: list[dict], pad_id: int, batch_size: int = 1, progress: bool = False) -> float | None:
    """Token-weighted mean ``-log P`` of held-out targets at the training positions (CE only); None without examples."""
    if not examples:
        return None
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    ordered = sorted(examples, key=lambda ex: -len(ex["input_ids"]))
    total, count = 0.0, 0.0
    for start in tqdm(range(0, len(ordered), batch_size), disable=not progress, desc="Held-out loss"):
        b = {k: v.to(device) for k, v in collate(ordered[start : start + batch_size], pad_id).items()}
        s, n = masked_nll(model, b["input_ids"], b["attention_mask"], b["loss_mask"], b["position_ids"])
        total, count = total + float(s), count + float(n)
    model.train(was_training)
    return total / count if count else None


DIVERGED = 1.5  # a held-out loss this many times its value before training: the run diverged (heldout_warning)


def heldout_warning(before: float | None, after: float | None) -> str | None:
    """A sentence when the held-out loss ``after`` is not finite or above ``DIVERGED`` x ``before``; else None."""
    if before is None or after is None:
        return None
    if not math.isfinite(after):
        return f"the held-out loss is {after} after training ({before:.4g} before): the training diverged; lower --lr"
    if after > DIVERGED * before:
        return (
            f"the held-out loss rose from {before:.4g} to {after:.4g} (x{after / before:.3g}): the training "
            "diverged; lower --lr or raise --warmup before using this checkpoint"
        )
    return None
