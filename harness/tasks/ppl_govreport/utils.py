"""ppl_govreport: token-level perplexity on GovReport (docs/formulas.md §3; options: README.md here). With the
evaluated tokenizer known (``pretrained`` / ``tokenizer``) the first ``num_docs`` documents of ``min_tokens`` or more
are selected up front; otherwise the first ``num_docs`` are scored and short ones skipped (``docs_skipped``)."""

from harness.data.govreport import load_govreport
from harness.metrics.pooling import pooled_perplexity, total
from harness.tasks.aggregations import perplexity
from harness.tasks.logprob import PerplexityTask

__all__ = ["perplexity", "PerplexityTask", "load_govreport", "pooled_perplexity", "total"]
