"""longppl_govreport: LongPPL / PPL / LongPPL-soft on GovReport (docs/formulas.md §3). See README.md here."""

from harness.longppl.dataset import longppl_corpus
from harness.metrics.pooling import pooled_perplexity, total
from harness.tasks.aggregations import key_perplexity, perplexity
from harness.tasks.logprob import LongPPLTask

__all__ = ["key_perplexity", "perplexity", "LongPPLTask", "longppl_corpus", "pooled_perplexity", "total"]
