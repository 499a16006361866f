"""GovReport documents for the perplexity tasks (docs/formulas.md §3: 50 documents of >= 16384 tokens)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from harness.data.documents import DocumentOptions, check_enough_documents, documents_from_options, select_long
from harness.data.prompt_tokens import ModelKeys, load_tokenizer
from harness.data.token_heads import count_tokens_upto
from harness.core.errors import UsageError


def _tokenizer_counter(name: str | None, limit: int):
    """Token counts capped at ``limit`` under tokenizer ``name`` (long texts not tokenized whole); None without one."""
    if not name:
        return None
    tokenizer = load_tokenizer(name)
    return lambda text: count_tokens_upto(tokenizer, text, limit)


def govreport_documents(options: DocumentOptions, model: ModelKeys) -> list[dict[str, Any]]:
    """The first ``num_docs`` documents of at least ``min_tokens`` tokens of the evaluated tokenizer (without one, the
    first ``num_docs``); selected once per process, options and model, each call getting its own copies."""
    return [dict(doc) for doc in _selected(options, model)]


@lru_cache(maxsize=4)
def _selected(options: DocumentOptions, model: ModelKeys) -> tuple[dict[str, Any], ...]:
    docs = documents_from_options(options)
    count = _tokenizer_counter(model.tokenizer or model.pretrained, options.min_tokens)
    if count is not None:
        docs = select_long(docs, count, options.min_tokens, options.num_docs)
    elif options.num_docs is not None:
        docs = docs[: options.num_docs]
    if not docs:
        raise UsageError(f"no document has {options.min_tokens} tokens or more: lower min_tokens or "
                         "give longer documents")
    check_enough_documents(len(docs), options)
    return tuple(docs)


def load_govreport(options: DocumentOptions, model: ModelKeys) -> dict:
    """A task's dataset builder: ``{"test": Dataset(doc_id, text)}`` of :func:`govreport_documents`."""
    import datasets

    docs = govreport_documents(options, model)
    return {"test": datasets.Dataset.from_list(docs)}
