"""Soft-prompt compressor tasks (the EPL paper): reconstruction (``compress_ae``) and completion (``compress_lm``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.core.options import MAX_SAMPLES, MAX_SEED, MAX_TOKENS, option
from harness.data.inputs import Input
from harness.engines.requests import COMPRESS_AE, COMPRESS_LM, CompressRequestOptions
from harness.metrics.pooling import nll_sum
from harness.tasks.base import LchTask
from harness.tasks.lm_eval_api import task_base


@dataclass(frozen=True)
class CompressOptions:
    """The texts of a compressor task: local documents, else seeded synthetic reports."""

    data_files: str | None = option(None, "local .jsonl / .json / .txt file or folder of documents", path=True)
    text_field: str = option("text", "field of the documents' text")
    num_docs: int = option(100, "number of documents", low=1, high=MAX_SAMPLES)
    synthetic_words: int = option(
        600, "words per synthetic document (compressor tasks without data_files)", low=1, high=MAX_TOKENS
    )
    seed: int = option(0, "random seed of the synthetic documents", low=0, high=MAX_SEED)
    max_tokens: int = option(
        2040, "|X|: tokens of each text; the first half is the context, the rest the completion", low=2, high=MAX_TOKENS
    )

    def inputs(self) -> list[Input]:
        """The documents when named (:mod:`harness.data.inputs`); without them the texts are generated."""
        return (
            [
                Input(
                    "data_files",
                    self.data_files,
                    "path",
                    "give data_files= an existing .txt / .jsonl file or "
                    "folder, or leave it unset (seeded synthetic reports)",
                )
            ]
            if self.data_files
            else []
        )


# lm-eval's task class for the output type, chosen at run time (lm-eval ships no types)
_CompressAEBase: Any = task_base(COMPRESS_AE.output_type)


class CompressAETask(LchTask, _CompressAEBase):
    """Compressor reconstruction (the EPL paper AE): ``bleu4`` (corpus BLEU-4 x100, NLTK) of the greedy
    reconstruction of each text's first half; options :class:`CompressOptions`."""

    OPTIONS = CompressOptions
    REQUEST_TYPE = COMPRESS_AE.name

    def request_options(self, doc: dict) -> CompressRequestOptions:
        return CompressRequestOptions(max_tokens=self.options.max_tokens)

    def score_document(self, doc: dict, results: list) -> dict:
        return {"bleu4": (results[0]["reference"], results[0]["prediction"]), "n_docs": 1}


class CompressLMTask(CompressAETask):
    """Compressor completion (the EPL paper LM): pooled token perplexity ``ppl`` of each text's second half
    given the memory of its first half."""

    REQUEST_TYPE = COMPRESS_LM.name

    def score_document(self, doc: dict, results: list) -> dict:
        logprobs = results[0]["logprobs"]
        return {"ppl": nll_sum(logprobs), "n_tokens": len(logprobs), "n_docs": 1}
