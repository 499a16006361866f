"""Per-token log-probabilities of texts under a causal LM, without [tokens x vocab] logits.

The decoder runs once over a left-padded batch; the LM head and an fp32 log-softmax are applied chunk
by chunk over the sequence, so peak extra memory is ``batch x chunk x vocab`` floats.
"""

from __future__ import annotations

import torch
from torch import nn

from harness.models.pic_patch import unwrap_model
from harness.positions.pic import positions_from_mask

DEFAULT_LOGIT_BUDGET = 1 << 26  # floats of [batch, chunk, vocab] logits alive at once (256 MiB fp32)


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


@torch.no_grad()
def score_tokens(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logit_budget: int = DEFAULT_LOGIT_BUDGET,
) -> list[torch.Tensor]:
    """``log P(x_t | x_<t)`` for every real token but the first of each left-padded row.

    Returns one float32 tensor of length ``n_b - 1`` per row. Position ids are the 0-based index among
    a row's real tokens and the attention mask is always passed with them.
    """
    base = unwrap_model(model)
    decoder = base.get_decoder()
    head = base.get_output_embeddings()
    position_ids, lengths = positions_from_mask(attention_mask)
    hidden = decoder(
        input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False
    ).last_hidden_state
    batch, width = input_ids.shape
    vocab = head.out_features if hasattr(head, "out_features") else head.weight.shape[0]
    chunk = max(1, logit_budget // max(1, batch * vocab))
    out = torch.empty(batch, max(width - 1, 0), dtype=torch.float32, device=hidden.device)
    for start in range(0, width - 1, chunk):
        stop = min(width - 1, start + chunk)
        logits = head(hidden[:, start:stop]).float()
        logprobs = torch.log_softmax(logits, dim=-1)
        targets = input_ids[:, start + 1 : stop + 1].unsqueeze(-1)
        out[:, start:stop] = logprobs.gather(-1, targets).squeeze(-1)
        del logits, logprobs
    rows = []
    for b in range(batch):
        n = int(lengths[b])
        rows.append(out[b, width - n :].cpu() if n > 1 else out[b, :0].cpu())
    return rows
