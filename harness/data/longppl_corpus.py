"""Documents for the LongPPL tasks, with their key tokens attached (computed once, cached).

Selection (SPEC.md §3 GovReport protocol by default): the first ``num_docs`` documents with at least
``min_tokens`` tokens under ``length_tokenizer`` (default: the evaluator's tokenizer, special tokens
included), each cut to the text of its first ``max_tokens`` tokens, so that the evaluator and every
evaluated model score exactly the same text.
"""

from __future__ import annotations

import json
from typing import Any

from harness.data.documents import documents_from_metadata
from harness.keytokens import KeyTokenCache, key_tokens_for_texts, key_tokens_from_span_files, load_evaluator

DEFAULT_EVALUATOR = "Qwen/Qwen2-72B-Instruct"  # the paper's main evaluator


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


def load_longppl_corpus(**metadata: Any) -> dict:
    """lm-eval ``custom_dataset``: ``{"test": Dataset(doc_id, text, key_json)}`` (see module docstring)."""
    import datasets
    from transformers import AutoTokenizer

    evaluator = str(metadata.get("evaluator") or DEFAULT_EVALUATOR)
    docs = documents_from_metadata(metadata)
    length_tok = AutoTokenizer.from_pretrained(str(metadata.get("length_tokenizer") or evaluator))
    docs = select_documents(
        docs, length_tok, int(metadata.get("min_tokens") or 0), _int_or_none(metadata.get("max_tokens")),
        _int_or_none(metadata.get("num_docs")),
    )
    texts = [d["text"] for d in docs]
    if metadata.get("key_spans_dir"):
        keys = key_tokens_from_span_files(metadata["key_spans_dir"], [d["doc_id"] for d in docs])
    else:
        keys = key_tokens_for_texts(
            texts,
            evaluator,
            trunc_len=int(metadata.get("trunc_len", 4096)),
            sliding_window=int(metadata.get("sliding_window", 1024)),
            alpha=float(metadata.get("alpha", 2.0)),
            beta=float(metadata.get("beta", -2.0)),
            cache=KeyTokenCache(metadata.get("key_cache_dir")),
            evaluator_id=metadata.get("evaluator_id"),
            loader=lambda name: load_evaluator(
                name, str(metadata.get("evaluator_dtype", "auto")), metadata.get("evaluator_device")
            ),
        )
    rows = [{"doc_id": d["doc_id"], "text": d["text"], "key_json": json.dumps(k.to_json())} for d, k in zip(docs, keys)]
    return {"test": datasets.Dataset.from_list(rows)}
