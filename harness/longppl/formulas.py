"""LongPPL (the LongPPL paper, docs/formulas.md §3): perplexity on key tokens chosen by an evaluator model. For
evaluator tokens (special tokens included), ``LCL = log P(x_i | full context)``, ``LSD = LCL - log P(x_i | short
context)`` (windows ``ids[s : s + K + d]`` at ``s = 0, d, 2d, ... < N - K`` score targets ``s + K .. s + K + d - 1``;
tokens ``< K`` are never key); a key token has ``LSD > alpha`` and ``LCL > beta``. An evaluated token is key iff its
character span lies inside a key span (Eq. 9); ``LongPPL = exp(mean key-token NLL)``. Deliberate differences from
the reference package ``longppl`` 0.3.0: docs/longppl.md, "Differences from the reference package"."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from harness.core.options import MAX_TOKENS, option
from harness.metrics.support import Support

SOFT_GAMMA = 5.0
DEFAULT_EVALUATOR = "Qwen/Qwen2-72B-Instruct"  # the paper's main evaluator
# a LongPPL over fewer key tokens warns: per-token NLL spreads ~2 nats, so n = 100 pins the mean to ~0.2 nats
MIN_KEY_TOKENS = 100
KEY_TOKENS_WHY = "the mean NLL of n key tokens is known to about 2/sqrt(n) nats"
SHORT_STARTS = ("text", "bos")


def key_tokens_support(metric: str, count: str = "n_key_tokens") -> Support:
    """What a LongPPL rests on (:class:`~harness.metrics.support.Support`): :data:`MIN_KEY_TOKENS` key tokens."""
    return Support(metric, count, MIN_KEY_TOKENS, "key tokens", KEY_TOKENS_WHY)


@dataclass(frozen=True)
class KeySettings:
    """What a key token depends on besides the evaluator and the text: K, d, alpha, beta (the paper's values) and how
    short windows start (``bos``: the evaluator's BOS first). The one home of their defaults."""

    trunc_len: int = option(4096, "K: short-context length of the key-token test", low=1, high=MAX_TOKENS)
    sliding_window: int = option(1024, "d: stride of the short windows", low=1, high=MAX_TOKENS)
    alpha: float = option(2.0, "LSD threshold of key tokens")
    beta: float = option(-2.0, "LCL threshold of key tokens")
    short_start: str = option("text", "how LongPPL short windows start: text (reference) or bos", choices=SHORT_STARTS)

    def settings(self) -> dict[str, Any]:
        """``{K, d, alpha, beta, short_start}`` by field name."""
        return {f.name: getattr(self, f.name) for f in fields(KeySettings)}


KEY_TOKEN_DEFAULTS = KeySettings().settings()  # the defaults by name, for keyword defaults of the estimators


@dataclass
class KeyTokens:
    """Evaluator output for one text: key character spans and, for inspection, per-token LSD / LCL."""

    spans: list[list[int]]
    offsets: list[list[int]] = field(default_factory=list)  # evaluator token character spans
    lsd: list[float | None] = field(default_factory=list)  # None for tokens < trunc_len
    lcl: list[float | None] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"spans": self.spans, "offsets": self.offsets, "lsd": self.lsd, "lcl": self.lcl}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KeyTokens:
        return cls(data["spans"], data.get("offsets", []), data.get("lsd", []), data.get("lcl", []))


def merge_touching(spans: Sequence[Sequence[int]]) -> list[list[int]]:
    """Merge consecutive spans where one ends exactly where the next starts."""
    merged: list[list[int]] = []
    for start, end in spans:
        if merged and merged[-1][1] == start:
            merged[-1][1] = end
        else:
            merged.append([int(start), int(end)])
    return merged


def short_windows(n_tokens: int, trunc_len: int, sliding_window: int) -> list[tuple[int, int]]:
    """``(start, end)`` of the short-context windows; targets of a window are ``start + K .. end - 1``."""
    return [(s, min(s + trunc_len + sliding_window, n_tokens)) for s in range(0, n_tokens - trunc_len, sliding_window)]


@dataclass(frozen=True)
class EvaluatorRun:
    """The evaluator as a run loads it to find key tokens (``lch plan`` sizes it): its name or folder and dtype, the
    longest document in its ``tokens`` (one long pass over them), and its short windows: ``trunc_len +
    sliding_window`` tokens every ``sliding_window`` (``bos``: a BOS first)."""

    model: str
    dtype: str
    tokens: int
    trunc_len: int
    sliding_window: int
    bos: bool = False

    @property
    def key(self) -> tuple[str, str]:
        """``(model, dtype)``: what a run records of the models it loaded beside its own."""
        return self.model, self.dtype

    def window_widths(self, tokens: int | None = None) -> dict[int, int]:
        """``{width: count}`` of the short windows over ``tokens`` (default its own) that the evaluator batches by
        width: every one of :func:`short_windows` but the first (its context is the long pass's)."""
        widths: dict[int, int] = {}
        for start, end in short_windows(self.tokens if tokens is None else tokens, self.trunc_len, self.sliding_window)[
            1:
        ]:
            width = end - start + int(self.bos)
            widths[width] = widths.get(width, 0) + 1
        return widths


def character_spans(offsets: Sequence[Sequence[int]] | np.ndarray) -> np.ndarray:
    """``[start, end)`` character spans as an int64 ``[n, 2]`` array (an array of that shape is returned as it is)."""
    return np.asarray(offsets, dtype=np.int64).reshape(-1, 2)


def key_token_mask(offsets: Sequence[Sequence[int]] | np.ndarray, spans: Sequence[Sequence[int]]) -> np.ndarray:
    """True for tokens whose character span lies inside some key span (paper Eq. 9)."""
    offsets_arr = character_spans(offsets)
    spans_arr = np.asarray(sorted(map(tuple, spans)), dtype=np.int64).reshape(-1, 2)
    max_end = np.maximum.accumulate(spans_arr[:, 1])  # any span starting before can contain the token
    k = np.searchsorted(spans_arr[:, 0], offsets_arr[:, 0], side="right") - 1
    inside = k >= 0
    inside[inside] = max_end[k[inside]] >= offsets_arr[inside, 1]
    return inside


def dropped_key_spans(offsets: Sequence[Sequence[int]] | np.ndarray, spans: Sequence[Sequence[int]]) -> int:
    """Key spans (of the evaluator's tokens) that no evaluated token lies inside: under another tokenizer a token
    may straddle a span's edge, and then that key token counts for nothing (paper Eq. 9 keeps whole tokens only)."""
    tokens = character_spans(offsets)
    tokens = tokens[tokens[:, 1] > tokens[:, 0]]  # no empty specials
    spans_arr = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    tokens = tokens[np.argsort(tokens[:, 0], kind="stable")]
    # tokens do not overlap: the first one starting at or after a span's start is the one that can end inside it
    first = np.searchsorted(tokens[:, 0], spans_arr[:, 0], side="left")
    found = first < len(tokens)
    kept = np.zeros(len(spans_arr), dtype=bool)
    kept[found] = tokens[first[found], 1] <= spans_arr[found, 1]
    return int((~kept).sum())


def count_key_tokens(key: KeyTokens) -> int:
    """Evaluator tokens inside the key spans (the spans themselves when the evaluator's offsets are unknown: spans
    read from reference files)."""
    if not key.offsets:
        return len(key.spans)
    return int(key_token_mask(key.offsets, key.spans).sum())


def soft_token_weights(
    offsets: Sequence[Sequence[int]] | np.ndarray, key: KeyTokens, gamma: float = SOFT_GAMMA
) -> np.ndarray | None:
    """Per evaluated token, the mean over its characters of the evaluator weight ``min(exp(LSD), gamma)`` (Eq. 10;
    evaluator tokens before ``K`` and tokens covering no evaluator character weigh 1); None when LSD is unknown. A
    character takes the weight of the last evaluator token over it; a NaN LSD weighs nothing, as no token."""
    if not key.offsets or len(key.lsd) != len(key.offsets):
        return None
    evaluator, evaluated = character_spans(key.offsets), character_spans(offsets)
    known = np.fromiter((d is not None for d in key.lsd), dtype=bool, count=len(key.lsd))
    token_w = np.ones(len(evaluator))
    capped = np.minimum(np.array(key.lsd, dtype=np.float64)[known], 50.0).tolist()
    token_w[known] = np.minimum([math.exp(d) for d in capped], gamma)  # math.exp: the values Python's exp gives
    # each character's weighing evaluator token (the last over it; -1: none)
    widths = np.maximum(evaluator[:, 1] - evaluator[:, 0], 0)
    chars = np.repeat(evaluator[:, 0] - np.cumsum(widths) + widths, widths) + np.arange(widths.sum())
    length = int(max(evaluator[:, 1].max(initial=0), evaluated[:, 1].max(initial=0)))
    owner = np.full(length, -1, dtype=np.int64)
    np.maximum.at(owner, chars, np.repeat(np.arange(len(widths)), widths))
    weighed = owner >= 0
    weighed[weighed] = ~np.isnan(token_w[owner[weighed]])
    covered = np.flatnonzero(weighed)
    values = token_w[owner[covered]]
    # the weighed characters of evaluated token i: values[first[i] : first[i] + count[i]]
    first = np.searchsorted(covered, evaluated[:, 0])
    count = np.maximum(np.searchsorted(covered, evaluated[:, 1]) - first, 0)
    weights = np.ones(len(evaluated))
    if not len(values):
        return weights
    # where they all weigh the same (the model its own evaluator: every token), the mean of that many copies taken
    # as numpy takes a row's mean, so that every weight is the per-token mean's to the last bit
    runs = np.concatenate([[0], np.cumsum(values[1:] != values[:-1])])
    stop = np.minimum(first + count - 1, len(values) - 1)
    uniform = (count > 0) & (runs[np.minimum(first, len(values) - 1)] == runs[stop])
    for n in np.unique(count[uniform]):
        rows = np.flatnonzero(uniform & (count == n))
        weights[rows] = np.repeat(values[first[rows]], n).reshape(len(rows), n).mean(axis=1)
    for i in np.flatnonzero((count > 0) & ~uniform):
        weights[i] = values[first[i] : first[i] + count[i]].mean()
    return weights


def document_stats(
    logprobs: Sequence[float] | np.ndarray,
    offsets: Sequence[Sequence[int]] | np.ndarray,
    key: KeyTokens | Sequence[Sequence[int]],
    gamma: float = SOFT_GAMMA,
) -> dict[str, float]:
    """Sums that LongPPL / PPL / LongPPL-soft pool over documents; ``logprobs[i]`` is that of evaluated token
    ``i + 1`` (token 0 has none), ``offsets`` the character spans of all evaluated tokens."""
    key = key if isinstance(key, KeyTokens) else KeyTokens([list(s) for s in key])
    nll = -np.asarray(logprobs, dtype=np.float64)
    offsets = character_spans(offsets)
    if len(offsets) != len(nll) + 1:
        raise ValueError(f"{len(offsets)} offsets for {len(nll)} log-probabilities (expected one more)")
    is_key = key_token_mask(offsets, key.spans)[1:]
    stats = {
        "nll_sum": float(nll.sum()),
        "n_scored": int(nll.size),
        "key_nll_sum": float(nll[is_key].sum()),
        "n_key": int(is_key.sum()),
        "n_spans_dropped": dropped_key_spans(offsets, key.spans),
        "soft_nll_sum": float("nan"),
        "soft_weight_sum": float("nan"),
    }
    weights = soft_token_weights(offsets, key, gamma)
    if weights is not None:
        w = weights[1:]
        stats["soft_nll_sum"] = float((w * nll).sum())
        stats["soft_weight_sum"] = float(w.sum())
    return stats


def _exp_mean(total: float, count: float) -> float | None:
    return math.exp(total / count) if count and not math.isnan(count) else None


def summarize(stats: dict[str, float], n_token: int | None = None) -> dict[str, Any]:
    """``longppl``, ``ppl``, ``longppl_soft`` (None when undefined), counts."""
    return {
        "longppl": _exp_mean(stats["key_nll_sum"], stats["n_key"]),
        "ppl": _exp_mean(stats["nll_sum"], stats["n_scored"]),
        "longppl_soft": _exp_mean(stats["soft_nll_sum"], stats["soft_weight_sum"]),
        "n_key_token": stats["n_key"],
        "n_token": n_token if n_token is not None else stats["n_scored"] + 1,
    }


_SPAN = re.compile(r"\[\s*(\d+)\s*,\s*(\d+)\s*\]")


def parse_spans(text: str) -> list[list[int]]:
    """Key spans from reference-format text: ``[a, b];[c, d];...`` (parsed, never evaluated)."""
    return [[int(a), int(b)] for a, b in _SPAN.findall(text.strip())]


def format_spans(spans: Sequence[Sequence[int]]) -> str:
    """Spans in the reference format (the inverse of :func:`parse_spans`)."""
    return ";".join(f"[{a}, {b}]" for a, b in spans)


def select_key_tokens(
    offsets: Sequence[Sequence[int]],
    long: Sequence[float] | np.ndarray,
    short: Sequence[float] | np.ndarray,
    trunc_len: int,
    alpha: float,
    beta: float,
) -> KeyTokens:
    """Key tokens from the evaluator's log-probabilities of targets ``trunc_len .. n-1``: ``LSD_i = long_i - short_i``,
    ``LCL_i = long_i``; key iff ``LSD_i > alpha`` and ``LCL_i > beta``, as character spans (touching ones merged)."""
    spans: list[list[int]] = character_spans(offsets).tolist()
    lcl_values = np.asarray(long, dtype=np.float64)
    lsd_values = lcl_values - np.asarray(short, dtype=np.float64)
    n, m = len(spans), len(lsd_values)
    if m and trunc_len + m > n:
        raise ValueError(f"{m} targets from token {trunc_len} on in a text of {n} tokens")
    lsd: list[float | None] = [None] * n
    lcl: list[float | None] = [None] * n
    lsd[trunc_len : trunc_len + m], lcl[trunc_len : trunc_len + m] = lsd_values.tolist(), lcl_values.tolist()
    key_positions = trunc_len + np.flatnonzero((lsd_values > alpha) & (lcl_values > beta))
    return KeyTokens(merge_touching([spans[p] for p in key_positions.tolist()]), spans, lsd, lcl)
