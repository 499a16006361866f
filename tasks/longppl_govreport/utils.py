"""longppl_govreport: LongPPL / PPL / LongPPL-soft on GovReport (SPEC.md §3). See README.md here."""

from harness.data.longppl_corpus import load_longppl_corpus
from harness.metrics.pooling import pooled_perplexity, total
from harness.task_types import LongPPLTask

__all__ = ["LongPPLTask", "load_longppl_corpus", "pooled_perplexity", "total"]
