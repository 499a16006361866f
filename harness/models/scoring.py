"""Per-token log-probabilities of texts under a causal LM, without [tokens x vocab] logits.

The decoder runs once over a left-padded batch; the LM head and an fp32 log-softmax are applied chunk
by chunk over the sequence, so peak extra memory is ``batch x chunk x vocab`` floats.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from harness.models.head import output_logits
from harness.models.unwrap import unwrap_model
from harness.positions.pic import positions_from_mask

DEFAULT_LOGIT_BUDGET = 1 << 23  # floats of [batch, chunk, vocab] logits alive at once (32 MiB fp32)


def left_pad(rows: list[list[int]], pad_id: int, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad token lists into ``(input_ids, attention_mask)``."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        if row:
            ids[i, width - len(row) :] = torch.tensor(row, dtype=torch.long)
            mask[i, width - len(row) :] = 1
    return ids.to(device), mask.to(device)


@torch.inference_mode()
def hidden_states(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Last hidden states of a left-padded batch; position ids from the mask, always with the mask."""
    base = unwrap_model(model)
    position_ids, _ = positions_from_mask(attention_mask)
    return base.get_decoder()(
        input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False
    ).last_hidden_state


def target_logprobs(
    model: nn.Module,
    hidden: torch.Tensor,
    input_ids: torch.Tensor,
    first_target: int = 1,
    logit_budget: int = DEFAULT_LOGIT_BUDGET,
) -> torch.Tensor:
    """``log P(input_ids[:, t] | ...)`` for columns ``t >= first_target`` from ``hidden`` [B, T, H].

    The LM head and an fp32 log-softmax run chunk by chunk over the sequence; returns float32
    ``[B, T - first_target]``. Gradients flow when the caller has them on (training losses).
    """
    batch, width = input_ids.shape
    vocab = unwrap_model(model).get_output_embeddings().weight.shape[0]
    chunk = max(1, logit_budget // max(1, batch * vocab))
    parts = [torch.empty(batch, 0, dtype=torch.float32, device=hidden.device)]
    for start in range(first_target, width, chunk):
        stop = min(width, start + chunk)
        logits = output_logits(model, hidden[:, start - 1 : stop - 1])
        # log_softmax gathered at the targets, without a second [chunk x vocab] tensor
        picked = logits.gather(-1, input_ids[:, start:stop].unsqueeze(-1)).squeeze(-1)
        parts.append(picked - torch.logsumexp(logits, dim=-1))
        del logits
    return torch.cat(parts, dim=1)


def logprobs_from_hidden(head: Callable[[torch.Tensor], torch.Tensor], hidden: torch.Tensor, token_ids: torch.Tensor,
                        logit_budget: int = DEFAULT_LOGIT_BUDGET) -> torch.Tensor:
    """``log P(token_ids[t] | token_ids[:t])`` for ``t >= 1`` of one row, from its final hidden states ``hidden``
    [T, H] and ``head`` (hidden rows -> fp32 logits [m, V], the family's post-head transform included): the head
    and the log-softmax run ``logit_budget // V`` rows at a time, so memory stays ``O(chunk x vocab)`` whatever
    ``T`` is. Returns float32 [T - 1] on the CPU."""
    parts = [torch.empty(0, dtype=torch.float32)]
    targets = token_ids.reshape(-1).cpu()
    start, chunk = 1, 1  # one row first: the head's vocabulary size is known after it
    while start < len(targets):
        stop = min(len(targets), start + chunk)
        logits = head(hidden[start - 1 : stop - 1]).float().cpu()
        picked = logits.gather(-1, targets[start:stop, None]).squeeze(-1)
        parts.append(picked - torch.logsumexp(logits, dim=-1))
        chunk = max(1, logit_budget // logits.shape[-1])
        del logits
        start = stop
    return torch.cat(parts)


@torch.inference_mode()
def score_tokens(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> list[torch.Tensor]:
    """``log P(x_t | x_<t)`` for every real token but the first of each left-padded row.

    Returns one float32 CPU tensor of length ``n_b - 1`` per row.
    """
    hidden = hidden_states(model, input_ids, attention_mask)
    out = target_logprobs(model, hidden, input_ids)
    width = input_ids.shape[1]
    lengths = attention_mask.sum(-1)
    rows = []
    for b in range(input_ids.shape[0]):
        n = int(lengths[b])
        rows.append(out[b, width - n :].cpu() if n > 1 else out[b, :0].cpu())
    return rows
