"""lm-eval task classes for request types that lm-eval itself does not have.

``TokenLogprobTask`` sends one ``token_logprobs`` request per document (served by ``hf-pic``, see
:meth:`harness.models.hf_pic.HFPicLM.token_logprobs`). Its YAML declares
``output_type: loglikelihood_rolling`` only to pass lm-eval's config validation; the class then
switches the request type. Options come from the task ``metadata`` (overridable with ``--metadata``):
``max_tokens`` (keep the first N tokens) and ``add_special_tokens``.
"""

from __future__ import annotations

from typing import Any

from lm_eval.api.instance import Instance
from lm_eval.api.task import ConfigurableTask

from harness.metrics.perplexity import nll_sum

TOKEN_LOGPROBS = "token_logprobs"


class TokenLogprobTask(ConfigurableTask):
    """A task whose single request per document asks for the document's per-token log-probabilities."""

    OUTPUT_TYPE = TOKEN_LOGPROBS

    def __init__(self, config: dict | None = None, **kwargs: Any) -> None:
        config = {k: v for k, v in (config or {}).items() if k != "class"}
        # Routing process_results through the config tells lm-eval the metrics are computed here, so it
        # does not look our metric names up in its registry (and in HF evaluate) one by one.
        config.setdefault("process_results", lambda doc, results: self.score_document(doc, results))
        super().__init__(config=config, **kwargs)
        self.OUTPUT_TYPE = TOKEN_LOGPROBS  # lm-eval's multi-rank padding keys on this

    @property
    def task_metadata(self) -> dict:
        return dict(self.config.metadata or {})

    def request_options(self) -> dict:
        meta = self.task_metadata
        options: dict = {}
        if meta.get("max_tokens") is not None:
            options["max_tokens"] = int(meta["max_tokens"])
        if meta.get("add_special_tokens") is not None:
            options["add_special_tokens"] = bool(meta["add_special_tokens"])
        return options

    def score_document(self, doc: dict, results: list) -> dict:
        """Metrics of one document from its ``token_logprobs`` response; subclasses define them."""
        raise NotImplementedError

    def construct_requests(self, doc: dict, ctx: Any, **kwargs: Any) -> Instance:
        for key in ("apply_chat_template", "chat_template"):
            kwargs.pop(key, None)
        return Instance(
            request_type=TOKEN_LOGPROBS,
            doc=doc,
            arguments=(self.doc_to_target(doc), self.request_options()),
            idx=0,
            **kwargs,
        )


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
