"""NLTK word tokens for HelloBench lengths, with an offline fallback (:func:`word_tokenizer_name` says which ran)."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache


@lru_cache(maxsize=1)
def _word_tokenizer() -> tuple[str, Callable[[str], list[str]]]:
    """``(name, tokenize)``: NLTK ``word_tokenize`` when ``punkt_tab`` is installed, else the Treebank tokenizer over an
    untrained Punkt model's sentences (no download; counts can differ by a token at abbreviations)."""
    import nltk
    from nltk.tokenize import PunktSentenceTokenizer, TreebankWordTokenizer

    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
        return "nltk.word_tokenize", nltk.word_tokenize
    except LookupError:
        sentences, words = PunktSentenceTokenizer(), TreebankWordTokenizer()
        return "treebank+untrained-punkt", lambda text: [w for s in sentences.tokenize(text) for w in words.tokenize(s)]


def word_tokens(text: str) -> list[str]:
    """NLTK word tokens (punctuation counts), see :func:`_word_tokenizer`."""
    return _word_tokenizer()[1](text)


def word_tokenizer_name() -> str:
    return _word_tokenizer()[0]


def nltk_length(text: str) -> int:
    """HelloBench length: the number of NLTK word tokens of the response."""
    return len(word_tokens(text))
