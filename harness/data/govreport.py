"""GovReport documents for the perplexity tasks (docs/formulas.md §3: 50 documents of >= 16384 tokens)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from harness.core.errors import UsageError
from harness.data.documents import DocumentOptions, check_enough_documents, documents_from_options, select_long
from harness.data.prompt_tokens import ModelKeys, load_tokenizer
from harness.data.token_heads import count_tokens_upto


def govreport_documents(options: DocumentOptions, model: ModelKeys) -> list[dict[str, Any]]:
    """The first ``num_docs`` documents of at least ``min_tokens`` tokens of the evaluated tokenizer (without one, the
    first ``num_docs``); selected once per process, options and model, each call getting its own copies."""
    return [dict(doc) for doc in _selected(options, model)]


@lru_cache(maxsize=4)
def _selected(options: DocumentOptions, model: ModelKeys) -> tuple[dict[str, Any], ...]:
    docs = documents_from_options(options)
    name = model.tokenizer or model.pretrained
    if name:  # token counts capped at min_tokens: long texts are not tokenized whole
        tokenizer = load_tokenizer(name)
        docs = select_long(
            docs,
            lambda text: count_tokens_upto(tokenizer, text, options.min_tokens),
            options.min_tokens,
            options.num_docs,
        )
    elif options.num_docs is not None:
        docs = docs[: options.num_docs]
    if not docs:
        raise UsageError(
            f"no document has {options.min_tokens} tokens or more: lower min_tokens or give longer documents"
        )
    check_enough_documents(len(docs), options)
    return tuple(docs)


def load_govreport(options: DocumentOptions, model: ModelKeys) -> dict:
    """A task's dataset builder: ``{"test": Dataset(doc_id, text)}`` of :func:`govreport_documents`."""
    import datasets

    return {"test": datasets.Dataset.from_list(govreport_documents(options, model))}
