"""The held-out loss of a training run (every recipe on the same scale: CE under the training positions) and what
to say when it rose (the run diverged)."""

from __future__ import annotations

import math

import torch
from tqdm import tqdm

from harness.train.batches import collate
from harness.train.losses import masked_nll


@torch.no_grad()
def heldout_loss(model, examples: list[dict], pad_id: int, batch_size: int = 1, progress: bool = False) -> float | None:
    """Token-weighted mean ``-log P`` of the held-out examples' targets, under the training positions
    (CE only: the recipes' extra terms are not part of it, so every recipe is compared on the same scale).
    Batched like training, longest first (right padding, each row at its own positions)."""
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
    """What to say of a training run's held-out loss (token-weighted ``-log P`` before and after training): nothing
    when it is missing or stayed below ``DIVERGED`` x its value before; otherwise one sentence: the checkpoint is
    saved, but a held-out loss that is not a number or rose that much (1.82 -> 111 was seen) means the training
    diverged."""
    if before is None or after is None:
        return None
    if not math.isfinite(after):
        return f"the held-out loss is {after} after training ({before:.4g} before): the training diverged; lower --lr"
    if after > DIVERGED * before:
        return (f"the held-out loss rose from {before:.4g} to {after:.4g} (x{after / before:.3g}): the training "
                "diverged; lower --lr or raise --warmup before using this checkpoint")
    return None
