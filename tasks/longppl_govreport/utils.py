"""longppl_govreport: LongPPL / PPL / LongPPL-soft on GovReport (SPEC.md §3). See README.md here."""

from harness.lmeval.custom_datasets import longppl_corpus
from harness.metrics.pooling import pooled_perplexity, total
from harness.lmeval.tasks.logprob import LongPPLTask

__all__ = ["LongPPLTask", "longppl_corpus", "pooled_perplexity", "total"]
