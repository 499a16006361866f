"""Training losses: LongCE ``-(1/n) sum_i I_soft(x_i) log P(x_i | x_<i)``, ``I_soft = min(exp(LSD_theta(x_i)), gamma)``
(no gradient through the weights; targets before ``K`` weigh 1); masked CE; the LSM regulariser ``L_CE + lambda *
L_misalign``, ``L_misalign`` the mean SCE of two length-``L`` windows ``delta`` apart over the positions whose two
context lengths lie in ``[ceil(L/2), L]``."""

from __future__ import annotations

import torch

from harness.core.errors import UsageError
from harness.longppl.estimator import long_short_logprobs
from harness.longppl.formulas import KEY_TOKEN_DEFAULTS, SOFT_GAMMA
from harness.lsm.formulas import length_range, sce
from harness.models.head import output_logits
from harness.models.masks import positions_from_mask
from harness.models.scoring import target_logprobs
from harness.models.unwrap import unwrap_model


def _hidden(model, input_ids: torch.Tensor, **inputs: torch.Tensor) -> torch.Tensor:
    return unwrap_model(model).get_decoder()(input_ids=input_ids, use_cache=False, **inputs).last_hidden_state


def token_nll(model, input_ids: torch.Tensor) -> torch.Tensor:
    """``-log P(x_t | x_<t)`` ``[B, T-1]`` for targets ``1 .. T-1`` of ``input_ids`` ``[B, T]``, with gradients."""
    return -target_logprobs(model, _hidden(model, input_ids), input_ids)


def masked_nll(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    loss_mask: torch.Tensor,
    position_ids: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(sum of -log P(x_t | x_<t), number of targets)`` over targets ``t >= 1`` with both masks set, for a padded
    ``[B, T]`` batch, with gradients; position ids default to each row's ``0 .. n-1``."""
    if position_ids is None:
        position_ids, _ = positions_from_mask(attention_mask)
    hidden = _hidden(model, input_ids, attention_mask=attention_mask, position_ids=position_ids)
    logprobs = target_logprobs(model, hidden, input_ids)
    mask = (loss_mask[:, 1:] * attention_mask[:, 1:]).to(logprobs.dtype)
    return -(logprobs * mask).sum(), mask.sum()


def longce_weights(
    model,
    input_ids: torch.Tensor,
    trunc_len: int = KEY_TOKEN_DEFAULTS["trunc_len"],
    sliding_window: int = KEY_TOKEN_DEFAULTS["sliding_window"],
    gamma: float = SOFT_GAMMA,
) -> torch.Tensor:
    """Detached ``I_soft`` per target ``[B, T-1]``: ``min(exp(LSD), gamma)`` from target ``K`` on, 1 before."""
    weights = torch.ones(input_ids.shape[0], input_ids.shape[1] - 1, device=input_ids.device)
    if input_ids.shape[1] <= trunc_len:
        return weights
    with torch.no_grad():
        for row in range(input_ids.shape[0]):
            long, short = long_short_logprobs(model, input_ids[row], trunc_len, sliding_window)
            weights[row, trunc_len - 1 :] = torch.clamp(torch.exp(long - short), max=gamma)
    return weights


def longce_loss(
    model,
    input_ids: torch.Tensor,
    trunc_len: int = KEY_TOKEN_DEFAULTS["trunc_len"],
    sliding_window: int = KEY_TOKEN_DEFAULTS["sliding_window"],
    gamma: float = SOFT_GAMMA,
) -> torch.Tensor:
    """LongCE of a batch ``[B, T]`` of unpadded training sequences (mean over all ``B * (T-1)`` targets)."""
    weights = longce_weights(model, input_ids, trunc_len, sliding_window, gamma)
    nll = token_nll(model, input_ids)
    return (weights * nll).sum() / nll.numel()


def lsm_regularized_loss(
    model, input_ids: torch.Tensor, context_length: int, delta: int, lam: float = 0.1
) -> tuple[torch.Tensor, dict[str, float]]:
    """``(CE(A) + lam * mean SCE(A, B), {"ce", "misalign"})``, ``A = x[:, :L]``, ``B = x[:, delta : delta + L]``,
    both windows with gradients."""
    lo, hi = length_range(context_length)
    if not 0 < delta <= hi - lo:
        raise UsageError(f"delta must be in 1..{hi - lo} for L = {context_length}, got {delta}")
    if input_ids.shape[1] < hi + delta:
        raise UsageError(f"sequences need at least L + delta = {hi + delta} tokens, got {input_ids.shape[1]}")
    window_a = input_ids[:, :hi]
    hidden_a = _hidden(model, window_a)  # one forward of A serves its CE and its distributions
    ce = -target_logprobs(model, hidden_a, window_a).mean()
    l2 = torch.arange(lo, hi - delta + 1, device=input_ids.device)  # context length in B; l1 = l2 + delta
    logits_a = output_logits(model, hidden_a[:, l2 + delta - 1])
    logits_b = output_logits(model, _hidden(model, input_ids[:, delta : delta + hi])[:, l2 - 1])
    misalign = sce(logits_a, logits_b).mean()
    return ce + lam * misalign, {"ce": ce.item(), "misalign": misalign.item()}
