"""longppl_govreport: LongPPL / PPL / LongPPL-soft on GovReport (docs/formulas.md §3). See README.md here."""

from harness.tasks.aggregations import key_perplexity, perplexity
from harness.longppl.dataset import longppl_corpus
from harness.tasks.logprob import LongPPLTask
from harness.metrics.pooling import pooled_perplexity, total

__all__ = ["key_perplexity", "perplexity", "LongPPLTask", "longppl_corpus", "pooled_perplexity", "total"]
