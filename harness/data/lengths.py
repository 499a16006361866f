"""Context lengths as tasks name them: token counts (RULER: ``4096``) or k-labels (BABILong: ``"4k"``); no lm-eval."""

from __future__ import annotations

from typing import Any

from harness.core.errors import UsageError


def parse_lengths(value: Any, default: list) -> list:
    """``[4096, 8192]``, ``"4096,8192"`` or ``4096`` -> list; ints where the items are integers."""
    if value is None or value == "":
        return list(default)
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    stripped = [str(item).strip() for item in items]
    out = [int(item) if item.isdigit() else item for item in stripped]
    if not out:
        raise UsageError("lengths is empty")
    return out


def length_tokens(length: Any) -> int:
    """``4096`` or ``"4096"`` -> 4096; ``"4k"`` -> 4096 (k = 1024 tokens)."""
    text = str(length).strip().lower()
    if text.isdigit():
        return int(text)
    if text.endswith("k") and text[:-1].isdigit():
        return int(text[:-1]) * 1024
    raise UsageError(f"length {length!r} must be a token count (4096) or a k-label (4k)")


def check_lengths(lengths: Any, per_length: int | None, low: int, high: int, max_samples: int) -> None:
    """A one-line :class:`UsageError` unless each length is ``low`` to ``high`` tokens and ``per_length`` x lengths is
    at most ``max_samples``."""
    for length in lengths:
        tokens = length_tokens(length)
        if not low <= tokens <= high:
            raise UsageError(f"lengths must be between {low} and {high} tokens each, got {length!r}")
    if per_length is not None and per_length * len(lengths) > max_samples:
        raise UsageError(
            f"num_samples {per_length} x {len(lengths)} lengths = {per_length * len(lengths)} "
            f"samples, more than the {max_samples} a task builds: give fewer samples or lengths"
        )


def length_label(length: Any) -> str:
    """BABILong's k-labels: ``"4k"`` -> ``"4k"``; 4096 -> ``"4k"``; 0 -> ``"0k"``."""
    tokens = length_tokens(length)
    if tokens % 1024:
        raise UsageError(f"BABILong lengths are multiples of 1024 tokens (0k, 1k, 4k ...); got {length!r}")
    return f"{tokens // 1024}k"
