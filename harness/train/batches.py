"""Training examples as batches: their right-padded collation (``Trainer`` reads the examples as a list)."""

from __future__ import annotations

import torch
from torch.nn.utils.rnn import pad_sequence


def collate(rows: list[dict], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded ``input_ids``, ``attention_mask``, ``loss_mask``, ``position_ids`` (default: row's ``0 .. n-1``)."""

    def padded(lists: list[list[int]], value: int = 0) -> torch.Tensor:
        return pad_sequence([torch.tensor(v, dtype=torch.long) for v in lists], batch_first=True, padding_value=value)

    ids = [row["input_ids"] for row in rows]
    return {
        "input_ids": padded(ids, pad_id),
        "attention_mask": padded([[1] * len(i) for i in ids]),
        "loss_mask": padded([row["loss_mask"] for row in rows]),
        "position_ids": padded([row.get("position_ids") or list(range(len(i))) for row, i in zip(rows, ids)]),
    }
