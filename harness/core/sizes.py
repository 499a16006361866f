"""Sizes in bytes as a person reads them."""

from __future__ import annotations

GIB = 1 << 30


def in_words(size: int) -> str:
    """Bytes as GiB with one decimal, or MiB below one GiB."""
    return f"{size / GIB:.1f} GiB" if size >= GIB else f"{size / (1 << 20):.0f} MiB"
