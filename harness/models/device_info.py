"""What a device is and how much memory a run took on it, for the run's cost (:data:`harness.core.results.COST`)."""

from __future__ import annotations

import platform
import resource
import sys


def resolved_device(device: str | None) -> str:
    """The device asked for, else (none, or a GPU this machine lacks) ``cuda`` when available, else ``cpu``."""
    import torch

    if device and not (device.startswith("cuda") and not torch.cuda.is_available()):
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"


def device_name(device: str | None) -> str:
    """The GPU's product name for a CUDA device, else ``CPU: <model name>`` (``/proc/cpuinfo``, else ``platform``)."""
    import torch

    if device and device.startswith("cuda") and torch.cuda.is_available():
        index = int(device.split(":", 1)[1]) if ":" in device else torch.cuda.current_device()
        return torch.cuda.get_device_name(index)
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return f"CPU: {line.split(':', 1)[1].strip()}"
    except OSError:
        pass
    return f"CPU: {platform.processor() or platform.machine()}"


def reset_peak_memory() -> None:
    """Start counting the peak of CUDA memory afresh (nothing to do without CUDA)."""
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.reset_peak_memory_stats()


def peak_memory(device: str | None) -> dict[str, object]:
    """``{"bytes", "what"}``: on CUDA the peak torch allocated since :func:`reset_peak_memory` (not what an engine such
    as vLLM preallocates), on the CPU the process's peak resident memory over its whole life."""
    import torch

    if device and device.startswith("cuda") and torch.cuda.is_available() and torch.cuda.is_initialized():
        return {"bytes": int(torch.cuda.max_memory_allocated()), "what": "CUDA memory torch allocated in this process"}
    kilobytes_or_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    scale = 1 if sys.platform == "darwin" else 1024  # macOS reports bytes, Linux kilobytes
    return {"bytes": int(kilobytes_or_bytes * scale), "what": "peak resident memory of this process"}
