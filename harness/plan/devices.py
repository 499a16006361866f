"""The memory a plan is checked against (``lch plan --memory``): a size (``80GiB``, ``24GB``) or a device by name."""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.core.errors import UsageError
from harness.core.sizes import GIB

# total memory as torch.cuda.mem_get_info reports it on each device, in GiB
DEVICES = {
    "h100": 79.2,
    "h100-80gb": 79.2,
    "h200": 139.8,
    "a100-80gb": 79.2,
    "a100-40gb": 39.4,
    "a100": 79.2,
    "l40s": 44.4,
    "l4": 22.0,
    "a10g": 22.0,
    "rtx4090": 23.6,
}
UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": GIB,
    "tib": 1 << 40,
}


@dataclass(frozen=True)
class DeviceMemory:
    """``size`` bytes of a ``kind`` device (``cuda``, ``cpu``), named; a run takes ``runtime`` before any model."""

    name: str
    size: int
    kind: str = "cuda"
    runtime: int = 0


def parse_memory(text: str) -> DeviceMemory:
    """``--memory``'s value: a positive size with a unit, or a device name of :data:`DEVICES`."""
    given = text.strip().lower().replace(" ", "")
    if given in DEVICES:
        return DeviceMemory(given, int(DEVICES[given] * GIB), "cuda")
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kmgt]i?b|b)", given)
    if match is None or float(match[1]) <= 0:
        raise UsageError(
            f"lch plan: --memory {text!r} is neither a positive size (80GiB, 24GB, 512MiB) nor a known "
            f"device ({', '.join(sorted(DEVICES))})"
        )
    size = int(float(match[1]) * UNITS[match[2]])
    return DeviceMemory(f"a device of {text.strip()}", size, "cuda")
