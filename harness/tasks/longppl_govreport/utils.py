"""longppl_govreport: LongPPL / PPL / LongPPL-soft on GovReport (docs/formulas.md §3). See README.md here."""

from harness.lmeval.aggregations import key_perplexity, perplexity
from harness.lmeval.custom_datasets import longppl_corpus
from harness.tasks.classes.logprob import LongPPLTask
from harness.metrics.pooling import pooled_perplexity, total

__all__ = ["key_perplexity", "perplexity", "LongPPLTask", "longppl_corpus", "pooled_perplexity", "total"]
