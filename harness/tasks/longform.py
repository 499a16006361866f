"""Long-form generation tasks (``generate_long``): LongBench-Write and HelloBench HTG, judged by the judge stage
(:mod:`harness.judges.stage`), the aggregation of their judged metrics, once per task."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from typing import Any, ClassVar

from harness.core.options import MAX_TOKENS, option
from harness.data.longform import HelloBenchData, LongBenchWriteData
from harness.engines.requests import GENERATE_LONG, LongGenerationOptions
from harness.judges.config import JudgeOptions
from harness.metrics.pooling import pools_as
from harness.tasks.base import LchTask
from harness.tasks.lm_eval_api import task_base

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GenerationOptions(JudgeOptions):
    """How a long-form task generates, and its judge."""

    max_gen_toks: int | None = option(
        None, "generation budget in tokens (default: the task's, DEFAULT_MAX_GEN_TOKS)", low=1, high=MAX_TOKENS
    )
    do_sample: bool = option(False, "sample instead of greedy decoding (default greedy, as in the PIC paper)")
    temperature: float = option(LongGenerationOptions.temperature, "sampling temperature (with do_sample)", low=0.0)


@dataclass(frozen=True)
class LongBenchWriteOptions(LongBenchWriteData, GenerationOptions):
    """LongBench-Write's rows, generation and judge."""


@dataclass(frozen=True)
class HelloBenchOptions(HelloBenchData, GenerationOptions):
    """HelloBench HTG's prompts and weights, generation and judge."""


# lm-eval's task class for the output type, chosen at run time (lm-eval ships no types)
_GenerateLongBase: Any = task_base(GENERATE_LONG.output_type)


