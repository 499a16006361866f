"""Truncation arithmetic (harness/data/truncation.py) on a word tokenizer, where every count is known by hand.

The document's text is an instruction (``Find it:``), a 10-word context ``w0 ... w9`` and a question (``Which?``);
the prompt wraps it as ``<s> Q: Find it: w0 w1 ... w9 Which? A:``: 16 tokens, of which only the 10 context words may
be cut. With room for 11, 5 context words must go."""

from __future__ import annotations

import pytest

from harness.data.truncation import POLICIES, PromptParts, fit_prompt, kept_pieces, locate_context

CONTEXT = " ".join(f"w{i}" for i in range(10))
PARTS = PromptParts("Find it: ", CONTEXT, " Which?")
PROMPT = f"<s> Q: {PARTS.text} A:"
FIXED = ["<s>", "Q:", "Find", "it:"], ["Which?", "A:"]  # the words before and after the context, never cut


def count(prompt: str) -> int:
    return len(prompt.split())


def encode(text: str) -> list[int]:
    return [int(word[1:]) for word in text.split()]


def decode(ids: list[int]) -> str:
    return " ".join(f"w{i}" for i in ids)


def fit(policy: str, limit: int = 11, parts: PromptParts = PARTS, prompt: str = PROMPT):
    # the word decoder drops the spaces at the seams; joining pieces with a space is this tokenizer's decode
    return fit_prompt(prompt, parts, limit, policy, count, encode, lambda ids: decode(ids) + (" " if ids else ""))


def test_kept_pieces_by_hand():
    ids = list(range(10))
    assert kept_pieces(ids, 5, "left") == ([], [5, 6, 7, 8, 9])
    assert kept_pieces(ids, 5, "right") == ([0, 1, 2, 3, 4], [])
    assert kept_pieces(ids, 5, "middle") == ([0, 1, 2], [8, 9])  # ceil(5 / 2) first, floor(5 / 2) last
    assert kept_pieces(ids, 4, "middle") == ([0, 1], [8, 9])
    assert kept_pieces(ids, 0, "middle") == ([], [])
    assert kept_pieces(ids, 12, "left") == ([], ids)  # more room than tokens: all kept
    with pytest.raises(ValueError):
        kept_pieces(ids, 5, "skip")


@pytest.mark.parametrize(
    "policy, words", [("left", "w5 w6 w7 w8 w9"), ("right", "w0 w1 w2 w3 w4"), ("middle", "w0 w1 w2 w8 w9")]
)
def test_each_policy_removes_exactly_the_overflow_from_its_side_of_the_context(policy, words):
    fitted = fit(policy)
    assert fitted.text.split() == [*FIXED[0], *words.split(), *FIXED[1]]  # instruction, question, wrapper whole
    assert fitted.removed == 5 and fitted.truncated and not fitted.skipped
    assert count(fitted.text) == 11


def test_a_prompt_that_fits_is_sent_as_it_is():
    for policy in POLICIES:
        fitted = fit(policy, limit=16)
        assert fitted.text == PROMPT and fitted.removed == 0 and not fitted.skipped


def test_skip_and_fixed_parts_longer_than_the_room():
    assert fit("skip").skipped and fit("skip").text == PROMPT
    # 6 fixed words (wrapper, instruction, question) cannot fit in 5 whatever is cut from the context
    for policy in ("left", "middle", "right"):
        assert fit(policy, limit=5).skipped
        assert fit(policy, limit=6).text.split() == [*FIXED[0], *FIXED[1]]  # the whole context cut, nothing else


def test_the_question_and_instruction_survive_every_cut_by_hand():
    """Each room from 6 (fixed parts only) to 16 (everything): the instruction and the question are in the prompt,
    character for character, and exactly ``16 - room`` context words are gone."""
    for policy in ("left", "middle", "right"):
        for room in range(6, 17):
            fitted = fit(policy, limit=room)
            assert fitted.text.startswith("<s> Q: Find it: ") and fitted.text.endswith(" Which? A:")
            assert count(fitted.text) == room and fitted.removed == 16 - room


def test_a_context_not_found_in_the_prompt_is_never_cut_around():
    """A template that rewrote the document's text (its context no longer in the prompt) cannot be cut safely: the
    sample is skipped, never sent without its question."""
    assert fit("left", prompt="<s> Q: something else entirely w3 A:", limit=3).skipped


def test_locate_context_inside_a_stripped_text_and_by_its_only_occurrence():
    parts = PromptParts("  Find it: ", CONTEXT, " Which?  ")
    stripped = f"<user>{parts.text.strip()}</user>"  # a template that strips the text's outer whitespace
    at = locate_context(stripped, parts)
    assert stripped[at.start : at.end] == CONTEXT
    reordered = f"Which? first, then {CONTEXT}"  # the text not found whole: the context's only occurrence
    at = locate_context(reordered, PARTS)
    assert reordered[at.start : at.end] == CONTEXT
    assert locate_context(f"{CONTEXT} and again {CONTEXT}", PARTS) is None  # twice, outside the text: ambiguous


def test_parts_split_by_span():
    parts = PromptParts.split("ab[ctx]cd", 2, 7)
    assert parts == PromptParts("ab", "[ctx]", "cd") and parts.text == "ab[ctx]cd"
    with pytest.raises(ValueError):
        PromptParts.split("abc", 2, 5)


def test_a_seam_that_adds_tokens_is_cut_again():
    """A decoder whose pieces re-tokenise longer than counted (here each piece gains a ``|`` token, as a byte-level
    seam can) overshoots the first cut: the fit counts again and cuts the overshoot too. Middle, room 11: round 1
    keeps 5 (w0 w1 w2 | w8 w9 |) = 6 + 5 + 2 = 13 tokens, 2 over; round 2 keeps 3 (w0 w1 | w9 |) = 11."""
    fitted = fit_prompt(PROMPT, PARTS, 11, "middle", count, encode, lambda ids: decode(ids) + " | " if ids else "")
    assert fitted.text.split() == [*FIXED[0], "w0", "w1", "|", "w9", "|", *FIXED[1]]
    assert fitted.removed == 16 - 11 == 5
