"""lm-eval task classes for request types that lm-eval itself does not have.

Each class sends one request per document, of a type served by ``hf-pic``
(:class:`harness.lmeval.hf_pic.HFPicLM`): ``token_logprobs`` (per-token log-probabilities of the text),
``lsm`` (long-short misalignment samples) or ``generate_long`` (long-form generation that reports
whether it ended with EOS). Their YAML declares ``output_type: loglikelihood_rolling``
only to pass lm-eval's config validation; the class then switches the request type. Options come from
the task ``metadata`` (overridable with ``--metadata``).
"""

from __future__ import annotations

import json
from typing import Any

from lm_eval.api.instance import Instance
from lm_eval.api.task import ConfigurableTask

from harness.lmeval.tasks.generation import HONESTY_METRICS, LengthHonesty
from harness.metrics.longppl import SOFT_GAMMA, KeyTokens, document_stats
from harness.metrics.pooling import nll_sum

TOKEN_LOGPROBS = "token_logprobs"
LSM = "lsm"
GENERATE_LONG = "generate_long"


class CustomRequestTask(ConfigurableTask):
    """One ``REQUEST_TYPE`` request per document with arguments ``(doc_to_target(doc), options)``."""

    REQUEST_TYPE = TOKEN_LOGPROBS

    def __init__(self, config: dict | None = None, **kwargs: Any) -> None:
        config = {k: v for k, v in (config or {}).items() if k != "class"}
        # Routing process_results through the config tells lm-eval the metrics are computed here, so it
        # does not look our metric names up in its registry (and in HF evaluate) one by one.
        config.setdefault("process_results", lambda doc, results: self.score_document(doc, results))
        super().__init__(config=config, **kwargs)
        self.OUTPUT_TYPE = self.REQUEST_TYPE  # lm-eval's multi-rank padding keys on this

    @property
    def task_metadata(self) -> dict:
        return dict(self.config.metadata or {})

    def request_options(self, doc: dict) -> dict:
        return {}

    def score_document(self, doc: dict, results: list) -> dict:
        """Metrics of one document from its response; subclasses define them."""
        raise NotImplementedError

    def construct_requests(self, doc: dict, ctx: Any, **kwargs: Any) -> Instance:
        for key in ("apply_chat_template", "chat_template"):
            kwargs.pop(key, None)
        return Instance(
            request_type=self.REQUEST_TYPE,
            doc=doc,
            arguments=(self.doc_to_target(doc), self.request_options(doc)),
            idx=0,
            **kwargs,
        )


class TokenLogprobTask(CustomRequestTask):
    """Per-token log-probabilities; metadata ``max_tokens`` and ``add_special_tokens`` pass through.

    Length honesty: ``over_length`` counts documents scored over more tokens than the model's max length
    (positions past its window, which is what PIC variants are evaluated on; never silently cut)."""

    REQUEST_TYPE = TOKEN_LOGPROBS

    def __init__(self, config: dict | None = None, **kwargs: Any) -> None:
        config = dict(config or {})
        config["metric_list"] = list(config.get("metric_list") or []) + [HONESTY_METRICS[1]]
        config["process_results"] = lambda doc, results: {
            **self.score_document(doc, results), "over_length": self.over_length(results[0])}
        super().__init__(config=config, **kwargs)

    def over_length(self, scored: dict) -> int:
        from harness.data.prompt_length import model_max_length

        if not hasattr(self, "_max_length"):
            self._max_length = model_max_length(self.task_metadata)
        return int(len(scored["token_ids"]) > self._max_length)

    def request_options(self, doc: dict) -> dict:
        meta = self.task_metadata
        options: dict = {}
        if meta.get("max_tokens") is not None:
            options["max_tokens"] = int(meta["max_tokens"])
        if meta.get("add_special_tokens") is not None:
            options["add_special_tokens"] = bool(meta["add_special_tokens"])
        return options


class PerplexityTask(TokenLogprobTask):
    """Token-level perplexity; documents shorter than metadata ``min_tokens`` are skipped and counted."""

    def score_document(self, doc: dict, results: list) -> dict:
        scored = results[0]
        n_tokens = len(scored["token_ids"])
        min_tokens = int(self.task_metadata.get("min_tokens") or 0)
        if n_tokens < min_tokens:
            return {"ppl": (0.0, 0), "n_tokens": 0, "n_docs": 0, "docs_skipped": 1}
        return {
            "ppl": nll_sum(scored["logprobs"]),
            "n_tokens": len(scored["logprobs"]),
            "n_docs": 1,
            "docs_skipped": 0,
        }


