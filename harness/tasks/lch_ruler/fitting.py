"""Fitting each sample's haystack size ``n`` to a token budget: ``(n, prompt_tokens)`` with ``prompt_tokens <= target``,
counted exactly as the evaluated prompt; :class:`TooShortError` when even ``n_min`` does not fit. Both searches start
from a linear tokens-vs-``n`` model and correct by secant steps inside a bracket."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from harness.core.errors import UsageError
from harness.data.prompt_tokens import PromptCounter
from harness.tasks.lch_ruler.builders import Builder

LAYER = "data"  # harness/devtools/layers.py

log = logging.getLogger(__name__)


class TooShortError(UsageError):
    """The prompt does not fit the token budget even with the smallest haystack."""


class SourceTooShortError(UsageError):
    """The sample's source runs out of haystack before the prompt reaches the token budget."""


def _require_fit(tokens: int, target: int) -> None:
    if tokens > target:
        raise TooShortError(f"the prompt alone needs {tokens} tokens, more than the {target} available")


class SegmentCounter:
    """Exact prompt token counts from cached per-segment counts: ``pre + s_0 + ... + s_k + post`` has ``specials +
    sum(tokens(segment))`` tokens when every junction is clean (``tokens(x + y) == tokens(x) + tokens(y)``, as local
    pre-tokenizers give); :meth:`count` checks every junction (each distinct pair once) and returns None when one is
    not, so callers fall back to full tokenization."""

    def __init__(self, counter: PromptCounter) -> None:
        self.counter, self.tok = counter, counter.tokenizer
        self._tokens: dict[str, int] = {}
        self._clean: dict[tuple[str, str], bool] = {}
        self._wrap: dict[str, tuple[str, str, int]] = {}

    def _count_new(self, texts: list[str]) -> None:
        missing = list(dict.fromkeys(t for t in texts if t not in self._tokens))
        if missing:
            for text, ids in zip(missing, self.tok(missing, add_special_tokens=False)["input_ids"]):
                self._tokens[text] = len(ids)

    def wrapping(self, prefix: str) -> tuple[str, str, int]:
        """``(pre, post, n_special)``: the rendered prompt is ``pre + text + post``."""
        if prefix not in self._wrap:
            marker = "\x00\x01\x00"
            pre, post = self.counter.render(marker, prefix).split(marker)
            rendered = self.counter.render("x", prefix)
            flag = self.counter._special_kwargs(rendered)["add_special_tokens"]
            n_special = len(self.tok(rendered, add_special_tokens=flag)["input_ids"]) - len(
                self.tok(rendered, add_special_tokens=False)["input_ids"]
            )
            self._wrap[prefix] = (pre, post, n_special)
        return self._wrap[prefix]

    def count(self, segments: list[str], prefix: str) -> int | None:
        """Tokens of the prompt ``"".join(segments)`` answered with ``prefix``; None if a junction is not clean."""
        pre, post, n_special = self.wrapping(prefix)
        segments = [s for s in segments if s]
        segments[0], segments[-1] = pre + segments[0], segments[-1] + post
        pairs = list(zip(segments, segments[1:]))
        self._count_new(segments)
        unseen = list(dict.fromkeys(p for p in pairs if p not in self._clean))
        if unseen:
            self._count_new([x + y for x, y in unseen])
            for x, y in unseen:
                self._clean[(x, y)] = self._tokens[x + y] == self._tokens[x] + self._tokens[y]
        if not all(self._clean[p] for p in pairs):
            return None
        return n_special + sum(self._tokens[s] for s in segments)


def fit_additive(
    builders: list[Builder], seg: SegmentCounter, target: int, spot_check: int = 50
) -> list[tuple[int, int]] | None:
    """For each builder (all with ``parts``), the largest ``n`` whose exact count is ``<= target``, and that count; None
    when a junction is not clean or a spot check by full tokenization disagrees (the caller then counts fully)."""
    results = []
    guess, slope = None, 1.0
    for i, b in enumerate(builders):
        prefix, parts = b.build(b.n_min)[2], b.parts
        if parts is None:
            raise TypeError(f"fit_additive: builder {i} has no parts")

        def count(n: int) -> int | None:
            return seg.count(parts(n), prefix)  # noqa: B023 (used in this iteration only)

        lo_c: int | None = None  # count(lo), once known
        if guess is None or guess <= b.n_min:
            lo_c = count(b.n_min)
            if lo_c is None:
                return None
            _require_fit(lo_c, target)
        if guess is None:  # the first sample: per-unit cost from a short probe
            probe = min(b.n_max, b.n_min + 16)
            c = count(probe)
            if c is None:
                return None
            assert lo_c is not None  # counted above: guess is None
            slope = max((c - lo_c) / max(probe - b.n_min, 1), 1e-3)
            guess = b.n_min + int((target - lo_c) / slope)
        lo, hi = b.n_min, b.n_max + 1  # count(lo) <= target < count(hi), once lo_c is known
        n = min(max(guess, lo + 1), b.n_max) if b.n_max > lo else lo
        while hi - lo > 1:
            c = count(n)
            if c is None:
                return None
            if c <= target:
                lo, lo_c = n, c
                n += max(1, int((target - c) / slope))  # secant step, then kept inside (lo, hi)
            else:
                hi = n
                n -= max(1, math.ceil((c - target) / slope))
            if hi - lo > 1 and not lo < n < hi:
                n = (lo + hi) // 2
        guess = lo
        if lo_c is None:  # every probe was over: lo is n_min, never counted for this sample
            lo_c = count(lo)
            if lo_c is None:
                return None
            _require_fit(lo_c, target)
        if i % spot_check == 0:
            text, _, prefix = b.build(lo)
            if seg.counter(text, prefix) != lo_c:
                log.warning("RULER additive token count disagreed with full tokenization; counting fully")
                return None
        results.append((lo, lo_c))
    return results


