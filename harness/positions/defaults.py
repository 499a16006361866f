"""The defaults of Position ID Compression (paper 000, docs/formulas.md §1): the one place they are written.

Torch-free on purpose, so that light modules (reporting, plots) can read them without importing a
tensor library. Keys are the argument names of :func:`harness.models.pic.apply_pic`:

* ``method``: ``none`` (no PIC);
* ``ratio``: ``s_cr`` (naive, dynamic) or ``s_rr`` (NTK); 1 is the identity for every method;
* ``initial`` / ``recent``: ``l_ic`` / ``l_rc`` of Dynamic PIC (the paper's inference sweeps: 4 and 200);
* ``layout``: ``paper`` (literal Eq. 9) or ``contiguous``.
"""

from __future__ import annotations

import math
from types import MappingProxyType

from harness.errors import UsageError

PIC_METHODS = ("none", "naive", "ntk", "dynamic")
LAYOUTS = ("paper", "contiguous")

PIC_DEFAULTS = MappingProxyType(
    {"method": "none", "ratio": 1.0, "initial": 4, "recent": 200, "layout": "paper"}
)

_RATIO, _INITIAL, _RECENT, _LAYOUT = (PIC_DEFAULTS[k] for k in ("ratio", "initial", "recent", "layout"))


def check_pic_args(
    method: str,
    ratio: float = _RATIO,
    initial: int = _INITIAL,
    recent: int = _RECENT,
    layout: str = _LAYOUT,
) -> None:
    """Raise ``ValueError`` naming the bad argument and the allowed values."""
    if method not in PIC_METHODS:
        raise UsageError(f"pic method {method!r} is unknown; allowed: {', '.join(PIC_METHODS)}")
    if not isinstance(ratio, (int, float)) or isinstance(ratio, bool) or not math.isfinite(ratio):
        raise UsageError(f"pic ratio must be a finite number > 0, got {ratio!r}")
    if ratio <= 0:
        raise UsageError(f"pic ratio must be > 0 (ratios below 1 expand positions), got {ratio!r}")
    if int(initial) != initial or initial < 0:
        raise UsageError(f"pic initial (l_ic) must be an integer >= 0, got {initial!r}")
    if int(recent) != recent or recent < 0:
        raise UsageError(f"pic recent (l_rc) must be an integer >= 0, got {recent!r}")
    if layout not in LAYOUTS:
        raise UsageError(f"pic layout {layout!r} is unknown; allowed: {', '.join(LAYOUTS)}")
