"""The first tokens of a text without tokenizing it whole: :func:`encode_head` tokenizes a doubling prefix until it
holds :data:`HEAD_MARGIN` tokens more than asked and two prefixes agree on the first ``n`` (the ids and offsets
whole-text tokenization gives); more than :data:`MAX_CHARS_PER_TOKEN` characters per token asked for is refused."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.core.errors import UsageError

HEAD_MARGIN = 64  # tokens past the cut that a prefix must hold before its first n tokens are trusted
FIRST_CHARS_PER_TOKEN = 8  # the first prefix: this many characters per token asked for (English: about 4)
MAX_CHARS_PER_TOKEN = 4096  # beyond this many characters per token asked for, the text is refused


@dataclass(frozen=True)
class Head:
    """The first tokens of a text: ``ids``, ``offsets`` (None unless asked for) and ``total``, the whole text's token
    count when it was tokenized whole, else None."""

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
    """The first ``n`` (None: all) tokens of ``text`` under ``tokenizer(text, **kwargs)``, as if tokenized whole."""
    if n is None:  # the whole text
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
            raise UsageError(
                f"a text of {len(text):,} characters holds fewer than {n + HEAD_MARGIN} tokens in its first "
                f"{size:,} characters: it is not text a model reads (e.g. one character repeated); "
                "remove it from the data"
            )
        size *= 2


def count_tokens_upto(tokenizer: Any, text: str, limit: int, **kwargs: Any) -> int:
    """``min(token count of text, limit)``, tokenizing no more of the text than that takes."""
    if limit <= 0:
        return 0
    return min(encode_head(tokenizer, text, limit, **kwargs).count_at_least(), limit)
