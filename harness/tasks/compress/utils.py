"""compress_ae / compress_lm: paper 003's pretraining evaluation of a compressor (``--model compressor``).

Metadata: ``data_files`` (local .jsonl/.json/.txt or folder; field ``text_field``), else seeded synthetic
reports (``synthetic_words`` words each); ``num_docs`` (default 100); ``max_tokens`` (|X|, default 2040:
the first half is the context, the rest the completion).
"""

from harness.data.documents import load_documents
from harness.data.synthetic import synthetic_reports
from harness.lmeval.aggregations import perplexity
from harness.tasks.classes.compress import CompressAETask, CompressLMTask
from harness.metrics.pooling import pooled_perplexity, total
from harness.metrics.qa import corpus_bleu4


def load_texts(**metadata):
    import datasets

    n = int(metadata.get("num_docs") or 100)
    if metadata.get("data_files"):
        texts = [d["text"] for d in load_documents(data_files=metadata["data_files"],
                                                   text_field=metadata.get("text_field") or "text")][:n]
    else:
        texts = synthetic_reports(n, int(metadata.get("synthetic_words") or 600), seed=int(metadata.get("seed") or 0))
    return {"test": datasets.Dataset.from_list([{"doc_id": i, "text": t} for i, t in enumerate(texts)])}


__all__ = ["perplexity", "CompressAETask", "CompressLMTask", "corpus_bleu4", "load_texts", "pooled_perplexity", "total"]