@dataclass
class _Search:
    """One sample's state in :func:`fit_full`."""

    guess: int  # the next n to count
    over: int  # the smallest n known not to fit (n_max + 1 until one is found)
    fit: tuple[int, int] | None = None  # the largest fitting (n, tokens) counted so far
    prev: tuple[int, int] | None = None  # the previous probe (n, tokens), for this sample's own secant


def fit_full(builders: list[Builder], counter: PromptCounter, target: int, chunk: int = 16) -> list[tuple[int, int]]:
    """For each builder, ``(n, prompt_tokens)`` with ``prompt_tokens <= target`` and less than one average
    unit left unused (or ``n + 1`` known not to fit, or ``n == n_max``), counting whole prompts in batched
    tokenizer calls of ``chunk`` samples. Raises :class:`TooShortError` when even ``n_min`` is too long."""

    def count(pairs: list[tuple[int, int]]) -> list[int]:
        rendered = []
        for b, n in pairs:
            text, _, prefix = builders[b].build(n)
            rendered.append(counter.render(text, prefix))
        return counter.count_rendered(rendered)

    first = builders[0]
    lo_n = first.n_min
    hi_n = min(first.n_max, lo_n + 16)
    c_lo, c_hi = count([(0, lo_n), (0, hi_n)])
    _require_fit(c_lo, target)
    slope = max((c_hi - c_lo) / max(hi_n - lo_n, 1), 1e-3)
    results: list[tuple[int, int] | None] = [None] * len(builders)
    state = [
        _Search(guess=min(b.n_max, max(b.n_min, lo_n + int((target - c_lo) / slope))), over=b.n_max + 1)
        for b in builders
    ]
    pending = list(range(len(builders)))
    for _ in range(64):
        if not pending:
            break
        for start in range(0, len(pending), chunk):
            batch = pending[start : start + chunk]
            done = sorted(r[0] for r in results[max(0, batch[0] - chunk) : batch[0]] if r is not None)
            if done:  # samples of one task fit at similar sizes: start this chunk where the last one ended
                for b in batch:
                    s = state[b]
                    if s.fit is None and s.over > builders[b].n_max:
                        s.guess = min(builders[b].n_max, max(builders[b].n_min, done[len(done) // 2]))
            counts = count([(b, state[b].guess) for b in batch])
            for b, c in zip(batch, counts):
                s, n = state[b], state[b].guess
                if c <= target:
                    s.fit = (n, c) if s.fit is None or n > s.fit[0] else s.fit
                else:
                    s.over = min(s.over, n)
                fit_n, fit_c = s.fit if s.fit is not None else (builders[b].n_min - 1, None)
                if fit_c is not None and (target - fit_c < slope or fit_n + 1 >= s.over):
                    results[b] = s.fit
                    continue
                if s.fit is None and n <= builders[b].n_min:  # c > target: even n_min does not fit
                    _require_fit(c, target)
                # secant step through this sample's own previous probe (unit sizes differ between samples)
                prev = s.prev
                own = (c - prev[1]) / (n - prev[0]) if prev is not None and prev[0] != n and c != prev[1] else 0.0
                s.prev = (n, c)
                step = (target - c) / (own if own > 0 else slope)
                nxt = n + (math.floor(step) if step > 0 else -math.ceil(-step) - 1)
                s.guess = min(max(nxt, fit_n + 1, builders[b].n_min), s.over - 1)
                if s.guess <= fit_n:
                    s.guess = (fit_n + s.over) // 2
        pending = [b for b in pending if results[b] is None]
    if pending:
        raise RuntimeError(f"RULER fitting did not converge for {len(pending)} samples")
    return [r for r in results if r is not None]  # none pending: every sample has its fit
