"""GovReport documents for the perplexity tasks (docs/formulas.md §3: 50 documents of >= 16384 tokens)."""

from __future__ import annotations

from typing import Any

from harness.data.documents import documents_from_metadata, select_long
from harness.errors import UsageError


def _tokenizer_counter(name: Any):
    if not isinstance(name, str) or not name:
        return None
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(name)
    return lambda text: len(tokenizer(text)["input_ids"])


def load_govreport(**metadata: Any) -> dict:
    """lm-eval ``custom_dataset``: ``{"test": Dataset(doc_id, text)}`` selected as the module says."""
    import datasets

    docs = documents_from_metadata(metadata)
    num_docs = metadata.get("num_docs")
    num_docs = int(num_docs) if num_docs is not None else None
    count = _tokenizer_counter(metadata.get("tokenizer") or metadata.get("pretrained"))
    if count is not None:
        docs = select_long(docs, count, int(metadata.get("min_tokens") or 0), num_docs)
    elif num_docs is not None:
        docs = docs[:num_docs]
    if not docs:
        raise UsageError(f"no document has {int(metadata.get('min_tokens') or 0)} tokens or more: lower min_tokens or "
                         "give longer documents")
    return {"test": datasets.Dataset.from_list(docs)}
