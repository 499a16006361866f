"""Long-short misalignment (the LSM paper, docs/formulas.md §4): ``SCE(p, q) = -<p, log q> - <q, log p>``,
``LSM(f) = E_x E_{l1, l2 ~ U[L/2, L]} SCE(f(x[-l1:]), f(x[-l2:]))``, ``L`` the training context length, lengths
integers in ``[ceil(L/2), L]``."""

from __future__ import annotations

import math

import torch

from harness.core.errors import UsageError


def sce(logits_p: torch.Tensor, logits_q: torch.Tensor) -> torch.Tensor:
    """Symmetric cross-entropy of ``softmax(logits_p)`` and ``softmax(logits_q)`` over the last dim (fp32)."""
    log_p = torch.log_softmax(logits_p.float(), dim=-1)
    log_q = torch.log_softmax(logits_q.float(), dim=-1)
    return -(log_p.exp() * log_q).sum(-1) - (log_q.exp() * log_p).sum(-1)


def length_range(context_length: int) -> tuple[int, int]:
    """``(ceil(L/2), L)``: the admissible suffix lengths."""
    if context_length < 2:
        raise UsageError(f"LSM context_length must be >= 2, got {context_length}")
    return math.ceil(context_length / 2), context_length


def delta_distribution(context_length: int) -> list[float]:
    """``P(|l1 - l2| = delta)`` for ``delta = 0 .. L - ceil(L/2)`` with independent uniform lengths."""
    lo, hi = length_range(context_length)
    n = hi - lo + 1
    return [(1.0 if d == 0 else 2.0) * (n - d) / (n * n) for d in range(n)]
