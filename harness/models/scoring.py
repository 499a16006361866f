"""Per-token log-probabilities of texts under a causal LM, without [tokens x vocab] logits.

The decoder runs once over a left-padded batch; the LM head and an fp32 log-softmax are applied chunk
by chunk over the sequence, so peak extra memory is ``batch x chunk x vocab`` floats. How much goes into one launch
(chunks of logits, blocks of queries) is :mod:`harness.models.device_sizing`'s.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from harness.models.device_sizing import MEASURE, logit_budget, query_block, sized_pass
from harness.models.head import output_logits
from harness.models.masks import positions_from_mask
from harness.models.unwrap import unwrap_model


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


# Set (True) on an unwrapped model whose positions depend on a row's whole length, computed per call (naive and
# Dynamic PIC: harness.pic.hf.apply_pic sets it, remove_pic takes it away): such a row is never fed in blocks.
WHOLE_ROW_POSITIONS = "_lch_whole_row_positions"


def blocks_allowed(model: nn.Module) -> bool:
    """Whether a row may be fed in blocks over a KV cache and mean what one forward means: not where the model's
    positions depend on the row's whole length (:data:`WHOLE_ROW_POSITIONS`: naive and Dynamic PIC); a RoPE base
    (NTK-aware PIC) and no PIC do not."""
    return not getattr(unwrap_model(model), WHOLE_ROW_POSITIONS, False)


@torch.inference_mode()
def hidden_states(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                  block: int | None = None, free: int | None | object = MEASURE) -> torch.Tensor:
    """Last hidden states of a left-padded batch; position ids from the mask, always with the mask. A row longer than
    ``block`` query positions (default :func:`query_block` of the device: on a CUDA device, what keeps attention in
    bounded memory) is fed ``block`` positions at a time over a KV cache, the mask and positions of the whole row
    given (chunked prefill: the same attention over the same keys, so the same states up to rounding), where
    :func:`blocks_allowed`."""
    base = unwrap_model(model)
    position_ids, _ = positions_from_mask(attention_mask)
    width = input_ids.shape[1]
    if block is None:
        block = query_block(model, input_ids.device, width, batch=input_ids.shape[0], free=free)
    decoder = base.get_decoder()
    if block is None or block >= width or not blocks_allowed(model):
        return decoder(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                       use_cache=False).last_hidden_state
    from transformers import DynamicCache

    from harness.models.hf_cache import cache_keyword

    cache = DynamicCache(config=base.config)
    parts = []
    for start in range(0, width, block):
        stop = min(width, start + block)
        out = decoder(input_ids=input_ids[:, start:stop], attention_mask=attention_mask[:, :stop],
                      position_ids=position_ids[:, start:stop], use_cache=True, **{cache_keyword(): cache})
        parts.append(out.last_hidden_state)
    return torch.cat(parts, dim=1)


def picked_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``log_softmax(logits)`` at ``targets``: ``logits[..., t] - logsumexp(logits)`` over the last dimension, in the
    logits' dtype (fp32 from every caller), without a second ``[rows x vocab]`` tensor.

    Where no gradient is wanted the logits are *consumed*: the max is subtracted and the exponential taken in place.
    ``torch.logsumexp`` allocates a temporary of the logits' size for its exponential, which on the CPU costs fresh
    pages on every chunk (a 32 MiB chunk sits at glibc's mmap threshold): measured, the head of an 8k-token LongPPL
    took 40% longer that way (benchmarks/longppl_vs_reference.py). Under autograd (training's losses) it is
    ``torch.logsumexp``, whose backward needs the logits kept.
    """
    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    if torch.is_grad_enabled() and logits.requires_grad:
        return picked - torch.logsumexp(logits, dim=-1)
    top = logits.amax(dim=-1, keepdim=True)
    total = logits.sub_(top).exp_().sum(dim=-1)
    return picked - top.squeeze(-1) - total.log()