class LongPPLTask(TokenLogprobTask):
    """LongPPL, PPL and LongPPL-soft from key spans carried by each document (``key_json``).

    The evaluated text is tokenised without special tokens (the reference's convention) unless metadata
    ``add_special_tokens`` says otherwise. Per-document sums are pooled over documents in log space.
    """

    def request_options(self, doc: dict) -> dict:
        # The text was already cut to max_tokens of the length tokenizer when the corpus was built, so
        # that every model scores the same text: no second cut in the evaluated model's tokens here.
        return {"add_special_tokens": bool(self.task_metadata.get("add_special_tokens", False))}

    def score_document(self, doc: dict, results: list) -> dict:
        scored = results[0]
        if scored.get("offsets") is None:
            raise ValueError("LongPPL needs token offsets: use a fast tokenizer for the evaluated model")
        gamma = float(self.task_metadata.get("gamma", SOFT_GAMMA))
        stats = document_stats(scored["logprobs"], scored["offsets"], KeyTokens.from_json(json.loads(doc["key_json"])), gamma)
        return {
            "longppl": (stats["key_nll_sum"], stats["n_key"]),
            "ppl": (stats["nll_sum"], stats["n_scored"]),
            "longppl_soft": (stats["soft_nll_sum"], stats["soft_weight_sum"]),
            "n_key_tokens": stats["n_key"],
            "n_tokens": stats["n_scored"],
            "docs_without_key_tokens": int(stats["n_key"] == 0),
        }


class LSMTask(CustomRequestTask):
    """Long-short misalignment: metadata ``context_length`` (L), ``n_samples`` per document,
    ``seed`` (document ``i`` uses ``seed + i``), ``estimator`` (``overlap`` or ``direct``), ``max_tokens``."""

    REQUEST_TYPE = LSM

    def request_options(self, doc: dict) -> dict:
        meta = self.task_metadata
        options = {
            "context_length": int(meta.get("context_length", 4096)),
            "n_samples": int(meta.get("n_samples", 16)),
            "seed": int(meta.get("seed", 0)) + int(doc.get("doc_id", 0)),
            "estimator": str(meta.get("estimator", "overlap")),
        }
        if meta.get("max_tokens") is not None:
            options["max_tokens"] = int(meta["max_tokens"])
        return options

    def score_document(self, doc: dict, results: list) -> dict:
        values = results[0]["sce"]
        return {"lsm": (float(sum(values)), len(values)), "n_samples": len(values)}


