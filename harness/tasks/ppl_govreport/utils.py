"""ppl_govreport: token-level perplexity on GovReport (docs/formulas.md §3 protocol).

Metadata (``--metadata`` JSON; model_args are merged in by lm-eval): ``data_files`` (local
.jsonl/.json/.txt or folder; default: the HF dataset), ``text_field``, ``hf_dataset``, ``hf_split``,
``min_tokens`` (16384), ``max_tokens`` (32767, the head of each document is kept), ``num_docs`` (50).
When the evaluated model's tokenizer is known (``pretrained`` / ``tokenizer`` in model_args) the first
``num_docs`` documents with at least ``min_tokens`` tokens are selected up front; otherwise the first
``num_docs`` documents are scored and short ones are skipped (``docs_skipped``).
"""

from harness.data.govreport import load_govreport
from harness.tasks.aggregations import perplexity
from harness.tasks.logprob import PerplexityTask
from harness.metrics.pooling import pooled_perplexity, total

__all__ = ["perplexity", "PerplexityTask", "load_govreport", "pooled_perplexity", "total"]
