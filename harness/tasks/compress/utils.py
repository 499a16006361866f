"""compress_ae / compress_lm: the EPL paper's evaluation of a compressor; options :class:`CompressOptions`."""

from harness.data.documents import load_documents
from harness.data.synthetic import synthetic_reports
from harness.metrics.pooling import pooled_perplexity, total
from harness.metrics.qa import corpus_bleu4
from harness.tasks.aggregations import perplexity
from harness.tasks.compress.task import CompressAETask, CompressLMTask, CompressOptions


def load_texts(options: CompressOptions, model=None):
    """The tasks' dataset builder: ``num_docs`` texts of ``data_files``, else seeded synthetic reports."""
    import datasets

    n = options.num_docs
    if options.data_files:
        texts = [d["text"] for d in load_documents(data_files=options.data_files, text_field=options.text_field)][:n]
    else:
        texts = synthetic_reports(n, options.synthetic_words, seed=options.seed)
    return {"test": datasets.Dataset.from_list([{"doc_id": i, "text": t} for i, t in enumerate(texts)])}


__all__ = ["perplexity", "CompressAETask", "CompressLMTask", "corpus_bleu4", "load_texts", "pooled_perplexity", "total"]
