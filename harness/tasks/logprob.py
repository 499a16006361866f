"""Tasks scored from per-token log-probabilities (``token_logprobs``) and LSM samples (``lsm``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar

from harness.core.errors import UsageError
from harness.core.options import option
from harness.data.documents import DocumentOptions
from harness.data.prompt_tokens import ModelKeys
from harness.engines.requests import LSM, TOKEN_LOGPROBS, LsmOptions, ScoringOptions
from harness.longppl.corpus import CorpusOptions
from harness.longppl.formulas import SOFT_GAMMA, EvaluatorRun, KeyTokens, document_stats, key_tokens_support
from harness.longppl.keytokens import KeyTokenOptions
from harness.metrics.pooling import nll_sum
from harness.metrics.support import Support
from harness.tasks.base import NO_LENGTH, CachedCounts, LchTask
from harness.tasks.lm_eval_api import task_base
from harness.tasks.metric_lists import HONESTY_METRICS


@dataclass(frozen=True)
class TokenLogprobOptions(DocumentOptions):
    """The documents, and how the evaluated model tokenises them (``max_tokens``: the head it scores)."""

    add_special_tokens: bool | None = option(
        None, "tokenise evaluated texts with the tokenizer's special tokens (default: the request's; LongPPL: no)"
    )


@dataclass(frozen=True)
class LongPPLOptions(TokenLogprobOptions, CorpusOptions, KeyTokenOptions):
    """The LongPPL documents, how their key tokens are found, and LongPPL-soft's weight cap."""

    gamma: float = option(SOFT_GAMMA, "LongPPL-soft weight cap", low=0.0)


@dataclass(frozen=True)
class LsmTaskOptions(DocumentOptions, LsmOptions):
    """The LSM request's options (:class:`LsmOptions`) over the documents (``max_tokens``: their own cut)."""


# lm-eval's task class for the output type, chosen at run time (lm-eval ships no types)
_TokenLogprobBase: Any = task_base(TOKEN_LOGPROBS.output_type)
_LsmBase: Any = task_base(LSM.output_type)


class TokenLogprobTask(LchTask, _TokenLogprobBase):
    """Per-token log-probabilities (options ``max_tokens``, ``add_special_tokens``); ``over_length`` counts documents
    scored past the model's max length (what PIC variants are evaluated on; never silently cut)."""

    OPTIONS: ClassVar[type] = TokenLogprobOptions  # each subclass its own
    REQUEST_TYPE = TOKEN_LOGPROBS.name

    @classmethod
    def check_before_loading(cls, model_keys: ModelKeys, options: Any) -> None:
        """Enough long documents (:func:`harness.data.documents.check_enough_documents`), selected as the task does."""
        from harness.data.govreport import govreport_documents

        govreport_documents(options, model_keys)

    def extra_metrics(self, meta: dict) -> list[dict]:
        return [spec for spec in HONESTY_METRICS if spec["metric"] == "over_length"]

    def extra_document_metrics(self, doc: dict, results: list) -> dict:
        return {"over_length": int(len(results[0]["token_ids"]) > self.max_length)}

    def request_options(self, doc: dict) -> ScoringOptions:
        return ScoringOptions.of(max_tokens=self.options.max_tokens, add_special_tokens=self.options.add_special_tokens)


class PerplexityTask(TokenLogprobTask):
    """Token-level perplexity; documents shorter than ``min_tokens`` are skipped and counted."""

    def score_document(self, doc: dict, results: list) -> dict:
        scored = results[0]
        n_tokens = len(scored["token_ids"])
        if n_tokens < self.options.min_tokens or not scored["logprobs"]:  # too short, or nothing to predict
            return {"ppl": (0.0, 0), "n_tokens": 0, "n_docs": 0, "docs_skipped": 1}
        return {
            "ppl": nll_sum(scored["logprobs"]),
            "n_tokens": len(scored["logprobs"]),
            "n_docs": 1,
            "docs_skipped": 0,
        }


