"""The first n tokens of a text from its head only (harness/data/token_heads.py) equal those of the whole text,
tokenized whole and cut, on real tokenizers (SmolLM2's byte-level BPE, Gemma 3's SentencePiece BPE) and the tiny
model's; a huge document cut to a few tokens is read only over its head; a text of one character repeated is refused."""

from __future__ import annotations

import random

import pytest
from transformers import AutoTokenizer

from harness.core.errors import UsageError
from harness.data.token_heads import count_tokens_upto, encode_head
from tests.conftest import SHARED_DATA

ESSAYS = SHARED_DATA / "paul_graham_essays"


def _texts() -> list[str]:
    rng = random.Random(3)
    essays = sorted(ESSAYS.glob("*.txt"))[:3] if ESSAYS.is_dir() else []
    texts = [p.read_text(encoding="utf-8") * 3 for p in essays]
    words = ["river", "Budget", "naïve", "東京", "данные", "3.14159", "—", "\n\n", "   ", "«quoted»", "e-mail@x.org"]
    texts.append(" ".join(rng.choice(words) for _ in range(20000)))
    texts.append("x" * 3000 + " tail " + "y" * 50000)  # a long pre-token across the cut
    texts.append("".join(rng.choice("abc \n東語😀") for _ in range(60000)))
    return texts


def _whole(tokenizer, text: str, n: int, **kwargs) -> tuple[list[int], list[list[int]] | None]:
    enc = tokenizer(text, **kwargs)
    offsets = [list(s) for s in enc["offset_mapping"]][:n] if kwargs.get("return_offsets_mapping") else None
    return list(enc["input_ids"])[:n], offsets


@pytest.fixture(params=["tiny", "smollm2", "gemma3"])
def tokenizer(request, tiny_model_dir):
    folder = tiny_model_dir if request.param == "tiny" else request.getfixturevalue(f"{request.param}_dir")
    return AutoTokenizer.from_pretrained(folder)


def test_the_head_is_what_whole_text_tokenization_gives(tokenizer):
    for text in _texts():
        for n in (1, 7, 512, 3000):
            for kwargs in ({"add_special_tokens": True, "return_offsets_mapping": True}, {"add_special_tokens": False}):
                head = encode_head(tokenizer, text, n, **kwargs)
                ids, offsets = _whole(tokenizer, text, n, **kwargs)
                assert head.ids == ids and head.offsets == offsets, (n, kwargs, text[:40])
                whole = len(tokenizer(text, **kwargs)["input_ids"])
                assert head.total in (whole, None) and head.count_at_least() <= whole
                assert count_tokens_upto(tokenizer, text, n, **kwargs) == min(whole, n)


def test_a_huge_document_is_read_only_over_its_head(tiny_model_dir):
    """A 200 MB text cut to 100 tokens: the tokenizer is handed a few kilobytes, never the text."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    seen: list[int] = []
    real = tokenizer.__call__

    class Counting(type(tokenizer)):
        def __call__(self, text, **kwargs):
            seen.append(len(text))
            return real(text, **kwargs)

    tokenizer.__class__ = Counting
    text = "The committee reviewed the budget. " * 6_000_000
    head = encode_head(tokenizer, text, 100)
    assert len(head.ids) == 100 and head.total is None and max(seen) <= 8 * 4096
    assert head.ids == real(text[:100_000])["input_ids"][:100]


def test_a_text_that_holds_almost_no_tokens_is_refused_not_read_whole():
    """A tokenizer that makes one token of every 100,000 characters (no real one merges that far: SmolLM2 gives a run
    of spaces one token per 64): the head stops growing past MAX_CHARS_PER_TOKEN characters per token asked for."""
    from harness.data.token_heads import MAX_CHARS_PER_TOKEN

    sizes: list[int] = []

    def sparse(text, **kwargs):
        sizes.append(len(text))
        return {"input_ids": list(range(len(text) // 100_000))}

    with pytest.raises(
        UsageError,
        match=r"a text of 50,000,000 characters holds fewer than 74 tokens in its first "
        r"[\d,]+ characters: it is not text a model reads",
    ):
        encode_head(sparse, " " * 50_000_000, 10)
    assert max(sizes) <= 2 * MAX_CHARS_PER_TOKEN * 10