def target_logprobs(
    model: nn.Module,
    hidden: torch.Tensor,
    input_ids: torch.Tensor,
    first_target: int = 1,
    budget: int | None = None,
    free: int | None | object = MEASURE,
) -> torch.Tensor:
    """``log P(input_ids[:, t] | ...)`` for columns ``t >= first_target`` from ``hidden`` [B, T, H].

    The LM head and an fp32 log-softmax run chunk by chunk over the sequence, ``budget`` logits at a time (default:
    :func:`logit_budget` of the device and the head's dtype, from ``free`` when the caller measured the device once);
    returns float32 ``[B, T - first_target]``. Gradients flow when the caller has them on (training losses).
    """
    batch, width = input_ids.shape
    head = unwrap_model(model).get_output_embeddings().weight
    vocab = head.shape[0]
    budget = logit_budget(hidden.device, head.dtype, free) if budget is None else budget
    chunk = max(1, budget // max(1, batch * vocab))
    # Scoring writes into one result allocated before the first chunk: small results kept chunk after chunk would
    # sit in the heap between one chunk's freed logits and the next one's, so that on the CPU no freed chunk fits the
    # next (glibc's heap; measured, PPL of a 32k-token document grew the process by 4 GB, one chunk's worth per
    # chunk). Training's losses keep each chunk's part, which the graph holds anyway.
    out = None if torch.is_grad_enabled() else torch.empty(batch, max(0, width - first_target), dtype=torch.float32,
                                                           device=hidden.device)
    parts = [torch.empty(batch, 0, dtype=torch.float32, device=hidden.device)]
    for start in range(first_target, width, chunk):
        stop = min(width, start + chunk)
        values = picked_logprobs(output_logits(model, hidden[:, start - 1 : stop - 1]), input_ids[:, start:stop])
        if out is None:
            parts.append(values)
        else:
            out[:, start - first_target : stop - first_target] = values
    return torch.cat(parts, dim=1) if out is None else out


def logprobs_from_hidden(head: Callable[[torch.Tensor], torch.Tensor], hidden: torch.Tensor, token_ids: torch.Tensor,
                        budget: int | None = None) -> torch.Tensor:
    """``log P(token_ids[t] | token_ids[:t])`` for ``t >= 1`` of one row, from its final hidden states ``hidden``
    [T, H] and ``head`` (hidden rows -> fp32 logits [m, V], the family's post-head transform included): the head
    and the log-softmax run ``budget // V`` rows at a time (default: :func:`logit_budget` of the device the logits
    are on), on that device, so memory stays ``O(chunk x vocab)`` whatever ``T`` is and only the picked
    log-probabilities leave it. Returns float32 [T - 1] on the CPU."""
    targets = token_ids.reshape(-1)
    out: torch.Tensor | None = None  # allocated once, as target_logprobs's (why there)
    start, chunk = 1, 1  # one row first: the head's vocabulary size and device are known after it
    while start < len(targets):
        stop = min(len(targets), start + chunk)
        logits = head(hidden[start - 1 : stop - 1]).float()
        vocab, device = logits.shape[-1], logits.device
        if out is None:
            out = torch.empty(len(targets) - 1, dtype=torch.float32, device=device)
        out[start - 1 : stop - 1] = picked_logprobs(logits, targets[start:stop].to(device))
        limit = logit_budget(device) if budget is None else budget
        chunk = max(1, limit // vocab)
        del logits
        start = stop
    return out.cpu() if out is not None else torch.empty(0, dtype=torch.float32)


@torch.inference_mode()
def score_tokens(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> list[torch.Tensor]:
    """``log P(x_t | x_<t)`` for every real token but the first of each left-padded row.

    Returns one float32 CPU tensor of length ``n_b - 1`` per row.
    """
    with sized_pass(model, input_ids) as free:  # one reading for the document's passes
        hidden = hidden_states(model, input_ids, attention_mask, free=free)
        out = target_logprobs(model, hidden, input_ids, free=free)
    width = input_ids.shape[1]
    lengths = attention_mask.sum(-1)
    rows = []
    for b in range(input_ids.shape[0]):
        n = int(lengths[b])
        rows.append(out[b, width - n :].cpu() if n > 1 else out[b, :0].cpu())
    return rows
