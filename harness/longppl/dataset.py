"""Dataset builders of our tasks that compose a data loader with a modelling step."""

from __future__ import annotations

from typing import Any

LAYER = "lmeval"  # harness/devtools/layers.py


def longppl_corpus(options: Any, model: Any = None) -> dict[str, Any]:
    """``{"test": Dataset(doc_id, text, key_json)}``: the LongPPL documents with their key tokens
    (:func:`harness.longppl.keytokens.key_token_corpus`); ``options``: both its corpus and key-token options."""
    import datasets

    from harness.longppl.keytokens import key_token_corpus

    docs = key_token_corpus(options, options).docs
    rows = [{"doc_id": d["doc_id"], "text": d["text"], "key_json": d["key_json"]} for d in docs]
    return {"test": datasets.Dataset.from_list(rows)}
