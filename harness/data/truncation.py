"""Truncation a user chooses: how a prompt longer than the model's room is cut, by our code, before any engine sees it.

lm-eval's HF and vLLM models cut an over-long prompt from the left, silently, which can cut away the
instruction at the start of a RULER prompt (lm-eval #3115); LongBench keeps the head and the tail. A task with
:class:`TruncationOptions` cuts its prompts itself, the same way on every engine (the engine then has nothing left to
cut), and counts what it did:

* the room is ``limit = max_length - max_gen_toks`` tokens, counted in the evaluated tokenizer on the prompt as sent
  (chat template and BOS included: :class:`harness.data.prompts.PromptCounter`);
* only the document's own text is cut (the task's ``doc_to_text``, found inside the rendered prompt), so the chat
  template's wrapper and the answer prefix stay whole;
* ``left`` removes the first tokens of that text, ``right`` the last, ``middle`` keeps the first ``ceil(k / 2)`` and
  the last ``floor(k / 2)`` of the ``k`` tokens that fit (LongBench's rule); ``skip`` sends nothing to score: the
  sample leaves the score's denominator and is counted;
* a cut re-tokenised can merge tokens at its seam, so the prompt is counted again after the cut and cut further
  until it fits (:func:`fit_prompt`); the tokens removed are the difference of the two counts.

A prompt that does not fit even with the whole text cut (the template and the budget alone exceed the room) is
skipped, whatever the policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from harness.core.options import option

POLICIES = ("left", "middle", "right", "skip")
DEFAULT_POLICY = "middle"  # keeps the instruction and the question; LongBench's rule, the one benchmark that has one
_MAX_ROUNDS = 16  # re-cuts after a seam merged tokens (each removes at least one more token; two suffice in practice)


@dataclass(frozen=True)
class TruncationOptions:
    """How a task cuts a prompt longer than the model's max length minus the generation budget (module docstring)."""

    truncation: str = option(DEFAULT_POLICY, "over-long prompts: left | middle | right cut the document's text in the "
                             "evaluated tokenizer; skip leaves the sample unscored (counted as n_skipped)",
                             choices=POLICIES)


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


def fit_prompt(prompt: str, text: str, limit: int, policy: str, count: Callable[[str], int],
               encode: Callable[[str], list[int]], decode: Callable[[list[int]], str]) -> Fitted:
    """``prompt`` cut to at most ``limit`` tokens by ``policy`` (module docstring). ``text`` is the document's text
    inside ``prompt`` (the whole prompt is cut when it is not found there); ``count`` counts a whole prompt as the
    engine will see it, ``encode`` / ``decode`` tokenise ``text`` without special tokens."""
    if policy not in POLICIES:
        raise ValueError(f"truncation {policy!r}: use one of {', '.join(POLICIES)}")
    total = count(prompt)
    if total <= limit:
        return Fitted(prompt)
    if policy == "skip":
        return Fitted(prompt, skipped=True)
    text = text if not text or text in prompt else text.strip()  # a template may strip the text's outer whitespace
    start = prompt.find(text) if text else -1
    before, body, after = ("", prompt, "") if start < 0 else (prompt[:start], text, prompt[start + len(text):])
    ids = encode(body)
    over = total - limit
    for _ in range(_MAX_ROUNDS):
        if over > len(ids):  # the wrapper and the budget alone do not fit
            return Fitted(prompt, skipped=True)
        head, tail = kept_pieces(ids, len(ids) - over, policy)
        cut = before + decode(head) + decode(tail) + after
        now = count(cut)
        if now <= limit:
            return Fitted(cut, removed=total - now)
        over += now - limit
    return Fitted(prompt, skipped=True)  # pragma: no cover - a tokenizer whose seams never settle


def prompt_fitter(tokenizer: Any, count: Callable[[str], int]) -> Callable[[str, str, int, str], Fitted]:
    """:func:`fit_prompt` bound to a Hugging Face tokenizer and a prompt counter (``count``)."""

    def fit(prompt: str, text: str, limit: int, policy: str) -> Fitted:
        return fit_prompt(prompt, text, limit, policy, count,
                          lambda body: tokenizer(body, add_special_tokens=False)["input_ids"],
                          lambda ids: tokenizer.decode(ids) if ids else "")

    return fit