class LongPPLTask(TokenLogprobTask):
    """LongPPL, PPL and LongPPL-soft from each document's key spans (``key_json``), pooled in log space; the text is
    tokenised without special tokens (the reference's) unless ``add_special_tokens`` says otherwise."""

    OPTIONS = LongPPLOptions

    @classmethod
    def check_before_loading(cls, model_keys: ModelKeys, options: Any) -> None:
        """What :func:`harness.longppl.keytokens.key_token_corpus` checks of the documents before the evaluator runs."""
        from harness.longppl.corpus import check_key_windows, corpus_documents

        docs = corpus_documents(options)
        if not options.key_spans_dir:
            check_key_windows(docs, options.trunc_len)

    def support(self, metrics: list[str]) -> list[Support]:
        """LongPPL rests on its key tokens too (:data:`~harness.longppl.formulas.MIN_KEY_TOKENS`)."""
        return super().support(metrics) + ([key_tokens_support("longppl")] if "longppl" in metrics else [])

    @staticmethod
    def scoring_options(options: Any) -> ScoringOptions:
        # no max_tokens cut: the corpus was cut in the length tokenizer, so that every model scores the same text
        return ScoringOptions.of(add_special_tokens=bool(options.add_special_tokens))

    def request_options(self, doc: dict) -> ScoringOptions:
        return self.scoring_options(self.options)

    @classmethod
    def plan_from_cache(cls, model_keys: ModelKeys, options: Any, limit: float | None) -> list[CachedCounts] | None:
        """The documents as the run scores them (in the evaluated tokenizer; the first ``limit``), ``cached``: whether
        their key tokens are at hand, so a plan never runs the evaluator, and the evaluator that would make them."""
        import math

        from harness.data.prompt_tokens import load_tokenizer, tokenizer_name
        from harness.engines.requests import encode_for_scoring
        from harness.longppl.corpus import corpus_documents
        from harness.longppl.keytokens import key_tokens_cached

        name = tokenizer_name(model_keys)
        if name is None:
            return None
        docs = corpus_documents(options)
        if limit is not None:
            docs = docs[: int(math.ceil(len(docs) * limit)) if limit < 1.0 else int(limit)]
        tokenizer, scoring = load_tokenizer(name), cls.scoring_options(options)
        prompts = tuple(len(encode_for_scoring(tokenizer, d["text"], scoring)["token_ids"]) for d in docs)
        cached = key_tokens_cached([d["text"] for d in docs], options.evaluator, options)
        return [
            CachedCounts(
                NO_LENGTH,
                prompts,
                (0,) * len(prompts),
                cached,
                scored_tokens=sum(max(0, n - 1) for n in prompts),
                helper=None if options.key_spans_dir or not docs else cls.evaluator_helper(docs, options),
            )
        ]

    @staticmethod
    def evaluator_helper(docs: list[dict], options: Any) -> EvaluatorRun:
        """The evaluator as the run would load it to find the key tokens of ``docs``: the longest in its tokens (with
        its special tokens, as it reads them; the documents' own count where its tokenizer is not at hand)."""
        from harness.data.prompt_tokens import load_tokenizer

        try:
            tokenizer = load_tokenizer(options.evaluator)
            tokens = max(len(tokenizer(d["text"])["input_ids"]) for d in docs)
        except OSError:  # a hub name offline: its config is not at hand either, and the plan leaves it unsized
            tokens = max(d["n_tokens"] for d in docs)
        return EvaluatorRun(
            options.evaluator,
            options.evaluator_dtype,
            tokens,
            options.trunc_len,
            options.sliding_window,
            bos=options.short_start == "bos",
        )

    def score_document(self, doc: dict, results: list) -> dict:
        scored = results[0]
        if not scored["logprobs"]:  # an empty or one-token document: skipped and counted
            return {
                "longppl": (0.0, 0),
                "ppl_nobos": (0.0, 0),
                "longppl_soft": (0.0, 0.0),
                "n_key_tokens": 0,
                "n_tokens": 0,
                "n_docs": 0,
                "key_spans_dropped": 0,
                "docs_without_key_tokens": 0,
                "docs_skipped": 1,
            }
        if scored.get("offsets") is None:
            raise UsageError("LongPPL needs token offsets: use a fast tokenizer for the evaluated model")
        stats = document_stats(
            scored["logprobs"], scored["offsets"], KeyTokens.from_json(json.loads(doc["key_json"])), self.options.gamma
        )
        return {
            "longppl": (stats["key_nll_sum"], stats["n_key"]),
            "ppl_nobos": (stats["nll_sum"], stats["n_scored"]),
            "longppl_soft": (stats["soft_nll_sum"], stats["soft_weight_sum"]),
            "n_key_tokens": stats["n_key"],
            "n_tokens": stats["n_scored"],
            "n_docs": 1,
            "key_spans_dropped": stats["n_spans_dropped"],
            "docs_without_key_tokens": int(stats["n_key"] == 0),
            "docs_skipped": 0,
        }


class LSMTask(LchTask, _LsmBase):
    """Long-short misalignment (options :class:`~harness.engines.requests.LsmOptions`: ``context_length``, ``n_samples``
    per document, ``estimator``, ``max_tokens``, ``seed``: document ``i`` uses ``seed + i``)."""

    OPTIONS = LsmTaskOptions
    REQUEST_TYPE = LSM.name
    check_before_loading = TokenLogprobTask.check_before_loading  # enough long documents, selected as the task does

    def request_options(self, doc: dict) -> LsmOptions:
        o = self.options
        return LsmOptions(
            context_length=o.context_length,
            n_samples=o.n_samples,
            seed=o.seed + int(doc.get("doc_id", 0)),
            estimator=o.estimator,
            max_tokens=o.max_tokens,
        )

    def score_document(self, doc: dict, results: list) -> dict:
        values = results[0]["sce"]
        return {"lsm": (float(sum(values)), len(values)), "n_samples": len(values)}
