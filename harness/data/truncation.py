"""Prompt truncation a user chooses, done by our code before any engine sees the prompt (lm-eval cuts from the left,
silently): only the document's context (:class:`PromptParts`) is cut, to ``limit = max_length - max_gen_toks`` tokens of
the prompt as sent, by ``left`` / ``middle`` / ``right``; ``skip`` leaves it unscored, as does a prompt whose fixed
parts alone do not fit or whose context is not found."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from harness.core.options import option

POLICIES = ("left", "middle", "right", "skip")
DEFAULT_POLICY = "middle"  # the context's head and tail kept: LongBench's rule, the one benchmark that has one
_MAX_ROUNDS = 16  # re-cuts after a seam merged tokens (each removes at least one more token; two suffice in practice)


@dataclass(frozen=True)
class TruncationOptions:
    """How a task cuts a prompt longer than the model's max length minus the generation budget (module docstring)."""

    truncation: str = option(
        DEFAULT_POLICY,
        "over-long prompts: left | middle | right cut the document's context (never "
        "its instruction or question) in the evaluated tokenizer; skip leaves the sample unscored "
        "(counted as n_skipped)",
        choices=POLICIES,
        cache_key="no",
    )  # applied to requests, the rows keep context_span


@dataclass(frozen=True)
class PromptParts:
    """A document's text as ``instruction + context + question``; only ``context`` is ever cut (``""`` where absent)."""

    instruction: str
    context: str
    question: str

    @property
    def text(self) -> str:
        return self.instruction + self.context + self.question

    @classmethod
    def split(cls, text: str, start: int, end: int) -> PromptParts:
        """``text`` with its context at characters ``[start, end)``."""
        if not 0 <= start <= end <= len(text):
            raise ValueError(f"context span [{start}, {end}) is not inside a text of {len(text)} characters")
        return cls(text[:start], text[start:end], text[end:])


class Span(NamedTuple):
    start: int
    end: int


def locate_context(prompt: str, parts: PromptParts) -> Span | None:
    """Where ``parts.context`` sits in ``prompt``: inside the document's text (whole or whitespace-stripped), else the
    context's only occurrence; None when it cannot be told."""
    if not parts.context:
        return None
    text = parts.text
    at = prompt.find(text)
    if at >= 0:
        start = at + len(parts.instruction)
        return Span(start, start + len(parts.context))
    stripped = text.strip()
    at = prompt.find(stripped) if stripped else -1
    lead = len(text) - len(text.lstrip())
    if at >= 0 and lead <= len(parts.instruction):
        start = at + len(parts.instruction) - lead
        end = min(start + len(parts.context), at + len(stripped))
        return Span(start, end)
    for context in dict.fromkeys((parts.context, parts.context.strip())):
        if context and prompt.count(context) == 1:
            start = prompt.find(context)
            return Span(start, start + len(context))
    return None


@dataclass(frozen=True)
class Fitted:
    """A prompt as it is sent: its text, the tokens the cut removed (0: it fitted) and whether it was skipped."""

    text: str
    removed: int = 0
    skipped: bool = False

    @property
    def truncated(self) -> bool:
        return self.removed > 0


def kept_pieces(ids: Sequence[int], keep: int, policy: str) -> tuple[list[int], list[int]]:
    """(head, tail) that ``policy`` keeps of ``ids`` when ``keep`` fit (text ``decode(head) + decode(tail)``): ``left``
    the last ``keep``, ``right`` the first, ``middle`` the first ``ceil(keep / 2)`` and the last ``floor(keep / 2)``."""
    if policy not in POLICIES or policy == "skip":
        raise ValueError(f"kept_pieces: policy {policy!r} cuts nothing (one of left, middle, right)")
    keep = max(0, min(keep, len(ids)))
    if policy == "left":
        return [], list(ids[len(ids) - keep :])
    if policy == "right":
        return list(ids[:keep]), []
    head = (keep + 1) // 2
    return list(ids[:head]), list(ids[len(ids) - (keep - head) :])


def fit_prompt(
    prompt: str,
    parts: PromptParts,
    limit: int,
    policy: str,
    count: Callable[[str], int],
    encode: Callable[[str], list[int]],
    decode: Callable[[list[int]], str],
) -> Fitted:
    """``prompt`` cut by ``policy`` to at most ``limit`` tokens, context only, counted again after each cut (a seam can
    merge tokens); ``count`` counts as the engine will, ``encode`` / ``decode`` work without special tokens."""
    if policy not in POLICIES:
        raise ValueError(f"truncation {policy!r}: use one of {', '.join(POLICIES)}")
    total = count(prompt)
    if total <= limit:
        return Fitted(prompt)
    span = locate_context(prompt, parts) if policy != "skip" else None
    if span is None:  # skip, or a context that cannot be told apart from what must stay whole
        return Fitted(prompt, skipped=True)
    before, after = prompt[: span.start], prompt[span.end :]
    ids = encode(prompt[span.start : span.end])
    over = total - limit
    for _ in range(_MAX_ROUNDS):
        if over > len(ids):  # the fixed parts and the budget alone do not fit
            return Fitted(prompt, skipped=True)
        head, tail = kept_pieces(ids, len(ids) - over, policy)
        cut = before + decode(head) + decode(tail) + after
        now = count(cut)
        if now <= limit:
            return Fitted(cut, removed=total - now)
        over += now - limit
    return Fitted(prompt, skipped=True)  # pragma: no cover - a tokenizer whose seams never settle


def prompt_fitter(tokenizer: Any, count: Callable[[str], int]) -> Callable[[str, PromptParts, int, str], Fitted]:
    """:func:`fit_prompt` bound to a Hugging Face tokenizer and a prompt counter (``count``)."""

    def fit(prompt: str, parts: PromptParts, limit: int, policy: str) -> Fitted:
        return fit_prompt(
            prompt,
            parts,
            limit,
            policy,
            count,
            lambda body: tokenizer(body, add_special_tokens=False)["input_ids"],
            lambda ids: tokenizer.decode(ids) if ids else "",
        )

    return fit
