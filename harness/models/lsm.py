"""LSM estimators (paper 001): run the model on the two suffixes of each sampled pair and average the
symmetric cross-entropy. The formula and the law of the lengths live in :mod:`harness.metrics.lsm`."""

from __future__ import annotations

import random

import torch

from harness.errors import UsageError
from harness.metrics.lsm import delta_distribution, length_range, sce
from harness.models.scoring import hidden_states
from harness.models.unwrap import unwrap_model


def _head(model):
    return unwrap_model(model).get_output_embeddings()


def _check_length(n_tokens: int, needed: int) -> None:
    if n_tokens < needed:
        raise UsageError(f"LSM needs documents of at least {needed} tokens, got {n_tokens}")


@torch.no_grad()
def lsm_direct(model, ids: torch.Tensor, context_length: int, n_samples: int, seed: int = 0) -> list[float]:
    """SCE of ``n_samples`` directly sampled ``(end, l1, l2)`` triples of a 1-D token tensor."""
    lo, hi = length_range(context_length)
    _check_length(len(ids), hi)
    rng = random.Random(seed)
    head = _head(model)
    values = []
    for _ in range(n_samples):
        end = rng.randint(hi - 1, len(ids) - 1)  # the suffix ends at token `end`
        l1, l2 = rng.randint(lo, hi), rng.randint(lo, hi)
        a, b = (ids[None, end - l + 1 : end + 1] for l in (l1, l2))
        last_a = hidden_states(model, a, torch.ones_like(a))[0, -1]
        last_b = hidden_states(model, b, torch.ones_like(b))[0, -1]
        values.append(float(sce(head(last_a), head(last_b))))
    return values


@torch.no_grad()
def lsm_overlap(
    model, ids: torch.Tensor, context_length: int, n_samples: int, seed: int = 0, batch_size: int = 8
) -> list[float]:
    """Per sample, the mean SCE over the valid overlap positions of two windows offset by a drawn delta."""
    lo, hi = length_range(context_length)
    _check_length(len(ids), hi + (hi - lo))
    rng = random.Random(seed)
    weights = delta_distribution(context_length)
    draws = []
    for _ in range(n_samples):
        delta = rng.choices(range(len(weights)), weights=weights)[0]
        draws.append((rng.randint(0, len(ids) - hi - delta), delta))
    head = _head(model)
    values = []
    for i in range(0, len(draws), batch_size):
        chunk = draws[i : i + batch_size]
        long_w = torch.stack([ids[s : s + hi] for s, _ in chunk])
        short_w = torch.stack([ids[s + d : s + d + hi] for s, d in chunk])
        h_long = hidden_states(model, long_w, torch.ones_like(long_w))
        h_short = hidden_states(model, short_w, torch.ones_like(short_w))
        for row, (_, delta) in enumerate(chunk):
            # long-window position j has l1 = j + 1; the same token is at j - delta in the short window
            l2 = torch.arange(lo, hi - delta + 1, device=h_long.device)
            a = head(h_long[row, l2 + delta - 1])
            b = head(h_short[row, l2 - 1])
            values.append(float(sce(a, b).mean()))
    return values
