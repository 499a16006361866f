"""Per-token log-probabilities under a causal LM without ``[tokens x vocab]`` logits: the LM head and an fp32
log-softmax run chunk by chunk, ``batch x chunk x vocab`` floats at once (sizes:
:mod:`harness.models.device_sizing`)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from harness.models.device_sizing import MEASURE, logit_budget, query_block, sized_pass
from harness.models.head import output_logits
from harness.models.masks import positions_from_mask
from harness.models.unwrap import unwrap_model


def left_pad(
    rows: list[list[int]], pad_id: int, device: torch.device | str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad token lists into ``(input_ids, attention_mask)``."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        if row:
            ids[i, width - len(row) :] = torch.tensor(row, dtype=torch.long)
            mask[i, width - len(row) :] = 1
    return ids.to(device), mask.to(device)


# set True (by harness.pic.hf.apply_pic) on a model whose positions depend on a row's whole length: no blocks
WHOLE_ROW_POSITIONS = "_lch_whole_row_positions"


def blocks_allowed(model: nn.Module) -> bool:
    """Whether a row may be fed in blocks over a KV cache: not when the model's positions depend on its whole length
    (:data:`WHOLE_ROW_POSITIONS`: naive and Dynamic PIC)."""
    return not getattr(unwrap_model(model), WHOLE_ROW_POSITIONS, False)


@torch.inference_mode()
def hidden_states(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    block: int | None = None,
    free: int | None | object = MEASURE,
) -> torch.Tensor:
    """Last hidden states of a left-padded batch (position ids from the mask). A row longer than ``block`` (default
    :func:`query_block`) is fed ``block`` positions at a time over a KV cache where :func:`blocks_allowed` (chunked
    prefill: the same states up to rounding)."""
    base = unwrap_model(model)
    position_ids, _ = positions_from_mask(attention_mask)
    width = input_ids.shape[1]
    if block is None:
        block = query_block(model, input_ids.device, width, batch=input_ids.shape[0], free=free)
    decoder = base.get_decoder()
    if block is None or block >= width or not blocks_allowed(model):
        return decoder(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False
        ).last_hidden_state
    from transformers import DynamicCache

    from harness.models.hf_cache import cache_keyword

    cache = DynamicCache(config=base.config)
    parts = []
    for start in range(0, width, block):
        stop = min(width, start + block)
        out = decoder(
            input_ids=input_ids[:, start:stop],
            attention_mask=attention_mask[:, :stop],
            position_ids=position_ids[:, start:stop],
            use_cache=True,
            **{cache_keyword(): cache},
        )
        parts.append(out.last_hidden_state)
    return torch.cat(parts, dim=1)


def picked_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``logits[..., t] - logsumexp(logits)`` at ``targets`` in the logits' dtype, without a second ``[rows x vocab]``
    tensor: without grad the logits are consumed (max subtracted, ``exp`` in place: a temporary per chunk cost 40% on
    the CPU); under autograd ``torch.logsumexp``, whose backward needs the logits."""
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
    """Float32 ``log P(input_ids[:, t] | ...)`` ``[B, T - first_target]`` for ``t >= first_target`` from ``hidden``
    [B, T, H], ``budget`` logits a chunk (default :func:`logit_budget` of the device and head dtype, from ``free``);
    gradients flow when on."""
    batch, width = input_ids.shape
    head = unwrap_model(model).get_output_embeddings().weight
    vocab = head.shape[0]
    budget = logit_budget(hidden.device, head.dtype, free) if budget is None else budget
    chunk = max(1, budget // max(1, batch * vocab))
    # one result allocated up front: small per-chunk results fragment glibc's heap (+4 GB on a 32k-token document)
    out = (
        None
        if torch.is_grad_enabled()
        else torch.empty(batch, max(0, width - first_target), dtype=torch.float32, device=hidden.device)
    )
    parts = [torch.empty(batch, 0, dtype=torch.float32, device=hidden.device)]
    for start in range(first_target, width, chunk):
        stop = min(width, start + chunk)
        values = picked_logprobs(output_logits(model, hidden[:, start - 1 : stop - 1]), input_ids[:, start:stop])
        if out is None:
            parts.append(values)
        else:
            out[:, start - first_target : stop - first_target] = values
    return torch.cat(parts, dim=1) if out is None else out


def logprobs_from_hidden(
    head: Callable[[torch.Tensor], torch.Tensor],
    hidden: torch.Tensor,
    token_ids: torch.Tensor,
    budget: int | None = None,
) -> torch.Tensor:
    """Float32 CPU ``log P(token_ids[t] | token_ids[:t])`` [T - 1] for ``t >= 1`` of one row, from ``hidden`` [T, H] and
    ``head`` (rows -> fp32 logits [m, V], post-head transform included), ``budget // V`` rows at a time (default
    :func:`logit_budget`) on the logits' device."""
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
    """Per left-padded row, a float32 CPU tensor of ``log P(x_t | x_<t)`` for its real tokens but the first."""
    with sized_pass(model, input_ids) as free:  # one reading for the document's passes
        hidden = hidden_states(model, input_ids, attention_mask, free=free)
        out = target_logprobs(model, hidden, input_ids, free=free)
    width = input_ids.shape[1]  # a row of n real tokens has its n - 1 targets last (none when n < 2)
    return [out[b, width - int(n) :].cpu() for b, n in enumerate(attention_mask.sum(-1))]
