"""The first tokens of a text without tokenizing all of it, so that a document's size costs memory only up to what is
scored (a 500 MB document cut to 32,767 tokens is tokenized over about a megabyte of its head, not whole).

A tokenizer's output for a prefix of a text agrees with its output for the whole text except near the cut (the last
pre-token, or a few pieces, can tokenize differently). :func:`encode_head` tokenizes a growing prefix (doubling) until
it holds :data:`HEAD_MARGIN` tokens more than asked and two successive prefixes agree on the first ``n`` tokens, then
keeps those: the same ids and offsets as tokenizing the whole text and cutting, which ``tests/data/test_token_heads.py``
checks against whole-text tokenization on real tokenizers. A prefix that needs more than :data:`MAX_CHARS_PER_TOKEN`
characters per token asked for (a text made of almost nothing but one repeated character) is refused in one line
rather than tokenized without end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.core.errors import UsageError

HEAD_MARGIN = 64  # tokens past the cut that a prefix must hold before its first n tokens are trusted
FIRST_CHARS_PER_TOKEN = 8  # the first prefix: this many characters per token asked for (English: about 4)
MAX_CHARS_PER_TOKEN = 4096  # beyond this many characters per token asked for, the text is refused


@dataclass(frozen=True)
class Head:
    """The first tokens of a text: ``ids`` and ``offsets`` (None unless asked for), and ``total``, the token count of
    the whole text when it was tokenized whole (it had at most a few more tokens than asked), else None (more than
    ``n + HEAD_MARGIN``)."""

    ids: list[int]
    offsets: list[list[int]] | None
    total: int | None

    def count_at_least(self) -> int:
        """The whole text's token count when known, else a lower bound above the head's length."""
        return self.total if self.total is not None else len(self.ids) + HEAD_MARGIN


def _encode(tokenizer: Any, text: str, kwargs: dict) -> tuple[list[int], list[list[int]] | None]:
    enc = tokenizer(text, **kwargs)
    offsets = enc.get("offset_mapping") if kwargs.get("return_offsets_mapping") else None
    return list(enc["input_ids"]), None if offsets is None else [list(span) for span in offsets]


def encode_head(tokenizer: Any, text: str, n: int | None, **kwargs: Any) -> Head:
    """The first ``n`` tokens of ``text`` under ``tokenizer(text, **kwargs)`` (``add_special_tokens``,
    ``return_offsets_mapping``), as whole-text tokenization would give them (module docstring); ``n`` None: the
    whole text."""
    if n is None:
        ids, offsets = _encode(tokenizer, text, kwargs)
        return Head(ids, offsets, len(ids))
    size = max(4096, FIRST_CHARS_PER_TOKEN * (n + HEAD_MARGIN))
    agreed: list[int] | None = None  # the first n ids of the last prefix long enough
    while True:
        if size >= len(text):
            ids, offsets = _encode(tokenizer, text, kwargs)
            return Head(ids[:n], None if offsets is None else offsets[:n], len(ids))
        ids, offsets = _encode(tokenizer, text[:size], kwargs)
        if len(ids) >= n + HEAD_MARGIN:
            if agreed == ids[:n]:
                return Head(ids[:n], None if offsets is None else offsets[:n], None)
            agreed = ids[:n]
        if size > MAX_CHARS_PER_TOKEN * max(n, 1):
            raise UsageError(f"a text of {len(text):,} characters holds fewer than {n + HEAD_MARGIN} tokens in its first "
                             f"{size:,} characters: it is not text a model reads (e.g. one character repeated); "
                             "remove it from the data")
        size *= 2


def count_tokens_upto(tokenizer: Any, text: str, limit: int, **kwargs: Any) -> int:
    """``min(token count of text, limit)``, tokenizing no more of the text than that takes."""
    if limit <= 0:
        return 0
    return min(encode_head(tokenizer, text, limit, **kwargs).count_at_least(), limit)
