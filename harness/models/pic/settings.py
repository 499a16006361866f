"""What a PIC variant applied to a model is (no transformers import)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.positions.defaults import PIC_DEFAULTS

IMPLEMENTATIONS = ("cached", "reference")  # Dynamic PIC: the shipped fast path, paper Algorithm 1
DEFAULT_IMPL = IMPLEMENTATIONS[0]


@dataclass(frozen=True)
class PicSettings:
    """The PIC variant applied to a model (argument names and defaults of :func:`apply_pic`)."""

    method: str
    ratio: float = PIC_DEFAULTS["ratio"]
    initial: int = PIC_DEFAULTS["initial"]
    recent: int = PIC_DEFAULTS["recent"]
    layout: str = PIC_DEFAULTS["layout"]
    impl: str = DEFAULT_IMPL
