"""Windows that score a text longer than an engine's length limit, each token once. A text of ``n <= window`` tokens
is one window; a longer one gets windows of ``window`` tokens whose starts advance by ``stride``, each scoring the
tokens past the previous window's end, so every token from 1 on is scored once with at least ``window - stride``
tokens of context. Each window starts at position 0: a token is predicted from its window only."""

from __future__ import annotations

from dataclasses import dataclass

LAYER = "pure"  # harness/devtools/layers.py


@dataclass(frozen=True)
class ScoringWindow:
    """Tokens ``[start, stop)`` go to the engine; targets ``first_target .. stop - 1`` are scored."""

    start: int
    stop: int
    first_target: int


def scoring_windows(n_tokens: int, window: int, stride: int | None = None) -> list[ScoringWindow]:
    """The windows of a text of ``n_tokens`` tokens (none under 2 tokens); ``stride`` defaults to half the window."""
    if window < 2:
        raise ValueError(f"a scoring window needs at least 2 tokens, got {window}")
    stride = max(1, window // 2) if stride is None else stride
    if not 1 <= stride <= window - 1:
        raise ValueError(f"stride must be in 1..{window - 1}, got {stride}")
    if n_tokens < 2:
        return []
    windows = [ScoringWindow(0, min(n_tokens, window), 1)]
    while windows[-1].stop < n_tokens:
        start = windows[-1].start + stride
        stop = min(n_tokens, start + window)
        if stop == n_tokens:  # the last window ends at the text's end with a full window of context
            start = max(0, n_tokens - window)
        windows.append(ScoringWindow(start, stop, windows[-1].stop))
    return windows