class LongGenerationTask(LchTask, _GenerateLongBase):
    """Long-form generation from the lm-eval prompt (chat template applied by lm-eval when asked)."""

    OPTIONS: ClassVar[type] = GenerationOptions  # each subclass its own
    REQUEST_TYPE = GENERATE_LONG.name
    COUNTS_PROMPT = True
    DEFAULT_MAX_GEN_TOKS = 16384
    JUDGE_TEMPERATURE, JUDGE_MAX_TOKENS = 0.0, 4096
    JUDGED_METRICS: tuple[str, ...] = ("quality", "n_valid")
    # how each judged metric pools over documents (harness.judges.stage.task_scores); absent: not poolable
    JUDGED_POOLING: dict[str, str] = {"n_valid": "sum"}

    def configure(self, config: dict) -> None:
        budget = self.options.max_gen_toks
        config["generation_kwargs"] = {
            **(config.get("generation_kwargs") or {}),
            "max_gen_toks": self.DEFAULT_MAX_GEN_TOKS if budget is None else budget,
        }

    def extra_metrics(self, meta: dict) -> list[dict]:
        judged = [{"metric": name, "aggregation": self._judged_aggregation(name)} for name in self.JUDGED_METRICS]
        return judged + super().extra_metrics(meta)

    def _judged_aggregation(self, name: str) -> Any:
        def aggregate(items: list) -> float:
            return self.judged_scores(items)[name]

        aggregate.__name__ = f"judged_{name}"
        return pools_as(self.JUDGED_POOLING.get(name))(aggregate)

    def judge_item(self, doc: dict, response: str) -> dict:
        """What the judge is asked about ``doc`` answered by ``response`` (an item of :mod:`harness.judges.stage`)."""
        raise NotImplementedError

    def judge_tokens(self, doc: dict, budget: int, count: Any) -> tuple[int, int] | None:
        """At most ``(prompt, completion)`` tokens of ``doc``'s judge request in ``count``'s tokenizer: its messages
        with an empty response plus ``budget``, and the judge's ``max_tokens``; None when the judge's prompt is not at
        hand (LongBench-Write's official file, loaded at run time)."""
        from harness.core.errors import MissingDataError
        from harness.judges.stage import judge_messages

        try:
            messages = judge_messages(self.judge_item(doc, ""))
        except MissingDataError:
            return None
        limit = self.options.judge_max_tokens
        return (
            sum(count(m["content"]) for m in messages) + budget,
            int(self.JUDGE_MAX_TOKENS if limit is None else limit),
        )

    def judged_scores(self, items: list) -> dict:
        """The judged metrics of these items, judged once (the other judged metrics reuse them); the judge's provenance
        goes into the task metadata, which lm-eval writes into the results after aggregating."""
        from harness.judges.stage import judge, task_scores

        key = hashlib.sha1(json.dumps(items, sort_keys=True, default=str).encode()).hexdigest()
        if getattr(self, "_judged_key", None) != key:
            judged = self._judge_keeping_generations(items, judge)
            self._judged_key, self._judged_scores = key, task_scores(items, judged)
            if isinstance(self.config.metadata, dict) and judged.provenance is not None:
                self.config.metadata["judge_provenance"] = judged.provenance
            self._explain_absent(items, judged)
        return self._judged_scores

    def _judge_keeping_generations(self, items: list, judge: Any) -> Any:
        """``judge(items)``; an unreachable judge leaves every item ``unreachable`` so the run keeps its generations; an
        interrupt saves them (:func:`harness.judges.stage.save_unjudged`) before it ends the run."""
        from harness.judges.client import JudgeUnreachable
        from harness.judges.stage import save_unjudged, unanswered

        try:
            return judge(items)
        except JudgeUnreachable as err:
            log.warning("%s: %s", self.config.task, err)
            return unanswered(items, "unreachable")
        except KeyboardInterrupt:
            kept = save_unjudged(self.config.task, items)
            log.warning(
                "interrupted while judging: the generations of %s are kept in %s (`lch judge %s ...` judges them)",
                self.config.task,
                kept,
                kept,
            )
            raise

    def _explain_absent(self, items: list, judged: Any) -> None:
        """Records why absent judged scores (NaN) are absent (``lch_absent``); when judge requests failed, marks the run
        incomplete (exit 2 after the results) and keeps the items as a samples file that ``lch judge`` resumes from."""
        from harness.core import results as keys
        from harness.core.incomplete import report_incomplete
        from harness.judges.stage import save_unjudged

        reason = judged.absent_because()
        if reason is None:
            return
        absent = [m for m, v in self._judged_scores.items() if isinstance(v, float) and v != v]
        if isinstance(self.config.metadata, dict):
            self.config.metadata[keys.ABSENT] = {
                **self.config.metadata.get(keys.ABSENT, {}),
                **dict.fromkeys(absent, reason),
            }
        if judged.failures:
            kept = save_unjudged(self.config.task, items)
            report_incomplete(
                f"{self.config.task}: {', '.join(absent)} not computed: {reason}; the generations are "
                f"kept in {kept} (judge them with `lch judge {kept} --judge-base-url URL --judge-model "
                "M`, or rerun the same command with --use_cache: answers received are cached)"
            )

    def request_options(self, doc: dict) -> LongGenerationOptions:
        sampling = self.options.do_sample
        return LongGenerationOptions.of(
            max_gen_toks=self.generation_budget(),
            do_sample=sampling,
            temperature=self.options.temperature if sampling else None,
        )

    def request_text(self, doc: dict, ctx: Any) -> str:
        return ctx  # the prompt lm-eval built (chat template included)

    def judge_settings(self) -> dict | None:
        return self.options.settings(self.JUDGE_TEMPERATURE, self.JUDGE_MAX_TOKENS)

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

    OPTIONS = LongBenchWriteOptions
    DEFAULT_MAX_GEN_TOKS = 32768
    JUDGE_TEMPERATURE, JUDGE_MAX_TOKENS = 0.5, 1024  # the reference judge settings
    JUDGED_METRICS = ("quality", "score", "n_valid")
    JUDGED_POOLING = {"quality": "mean", "n_valid": "sum"}  # S_q is linear in the samples; S mixes two sample sets

    def score_document(self, doc: dict, results: list) -> dict:
        from harness.metrics.generation import longbench_write_length, longbench_write_length_score

        result = results[0]
        length = longbench_write_length(result["text"])
        s_l = longbench_write_length_score(float(doc["length"]), length)
        item = {**self.judge_item(doc, result["text"]), "length_score": s_l}
        return {
            "length": length,
            "length_score": s_l,
            **dict.fromkeys(self.JUDGED_METRICS, item),
            **self.common_metrics(result),
        }

    def judge_item(self, doc: dict, response: str) -> dict:
        return {
            "kind": "longbench_write",
            "instruction": doc["prompt"],
            "response": response,
            "judge": self.judge_settings(),
            "prompt_path": self.options.judge_prompt,
        }


class HelloBenchTask(LongGenerationTask):
    """HelloBench HTG: NLTK length, HelloEval checklist quality with the published category weights
    (``weights_file``; ``rescale`` for ``4 (s - 75)``), plus the corrupted ratio."""

    OPTIONS = HelloBenchOptions

    def configure(self, config: dict) -> None:
        from harness.data.words import word_tokenizer_name

        super().configure(config)
        # which NLTK path counted the lengths, in the results
        config["metadata"] = {**(config.get("metadata") or {}), "length_tokenizer": word_tokenizer_name()}

    def score_document(self, doc: dict, results: list) -> dict:
        from harness.data.documents import MissingDataError
        from harness.data.words import word_tokens

        weights_file = self.options.weights_file
        if not weights_file:
            raise MissingDataError(
                "hellobench needs weights_file: the published HelloEval REGRESSION_DICT weights "
                "(e.g. ../shared/data/hellobench/weighted_scores.txt)"
            )
        result = results[0]
        tokens = word_tokens(result["text"])
        item = self.judge_item(doc, " ".join(tokens[:16000]))
        return {"length": len(tokens), **dict.fromkeys(self.JUDGED_METRICS, item), **self.common_metrics(result)}

    def judge_item(self, doc: dict, response: str) -> dict:
        return {
            "kind": "hellobench",
            "instruction": doc["instruction"],
            "response": response,
            "checklists": list(doc["checklists"]),
            "category": doc["category"],
            "weights_file": str(self.options.weights_file),
            "rescale": self.options.rescale,
            "judge": self.judge_settings(),
        }
