"""Training of the trained variants: losses, ``lch train`` recipes, adapter merging and the compressor trainer.
The losses are imported on first use, so that ``harness.train.config`` (read by ``lch``'s parser) loads no torch."""

from typing import Any

LAYER = "models"  # harness/devtools/layers.py

__all__ = ["longce_loss", "lsm_regularized_loss", "masked_nll", "token_nll"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from harness.train import losses

        return getattr(losses, name)
    raise AttributeError(f"module 'harness.train' has no attribute {name!r}")
