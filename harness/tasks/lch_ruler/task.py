"""The RULER task class: one RULER task per YAML (option ``ruler_task``), scored by RULER's string-match rules."""

from __future__ import annotations

import re
from typing import Any

from harness.core.errors import UsageError
from harness.tasks.base import CachedCounts
from harness.tasks.depth import DepthScores
from harness.tasks.generate_until import PerLengthTask
from harness.tasks.lch_ruler.dataset import TASKS, RulerOptions, counts

_CONTROL = re.compile(r"[\x00-\x1f]")


class RulerTask(DepthScores, PerLengthTask):
    """One RULER task (option ``ruler_task``); budget and scoring from
    :data:`harness.tasks.lch_ruler.definitions.TASKS`.
    The ``niah_*`` tasks also score each needle-depth bucket at each length (:mod:`harness.tasks.depth`)."""

    OPTIONS = RulerOptions
    KEYED_OPTIONS = True  # its samples are cached under a key derived from RulerOptions' declaration

    def configure(self, config: dict) -> None:
        name = self.options.ruler_task
        if name not in TASKS:
            raise UsageError(f"RULER task metadata ruler_task={name!r} is unknown")
        self.spec = TASKS[name]
        config["generation_kwargs"] = {"until": [], "do_sample": False, "max_gen_toks": self.spec.budget}

    @classmethod
    def plan_from_cache(cls, model_keys: Any, options: Any, limit: float | None) -> list[CachedCounts] | None:
        """Each length's counts as its cached samples carry them (generated first when not cached); None (the plan
        builds the requests) when they may differ from what the run sends: under ``--limit``, with another chat-template
        setting than the run's, or when a sample does not fit the model."""
        from harness.core.run_record import run_applies_chat_template
        from harness.data.lengths import length_tokens
        from harness.data.prompt_tokens import counter_for, model_max_length

        options = cls.resolved_options(options)
        if limit is not None or bool(options.chat_template) != bool(run_applies_chat_template()):
            return None
        counter, max_length, out = counter_for(options), model_max_length(model_keys), []
        for length in (length_tokens(x) for x in options.length_list()):
            found, cached = counts(options, length, counter)
            prompts, budgets = found["prompt_tokens"], found["max_gen_toks"]
            if any(p + b > max_length for p, b in zip(prompts, budgets)):
                return None
            out.append(CachedCounts(str(length), tuple(prompts), tuple(budgets), cached))
        return out

    def has_depth(self) -> bool:
        return self.spec.kind == "niah"  # the needle tasks' rows record where the answer needle sits

    def score_sample(self, doc: dict, prediction: str) -> float:
        from harness.metrics.qa import string_match_all, string_match_part

        prediction = _CONTROL.sub("\n", prediction.strip()).strip()  # RULER's post-processing
        match = string_match_part if self.spec.metric == "string_match_part" else string_match_all
        return match(prediction, doc["outputs"])
