"""Names kept for ``lch train``'s option choices (``harness/cli/training.py``): ``PIC_METHODS`` (the names of
the registered PIC methods, read when asked for) and ``LAYOUTS``. The PIC defaults and checks live in
:class:`harness.positions.inference.Inference`; the methods in :data:`harness.positions.methods.PIC_METHODS`."""

from __future__ import annotations

from typing import Any

from harness.positions.inference import LAYOUTS

__all__ = ["LAYOUTS", "PIC_METHODS"]


def __getattr__(name: str) -> Any:
    if name == "PIC_METHODS":
        from harness.positions.methods import PIC_METHODS

        return tuple(PIC_METHODS)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
