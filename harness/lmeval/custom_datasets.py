"""lm-eval ``custom_dataset`` functions that compose a data loader with a modelling step."""

from __future__ import annotations

from typing import Any


def longppl_corpus(**metadata: Any) -> dict:
    """``{"test": Dataset(doc_id, text, key_json)}``: the LongPPL documents
    (:func:`harness.data.longppl_corpus.corpus_documents`) with their key tokens attached
    (:func:`harness.models.keytokens.attach_key_tokens`, computed once and cached)."""
    import datasets

    from harness.data.longppl_corpus import CorpusOptions, corpus_documents
    from harness.models.keytokens import KeyTokenOptions, attach_key_tokens
    from harness.options import parse_options

    corpus = parse_options(CorpusOptions, metadata)
    docs = attach_key_tokens(corpus_documents(corpus), corpus.evaluator, parse_options(KeyTokenOptions, metadata))
    rows = [{"doc_id": d["doc_id"], "text": d["text"], "key_json": d["key_json"]} for d in docs]
    return {"test": datasets.Dataset.from_list(rows)}
