"""Soft-prompt compressor tasks (paper 003): reconstruction (``compress_ae``) and completion (``compress_lm``)."""

from __future__ import annotations

from harness.tasks.classes.base import LchTask
from harness.metrics.pooling import nll_sum


class CompressAETask(LchTask):
    """Compressor reconstruction (paper 003 AE): ``bleu4`` (corpus BLEU-4 x100, NLTK) of the greedy
    reconstruction of each text's first half; metadata ``max_tokens`` (|X|, default 2040)."""

    REQUEST_TYPE = "compress_ae"

    def request_options(self, doc: dict) -> dict:
        return {"max_tokens": int(self.task_metadata.get("max_tokens", 2040))}

    def score_document(self, doc: dict, results: list) -> dict:
        return {"bleu4": (results[0]["reference"], results[0]["prediction"]), "n_docs": 1}


class CompressLMTask(CompressAETask):
    """Compressor completion (paper 003 LM): pooled token perplexity ``ppl`` of each text's second half
    given the memory of its first half."""

    REQUEST_TYPE = "compress_lm"

    def score_document(self, doc: dict, results: list) -> dict:
        logprobs = results[0]["logprobs"]
        return {"ppl": nll_sum(logprobs), "n_tokens": len(logprobs), "n_docs": 1}
