"""NLTK word tokens for long-form lengths (HelloBench counts NLTK word tokens), with an offline path.

Which tokenizer is used depends on the NLTK data installed on the machine, so it is looked up once and
reported by :func:`word_tokenizer_name` (the HelloBench task records it in its results)."""

from __future__ import annotations

from functools import lru_cache
from typing import Callable


@lru_cache(maxsize=1)
def _word_tokenizer() -> tuple[str, Callable[[str], list[str]]]:
    """NLTK ``word_tokenize`` when its ``punkt_tab`` data is installed; otherwise the same Treebank word
    tokenizer over sentences from an *untrained* Punkt model, which needs no download (sentence splits
    can then differ at abbreviations, changing counts by a token there). Returns ``(name, tokenize)``."""
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
