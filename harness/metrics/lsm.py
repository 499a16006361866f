"""Long-short misalignment (paper 001, SPEC.md §4).

``SCE(p, q) = -<p, log q> - <q, log p>`` between next-token distributions, and

    LSM(f) = E_x E_{l1, l2 ~ U[L/2, L]} SCE(f(x[-l1:]), f(x[-l2:]))

with ``f(x[-l:])`` the model's next-token distribution after the last ``l`` tokens of a prefix and
``L`` the training context length. Lengths are integers in ``[ceil(L/2), L]``.

Two estimators, both seeded:

* :func:`lsm_direct` samples an end position and ``(l1, l2)`` and runs two forwards per pair;
* :func:`lsm_overlap` (paper Sec. 4.2) runs two length-``L`` windows offset by ``delta`` tokens; every
  position in their overlap gives a pair ``(l1, l2) = (l2 + delta, l2)``, and the positions with
  ``l2 >= ceil(L/2)`` count. Drawing ``delta`` from the law of ``|l1 - l2|`` (independent uniform
  lengths) makes the mean over those positions an unbiased sample of the same expectation.
"""

from __future__ import annotations

import math
import random

import torch

from harness.models.scoring import hidden_states


def sce(logits_p: torch.Tensor, logits_q: torch.Tensor) -> torch.Tensor:
    """Symmetric cross-entropy of ``softmax(logits_p)`` and ``softmax(logits_q)`` over the last dim (fp32)."""
    log_p = torch.log_softmax(logits_p.float(), dim=-1)
    log_q = torch.log_softmax(logits_q.float(), dim=-1)
    return -(log_p.exp() * log_q).sum(-1) - (log_q.exp() * log_p).sum(-1)


def length_range(context_length: int) -> tuple[int, int]:
    """``(ceil(L/2), L)``: the admissible suffix lengths."""
    if context_length < 2:
        raise ValueError(f"LSM context_length must be >= 2, got {context_length}")
    return math.ceil(context_length / 2), context_length


def delta_distribution(context_length: int) -> list[float]:
    """``P(|l1 - l2| = delta)`` for ``delta = 0 .. L - ceil(L/2)`` with independent uniform lengths."""
    lo, hi = length_range(context_length)
    n = hi - lo + 1
    return [(1.0 if d == 0 else 2.0) * (n - d) / (n * n) for d in range(n)]


def _head(model):
    from harness.models.pic_patch import unwrap_model

    return unwrap_model(model).get_output_embeddings()


def _check_length(n_tokens: int, needed: int) -> None:
    if n_tokens < needed:
        raise ValueError(f"LSM needs documents of at least {needed} tokens, got {n_tokens}")


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
