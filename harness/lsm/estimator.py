"""LSM estimators (docs/formulas.md §4): the mean SCE of the model on the two suffixes of sampled pairs, run through
an :class:`LsmRunner`; the draws depend only on the seed, so every engine scores the same pairs."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from harness.core.errors import UsageError
from harness.lsm.formulas import delta_distribution, length_range, sce
from harness.models.head import output_logits
from harness.models.scoring import hidden_states

LAYER = "models"  # harness/devtools/layers.py


@dataclass(frozen=True)
class LsmRunner:
    """``hidden_states(windows [b, n] token ids) -> [b, n, H]`` final hidden states (after the last norm),
    every window unpadded and starting at position 0; ``logits(hidden [m, H]) -> [m, V]``."""

    hidden_states: Callable[[torch.Tensor], torch.Tensor]
    logits: Callable[[torch.Tensor], torch.Tensor]


def hf_runner(model: nn.Module) -> LsmRunner:
    """The runner of an HF causal LM (PIC applied or not, PEFT-wrapped or not)."""
    return LsmRunner(
        lambda windows: hidden_states(model, windows, torch.ones_like(windows)),
        lambda hidden: output_logits(model, hidden),
    )


def _runner(model: nn.Module | LsmRunner) -> LsmRunner:
    return model if isinstance(model, LsmRunner) else hf_runner(model)


def _check_length(n_tokens: int, needed: int) -> None:
    if n_tokens < needed:
        raise UsageError(f"LSM needs documents of at least {needed} tokens, got {n_tokens}")


@torch.no_grad()
def lsm_direct(
    model: nn.Module | LsmRunner, ids: torch.Tensor, context_length: int, n_samples: int, seed: int = 0
) -> list[float]:
    """SCE of ``n_samples`` directly sampled ``(end, l1, l2)`` triples of a 1-D token tensor."""
    runner = _runner(model)
    lo, hi = length_range(context_length)
    _check_length(len(ids), hi)
    rng = random.Random(seed)
    values = []
    for _ in range(n_samples):
        end = rng.randint(hi - 1, len(ids) - 1)  # the suffix ends at token `end`
        l1, l2 = rng.randint(lo, hi), rng.randint(lo, hi)
        last_a, last_b = (runner.hidden_states(ids[None, end - l + 1 : end + 1])[0, -1] for l in (l1, l2))
        values.append(float(sce(runner.logits(last_a[None])[0], runner.logits(last_b[None])[0])))
    return values


@torch.no_grad()
def lsm_overlap(
    model: nn.Module | LsmRunner,
    ids: torch.Tensor,
    context_length: int,
    n_samples: int,
    seed: int = 0,
    batch_size: int = 8,
) -> list[float]:
    """Per sample, the mean SCE over the overlap of two length-``L`` windows ``delta`` tokens apart (``delta`` drawn
    from :func:`~harness.lsm.formulas.delta_distribution`; positions with ``l1 = l2 + delta``, ``l2 >= ceil(L/2)``)."""
    runner = _runner(model)
    lo, hi = length_range(context_length)
    _check_length(len(ids), hi + (hi - lo))
    rng = random.Random(seed)
    weights = delta_distribution(context_length)
    draws = []
    for _ in range(n_samples):
        delta = rng.choices(range(len(weights)), weights=weights)[0]
        draws.append((rng.randint(0, len(ids) - hi - delta), delta))
    values = []
    for i in range(0, len(draws), batch_size):
        chunk = draws[i : i + batch_size]
        long_w = torch.stack([ids[s : s + hi] for s, _ in chunk])
        short_w = torch.stack([ids[s + d : s + d + hi] for s, d in chunk])
        h_long = runner.hidden_states(long_w)
        h_short = runner.hidden_states(short_w)
        for row, (_, delta) in enumerate(chunk):
            # long-window position j has l1 = j + 1; the same token is at j - delta in the short window
            l2 = torch.arange(lo, hi - delta + 1, device=h_long.device)
            a = runner.logits(h_long[row, l2 + delta - 1])
            b = runner.logits(h_short[row, l2 - 1])
            values.append(float(sce(a, b).mean()))
    return values