class LongGenerationTask(LengthHonesty, CustomRequestTask):
    """Long-form generation from the lm-eval prompt (chat template applied by lm-eval when asked).

    Metadata: ``max_gen_toks``, ``do_sample`` (default greedy, as in the PIC paper), ``temperature``, the
    judge (``judge_base_url``, ``judge_model``, ``judge_concurrency``, ``judge_policy``, ``judge_cache_dir``,
    ``judge_temperature``, ``judge_max_tokens``).
    """

    REQUEST_TYPE = GENERATE_LONG
    DEFAULT_MAX_GEN_TOKS = 16384
    JUDGE_TEMPERATURE, JUDGE_MAX_TOKENS = 0.0, 4096
    JUDGED_METRICS = ("quality", "score", "n_valid")

    def __init__(self, config: dict | None = None, **kwargs: Any) -> None:
        config = dict(config or {})
        config["metric_list"] = list(config.get("metric_list") or []) + HONESTY_METRICS
        config["process_results"] = lambda doc, results: {
            **self.score_document(doc, results), **self.honesty(doc, self.request_options(doc)["max_gen_toks"])}
        super().__init__(config=config, **kwargs)
        # lm-eval dumps the task config into the results after aggregating, so recording the judge's
        # provenance in the metadata while aggregating puts it into the results JSON.
        for name in self.JUDGED_METRICS:
            if name in self._aggregation_list:
                self._aggregation_list[name] = self._recording(self._aggregation_list[name])

    def _recording(self, aggregate: Any) -> Any:
        def wrapped(items: list) -> Any:
            from harness.judges.stage import provenance

            value = aggregate(items)
            if isinstance(self.config.metadata, dict):
                self.config.metadata["judge_provenance"] = provenance(items)
            return value

        return wrapped

    def request_options(self, doc: dict) -> dict:
        meta = self.task_metadata
        options = {"max_gen_toks": int(meta.get("max_gen_toks", self.DEFAULT_MAX_GEN_TOKS)),
                   "do_sample": bool(meta.get("do_sample", False))}
        if options["do_sample"]:
            options["temperature"] = float(meta.get("temperature", 0.8))
        return options

    def construct_requests(self, doc: dict, ctx: Any, **kwargs: Any) -> Instance:
        for key in ("apply_chat_template", "chat_template"):
            kwargs.pop(key, None)
        self.record_prompt(doc, ctx)
        return Instance(request_type=GENERATE_LONG, doc=doc, arguments=(ctx, self.request_options(doc)), idx=0, **kwargs)

    def judge_settings(self) -> dict | None:
        from harness.judges.stage import judge_settings_from_metadata

        return judge_settings_from_metadata(self.task_metadata, self.JUDGE_TEMPERATURE, self.JUDGE_MAX_TOKENS)

    @staticmethod
    def common_metrics(result: dict) -> dict:
        from harness.metrics.generation import distinct_n, is_corrupted, rep_n

        text = result["text"]
        return {
            "n_tokens": result["n_tokens"],
            "corrupted_ratio": float(is_corrupted(text, result["ended_with_eos"])),
            "rep4": rep_n(text, 4),
            "distinct2": distinct_n(text, 2),
            "n_total": 1,
        }


class LongBenchWriteTask(LongGenerationTask):
    """LongBench-Write: S_l, S_q (judge, official prompt loaded at run time from ``judge_prompt`` or the
    published file), S, plus lengths and the corrupted ratio."""

    DEFAULT_MAX_GEN_TOKS = 32768
    JUDGE_TEMPERATURE, JUDGE_MAX_TOKENS = 0.5, 1024  # the reference judge settings

    def score_document(self, doc: dict, results: list) -> dict:
        from harness.metrics.generation import longbench_write_length, longbench_write_length_score

        result = results[0]
        length = longbench_write_length(result["text"])
        s_l = longbench_write_length_score(float(doc["length"]), length)
        item = {"instruction": doc["prompt"], "response": result["text"], "length_score": s_l,
                "judge": self.judge_settings(), "prompt_path": self.task_metadata.get("judge_prompt")}
        return {"length": length, "length_score": s_l, "quality": item, "score": item, "n_valid": item,
                **self.common_metrics(result)}


class HelloBenchTask(LongGenerationTask):
    """HelloBench HTG: NLTK length, HelloEval checklist quality with the published category weights
    (``weights_file``; ``rescale`` for ``4 (s - 75)``), plus the corrupted ratio."""

    def __init__(self, config: dict | None = None, **kwargs: Any) -> None:
        from harness.data.words import word_tokenizer_name

        super().__init__(config=config, **kwargs)
        if isinstance(self.config.metadata, dict):  # which NLTK path counted the lengths, in the results
            self.config.metadata["length_tokenizer"] = word_tokenizer_name()

    def score_document(self, doc: dict, results: list) -> dict:
        from harness.data.documents import MissingDataError
        from harness.data.words import word_tokens

        weights_file = self.task_metadata.get("weights_file")
        if not weights_file:
            raise MissingDataError("hellobench needs weights_file: the published HelloEval REGRESSION_DICT weights "
                                   "(e.g. ../shared/data/hellobench/weighted_scores.txt)")
        result = results[0]
        tokens = word_tokens(result["text"])
        judged_text = " ".join(tokens[:16000]) if len(tokens) > 15000 else " ".join(tokens)
        item = {"instruction": doc["instruction"], "response": judged_text, "checklists": list(doc["checklists"]),
                "category": doc["category"], "weights_file": str(weights_file),
                "rescale": bool(self.task_metadata.get("rescale", False)), "judge": self.judge_settings()}
        return {"length": len(tokens), "quality": item, "n_valid": item, **self.common_metrics(result)}


class CompressAETask(CustomRequestTask):
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
