"""The model under a PEFT wrapper: the one place that knows how to look through it."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from torch import nn

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def unwrap_model(model: nn.Module) -> PreTrainedModel:
    """The ``PreTrainedModel`` under a PEFT wrapper (or the model itself)."""
    get_base = getattr(model, "get_base_model", None)
    # callers pass a PreTrainedModel, wrapped or not
    return cast("PreTrainedModel", get_base() if callable(get_base) else model)
