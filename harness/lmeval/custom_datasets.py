"""Dataset builders of our tasks that compose a data loader with a modelling step."""

from __future__ import annotations

from typing import Any


def longppl_corpus(options: Any, model: Any = None) -> dict:
    """``{"test": Dataset(doc_id, text, key_json)}``: the LongPPL documents
    (:func:`harness.data.longppl_corpus.corpus_documents`) with their key tokens attached
    (:func:`harness.models.keytokens.attach_key_tokens`, computed once and cached). ``options``: the task's, a
    :class:`~harness.data.longppl_corpus.CorpusOptions` and a :class:`~harness.models.keytokens.KeyTokenOptions`."""
    import datasets

    from harness.data.longppl_corpus import corpus_documents
    from harness.models.keytokens import attach_key_tokens

    docs = attach_key_tokens(corpus_documents(options), options.evaluator, options)
    rows = [{"doc_id": d["doc_id"], "text": d["text"], "key_json": d["key_json"]} for d in docs]
    return {"test": datasets.Dataset.from_list(rows)}
