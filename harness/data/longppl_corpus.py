"""Documents for the LongPPL tasks (their key tokens are attached by :mod:`harness.models.keytokens`).

Selection (docs/formulas.md §3 GovReport protocol by default): the first ``num_docs`` documents with at least
``min_tokens`` tokens under ``length_tokenizer`` (default: the evaluator's tokenizer, special tokens
included), each cut to the text of its first ``max_tokens`` tokens, so that the evaluator and every
evaluated model score exactly the same text.
"""

from __future__ import annotations

from typing import Any

from harness.data.documents import documents_from_metadata
from harness.errors import UsageError
from harness.metrics.longppl import DEFAULT_EVALUATOR


def truncate_by_tokens(text: str, tokenizer: Any, max_tokens: int | None) -> tuple[str, int]:
    """``(text of the first max_tokens tokens, token count of the full text)``."""
    enc = tokenizer(text, return_offsets_mapping=True)
    n = len(enc["input_ids"])
    if max_tokens is None or n <= max_tokens:
        return text, n
    return text[: enc["offset_mapping"][max_tokens - 1][1]], n


def select_documents(docs: list[dict], tokenizer: Any, min_tokens: int, max_tokens: int | None, num_docs: int | None) -> list[dict]:
    chosen = []
    for doc in docs:
        text, n = truncate_by_tokens(doc["text"], tokenizer, max_tokens)
        if n >= min_tokens:
            chosen.append({**doc, "text": text})
            if num_docs is not None and len(chosen) >= num_docs:
                break
    return chosen


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def corpus_documents(metadata: dict) -> list[dict]:
    """The selected documents (``doc_id``, ``text``), each cut to ``max_tokens`` of the length tokenizer."""
    from transformers import AutoTokenizer

    docs = documents_from_metadata(metadata)
    evaluator = str(metadata.get("evaluator") or DEFAULT_EVALUATOR)
    length_tok = AutoTokenizer.from_pretrained(str(metadata.get("length_tokenizer") or evaluator))
    min_tokens = int(metadata.get("min_tokens") or 0)
    chosen = select_documents(docs, length_tok, min_tokens, _int_or_none(metadata.get("max_tokens")),
                              _int_or_none(metadata.get("num_docs")))
    if not chosen:
        raise UsageError(f"none of the {len(docs)} documents has {min_tokens} tokens or more: lower min_tokens or "
                         "give longer documents")
    return chosen
