"""Truncation arithmetic (harness/data/truncation.py) on a word tokenizer, where every count is known by hand.

The prompt is ``<s> Q: w0 w1 ... w9 A:``: a wrapper of 3 words (``<s>``, ``Q:``, ``A:``) around a 10-word text, 13
tokens. With room for 8, 5 words of the text must go."""

from __future__ import annotations

import pytest

from harness.data.truncation import POLICIES, fit_prompt, kept_pieces

TEXT = " ".join(f"w{i}" for i in range(10))
PROMPT = f"<s> Q: {TEXT} A:"


def count(prompt: str) -> int:
    return len(prompt.split())


def encode(text: str) -> list[int]:
    return [int(word[1:]) for word in text.split()]


def decode(ids: list[int]) -> str:
    return " ".join(f"w{i}" for i in ids)


def fit(policy: str, limit: int = 8, text: str = TEXT):
    # the word decoder drops the spaces at the seams; joining pieces with a space is this tokenizer's decode
    return fit_prompt(PROMPT, text, limit, policy, count, encode, lambda ids: decode(ids) + (" " if ids else ""))


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


@pytest.mark.parametrize("policy, words", [("left", "w5 w6 w7 w8 w9"), ("right", "w0 w1 w2 w3 w4"),
                                            ("middle", "w0 w1 w2 w8 w9")])
def test_each_policy_removes_exactly_the_overflow_from_its_side(policy, words):
    fitted = fit(policy)
    assert fitted.text.split() == ["<s>", "Q:", *words.split(), "A:"]  # the wrapper whole
    assert fitted.removed == 5 and fitted.truncated and not fitted.skipped
    assert count(fitted.text) == 8


def test_a_prompt_that_fits_is_sent_as_it_is():
    for policy in POLICIES:
        fitted = fit(policy, limit=13)
        assert fitted.text == PROMPT and fitted.removed == 0 and not fitted.skipped


def test_skip_and_a_wrapper_longer_than_the_room():
    assert fit("skip").skipped and fit("skip").text == PROMPT
    assert fit("left", limit=2).skipped  # 3 wrapper words cannot fit in 2 whatever is cut


def test_text_not_found_cuts_the_whole_prompt():
    # "Q:" is not a w-word: the word decoder reads only w-words, so give it a prompt made of them
    fitted = fit_prompt(TEXT, "absent", 4, "left", count, encode, decode)
    assert fitted.text == "w6 w7 w8 w9" and fitted.removed == 6


def test_a_seam_that_adds_tokens_is_cut_again():
    """A decoder whose pieces re-tokenise longer than counted (here each piece gains a ``|`` token, as a byte-level
    seam can) overshoots the first cut: the fit counts again and cuts the overshoot too. Middle, room 8: round 1
    keeps 5 (w0 w1 w2 | w8 w9 |) = 3 + 5 + 2 = 10 tokens, 2 over; round 2 keeps 3 (w0 w1 | w9 |) = 8."""
    fitted = fit_prompt(PROMPT, TEXT, 8, "middle", count, encode, lambda ids: decode(ids) + " | " if ids else "")
    assert fitted.text.split() == ["<s>", "Q:", "w0", "w1", "|", "w9", "|", "A:"]
    assert fitted.removed == 13 - 8 == 5
