"""The defaults of Position ID Compression (paper 000, SPEC.md §1): the one place they are written.

Torch-free on purpose, so that light modules (reporting, plots) can read them without importing a
tensor library. Keys are the argument names of :func:`harness.models.pic.apply_pic`:

* ``method``: ``none`` (no PIC);
* ``ratio``: ``s_cr`` (naive, dynamic) or ``s_rr`` (NTK); 1 is the identity for every method;
* ``initial`` / ``recent``: ``l_ic`` / ``l_rc`` of Dynamic PIC (the paper's inference sweeps: 4 and 200);
* ``layout``: ``paper`` (literal Eq. 9) or ``contiguous``.
"""

from __future__ import annotations

from types import MappingProxyType

PIC_METHODS = ("none", "naive", "ntk", "dynamic")
LAYOUTS = ("paper", "contiguous")

PIC_DEFAULTS = MappingProxyType(
    {"method": "none", "ratio": 1.0, "initial": 4, "recent": 200, "layout": "paper"}
)
