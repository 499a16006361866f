"""Truncation a user chooses: how a prompt longer than the model's room is cut, by our code, before any engine sees it.

lm-eval's HF and vLLM models cut an over-long prompt from the left, silently, which can cut away the
instruction at the start of a RULER prompt (lm-eval #3115); LongBench keeps the head and the tail. A task with
:class:`TruncationOptions` cuts its prompts itself, the same way on every engine (the engine then has nothing left to
cut), and counts what it did:

* the room is ``limit = max_length - max_gen_toks`` tokens, counted in the evaluated tokenizer on the prompt as sent
  (chat template and BOS included: :class:`harness.data.prompt_tokens.PromptCounter`);
* only the document's context is cut: a task gives its text as three pieces, :class:`PromptParts` (the
  instruction, the context, the question: ``instruction + context + question`` is the task's ``doc_to_text``), the
  context is found inside the rendered prompt, and every character outside it (the chat template's wrapper, the
  instruction with its worked examples, the question, the answer prefix) is sent as it is;
* ``left`` removes the first tokens of the context, ``right`` the last, ``middle`` keeps the first ``ceil(k / 2)`` and
  the last ``floor(k / 2)`` of the ``k`` tokens that fit (LongBench's rule); ``skip`` sends nothing to score: the
  sample leaves the score's denominator and is counted;
* a cut re-tokenised can merge tokens at its seam, so the prompt is counted again after the cut and cut further
  until it fits (:func:`fit_prompt`); the tokens removed are the difference of the two counts.

A prompt that does not fit even with the whole context cut (the template, the instruction, the question and the
budget alone exceed the room), or whose context cannot be found in the prompt as rendered, is skipped, whatever the
policy: a prompt is never sent without its instruction or its question.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Sequence

from harness.core.options import option

POLICIES = ("left", "middle", "right", "skip")
DEFAULT_POLICY = "middle"  # the context's head and tail kept: LongBench's rule, the one benchmark that has one
_MAX_ROUNDS = 16  # re-cuts after a seam merged tokens (each removes at least one more token; two suffice in practice)


@dataclass(frozen=True)
class TruncationOptions:
    """How a task cuts a prompt longer than the model's max length minus the generation budget (module docstring)."""

    truncation: str = option(DEFAULT_POLICY, "over-long prompts: left | middle | right cut the document's context (never "
                             "its instruction or question) in the evaluated tokenizer; skip leaves the sample unscored "
                             "(counted as n_skipped)",
                             choices=POLICIES, shapes="no")  # applied to requests, the rows keep context_span


@dataclass(frozen=True)
class PromptParts:
    """A document's text as a cut tells it apart: ``instruction + context + question == text``; only ``context`` is
    ever cut. A task whose text has no instruction or question before or after its context gives ``""``."""

    instruction: str
    context: str
    question: str

    @property
    def text(self) -> str:
        return self.instruction + self.context + self.question

    @classmethod
    def split(cls, text: str, start: int, end: int) -> "PromptParts":
        """``text`` with its context at characters ``[start, end)``."""
        if not 0 <= start <= end <= len(text):
            raise ValueError(f"context span [{start}, {end}) is not inside a text of {len(text)} characters")
        return cls(text[:start], text[start:end], text[end:])


class Span(NamedTuple):
    start: int
    end: int


def locate_context(prompt: str, parts: PromptParts) -> Span | None:
    """Where ``parts.context`` sits in the rendered ``prompt``: inside the document's text when the prompt holds it
    whole (or with its outer whitespace stripped, as some chat templates do), else the context's only occurrence;
    None when it cannot be told (absent, or found several times outside the text)."""
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
    """The tokens ``policy`` keeps of ``ids`` when ``keep`` of them fit, as (head, tail): the text is
    ``decode(head) + decode(tail)``. ``left`` keeps the last ``keep``, ``right`` the first, ``middle`` the first
    ``ceil(keep / 2)`` and the last ``floor(keep / 2)``."""
    if policy not in POLICIES or policy == "skip":
        raise ValueError(f"kept_pieces: policy {policy!r} cuts nothing (one of left, middle, right)")
    keep = max(0, min(keep, len(ids)))
    if policy == "left":
        return [], list(ids[len(ids) - keep:])
    if policy == "right":
        return list(ids[:keep]), []
    head = (keep + 1) // 2
    return list(ids[:head]), list(ids[len(ids) - (keep - head):])


def fit_prompt(prompt: str, parts: PromptParts, limit: int, policy: str, count: Callable[[str], int],
               encode: Callable[[str], list[int]], decode: Callable[[list[int]], str]) -> Fitted:
    """``prompt`` cut to at most ``limit`` tokens by ``policy``, removing tokens of the context only (module
    docstring). ``parts`` is the document's text inside ``prompt`` as instruction, context and question; ``count``
    counts a whole prompt as the engine will see it, ``encode`` / ``decode`` tokenise the context without special
    tokens."""
    if policy not in POLICIES:
        raise ValueError(f"truncation {policy!r}: use one of {', '.join(POLICIES)}")
    total = count(prompt)
    if total <= limit:
        return Fitted(prompt)
    span = locate_context(prompt, parts) if policy != "skip" else None
    if span is None:  # skip, or a context that cannot be told apart from what must stay whole
        return Fitted(prompt, skipped=True)
    before, after = prompt[:span.start], prompt[span.end:]
    ids = encode(prompt[span.start:span.end])
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
        return fit_prompt(prompt, parts, limit, policy, count,
                          lambda body: tokenizer(body, add_special_tokens=False)["input_ids"],
                          lambda ids: tokenizer.decode(ids) if ids else "")

    return fit
