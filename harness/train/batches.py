"""Training examples as batches: their right-padded collation (``Trainer`` reads the examples as a list)."""

from __future__ import annotations

import torch


def collate(rows: list[dict], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded ``input_ids``, ``attention_mask``, ``loss_mask``, ``position_ids`` (default: row's ``0 .. n-1``)."""
    width = max(len(r["input_ids"]) for r in rows)
    out = {name: torch.zeros(len(rows), width, dtype=torch.long)
           for name in ("input_ids", "attention_mask", "loss_mask", "position_ids")}
    out["input_ids"].fill_(pad_id)
    for b, row in enumerate(rows):
        n = len(row["input_ids"])
        out["input_ids"][b, :n] = torch.tensor(row["input_ids"])
        out["attention_mask"][b, :n] = 1
        out["loss_mask"][b, :n] = torch.tensor(row["loss_mask"])
        out["position_ids"][b, :n] = torch.tensor(row.get("position_ids") or list(range(n)))
    return out
