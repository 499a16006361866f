"""lm-eval ``generate_until`` task classes with length honesty and per-length scores (RULER, BABILong, MRQA).

:class:`HonestGenerationTask` counts, in the evaluated model's tokenizer, the exact prompt lm-eval built
for every document (chat template included) and reports

* ``prompt_tokens`` (mean),
* ``over_length`` (count): prompts with ``prompt_tokens + max_gen_toks > max_length``, i.e. those lm-eval's
  HF model left-truncates (``max_length`` from the model args, else the model config; see
  :func:`harness.data.prompt_length.model_max_length`),

so truncation is never silent. Tasks that generate their samples at a target length (RULER, BABILong)
also report ``over_target`` (count): prompts longer than the length they were fitted to, which happens
when a run applies a chat template the generator was not told about (``--metadata '{"chat_template":
true}'``).

:class:`PerLengthTask` adds one score per sample length, ``len_<length>``, next to the overall ``score``;
the lengths come from metadata ``lengths``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from typing import Any

from lm_eval.api.task import ConfigurableTask

from harness.data.lengths import length_label, length_tokens, parse_lengths

log = logging.getLogger(__name__)


def _mean(items: list) -> float:
    return sum(items) / len(items) if items else float("nan")


def _sum(items: list) -> float:
    return float(sum(items))


def doc_key(doc: dict) -> str:
    return hashlib.sha1(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


HONESTY_METRICS = [
    {"metric": "prompt_tokens", "aggregation": _mean, "higher_is_better": False},
    {"metric": "over_length", "aggregation": _sum, "higher_is_better": False},
]
TARGET_METRIC = {"metric": "over_target", "aggregation": _sum, "higher_is_better": False}


class LengthHonesty:
    """Mixin for lm-eval tasks: counts each prompt lm-eval built (``record_prompt`` from
    ``construct_requests``) and reports ``prompt_tokens`` / ``over_length`` (``honesty`` from scoring)."""

    def record_prompt(self, doc: dict, ctx: Any) -> None:
        if not isinstance(ctx, str):
            return
        if getattr(self, "_counter", None) is None:
            from harness.data.prompt_length import PromptCounter, load_tokenizer, model_max_length, tokenizer_name

            self._prompt_tokens: dict[str, int] = {}
            meta = dict(self.config.metadata or {})
            name = tokenizer_name(meta)
            if name is None:
                if not getattr(self, "_warned", False):
                    log.warning("%s: no tokenizer in the model args, so prompt lengths are not reported", self.config.task)
                    self._warned = True
                return
            self._counter = PromptCounter(load_tokenizer(name))
            self._max_length = model_max_length(meta)
        self._prompt_tokens[doc_key(doc)] = self._counter.count_rendered([ctx])[0]

    def honesty(self, doc: dict, budget: int, targeted: bool = False) -> dict:
        n = getattr(self, "_prompt_tokens", {}).get(doc_key(doc))
        if n is None:
            return {}
        out = {"prompt_tokens": n, "over_length": int(n + budget > self._max_length)}
        if targeted and doc.get("prompt_budget"):
            out["over_target"] = int(n + budget > int(doc["prompt_budget"]))
        return out


class HonestGenerationTask(LengthHonesty, ConfigurableTask):
    """``generate_until`` whose results include ``prompt_tokens`` / ``over_length`` (see module docstring).

    Subclasses implement :meth:`score_document`; YAML may instead give ``process_results``, whose metrics
    are then extended with the honesty counts."""

    TARGETED = False  # samples carry the token length they were fitted to (doc["prompt_budget"])

    def __init__(self, config: dict | None = None, **kwargs: Any) -> None:
        config = {k: v for k, v in (config or {}).items() if k != "class"}
        meta = dict(config.get("metadata") or {})
        scorer = config.get("process_results")
        self._scorer = scorer if callable(scorer) else self.score_document
        config["process_results"] = lambda doc, results: {
            **self._scorer(doc, results), **self.honesty(doc, self.max_gen_toks(doc), self.TARGETED)}
        config["metric_list"] = self.metrics(meta, list(config.get("metric_list") or []))
        super().__init__(config=config, **kwargs)

    def metrics(self, meta: dict, declared: list) -> list[dict]:
        return list(declared) + HONESTY_METRICS + ([TARGET_METRIC] if self.TARGETED else [])

    def score_document(self, doc: dict, results: list) -> dict:
        raise NotImplementedError

    def max_gen_toks(self, doc: dict) -> int:
        return int((self.config.generation_kwargs or {}).get("max_gen_toks", 256))

    def construct_requests(self, doc: dict, ctx: Any, **kwargs: Any) -> Any:
        self.record_prompt(doc, ctx)
        return super().construct_requests(doc, ctx, **kwargs)


class PerLengthTask(HonestGenerationTask):
    """Scores ``score`` and ``len_<length>`` (mean x 100 each) for documents carrying ``doc["length"]``."""

    TARGETED = True
    DEFAULT_LENGTHS: list = [4096]

    @staticmethod
    def label(length: Any) -> Any:
        """How this task names a length (in ``len_<label>`` and ``doc["length"]``)."""
        return length_tokens(length)

    def metrics(self, meta: dict, declared: list) -> list[dict]:
        lengths = [self.label(x) for x in parse_lengths(meta.get("lengths"), self.DEFAULT_LENGTHS)]
        out = [{"metric": "score", "aggregation": _mean, "higher_is_better": True}]
        out += [{"metric": f"len_{n}", "aggregation": _mean, "higher_is_better": True} for n in lengths]
        return super().metrics(meta, declared + out)

    def score_sample(self, doc: dict, prediction: str) -> float:
        raise NotImplementedError

    def score_document(self, doc: dict, results: list) -> dict:
        value = self.score_sample(doc, results[0])
        return {"score": value, f"len_{doc['length']}": value}


_CONTROL = re.compile(r"[\x00-\x1f]")


class RulerTask(PerLengthTask):
    """One RULER task (metadata ``ruler_task``); budget and scoring from :data:`harness.data.ruler.TASKS`."""

    def __init__(self, config: dict | None = None, **kwargs: Any) -> None:
        from harness.data.ruler import TASKS

        config = dict(config or {})
        name = (config.get("metadata") or {}).get("ruler_task")
        if name not in TASKS:
            raise ValueError(f"RULER task metadata ruler_task={name!r} is unknown")
        self.spec = TASKS[name]
        config["generation_kwargs"] = {"until": [], "do_sample": False, "max_gen_toks": self.spec.budget}
        super().__init__(config=config, **kwargs)

    def score_sample(self, doc: dict, prediction: str) -> float:
        from harness.metrics.qa import string_match_all, string_match_part

        prediction = _CONTROL.sub("\n", prediction.strip()).strip()  # RULER's post-processing
        match = string_match_part if self.spec.metric == "string_match_part" else string_match_all
        return match(prediction, doc["outputs"])


class BabilongTask(PerLengthTask):
    """One BABILong task (metadata ``babilong_task``) scored by the official label-set rule, x 100."""

    DEFAULT_LENGTHS = ["0k"]
    label = staticmethod(length_label)

    def score_sample(self, doc: dict, prediction: str) -> float:
        from harness.metrics.babilong import compare_answers

        return 100.0 * float(compare_answers(doc["target"], prediction, doc["question"], doc["task"]))


class _MissingLengthFilter(logging.Filter):
    """Drops lm-eval's group warning for ``len_<length>`` metrics of lengths a run did not ask for: our
    group YAMLs list the usual lengths, and each run fills only some of them."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        if "metric 'len_" in msg and ("no values found" in msg or "is missing in" in msg):
            return False
        # per-length metrics are, by design, scored on the documents of their length only
        return not ("not scored on the same number of documents" in msg and "len_" in msg)


def quiet_missing_length_warnings() -> None:
    for name in ("lm_eval.api.group", "lm_eval.evaluator_utils"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _MissingLengthFilter) for f in logger.filters):
            logger.addFilter(_MissingLengthFilter())
