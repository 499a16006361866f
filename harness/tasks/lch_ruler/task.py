"""The RULER task class: one RULER task per YAML (option ``ruler_task``), scored by RULER's string-match rules."""

from __future__ import annotations

import re

from harness.core.errors import UsageError
from harness.tasks.depth import DepthScores
from harness.tasks.generate_until import PerLengthTask
from harness.tasks.lch_ruler.dataset import RulerOptions


_CONTROL = re.compile(r"[\x00-\x1f]")


class RulerTask(DepthScores, PerLengthTask):
    """One RULER task (option ``ruler_task``); budget and scoring from :data:`harness.tasks.lch_ruler.catalogue.TASKS`.
    The ``niah_*`` tasks also score each needle-depth bucket at each length (:mod:`harness.tasks.depth`)."""

    OPTIONS = RulerOptions
    KEYED_OPTIONS = True  # its samples are cached under a key derived from RulerOptions' declaration

    def configure(self, config: dict) -> None:
        from harness.tasks.lch_ruler.catalogue import TASKS

        name = self.options.ruler_task
        if name not in TASKS:
            raise UsageError(f"RULER task metadata ruler_task={name!r} is unknown")
        self.spec = TASKS[name]
        config["generation_kwargs"] = {"until": [], "do_sample": False, "max_gen_toks": self.spec.budget}

    def has_depth(self) -> bool:
        return self.spec.kind == "niah"  # the needle tasks' rows record where the answer needle sits

    def score_sample(self, doc: dict, prediction: str) -> float:
        from harness.metrics.qa import string_match_all, string_match_part

        prediction = _CONTROL.sub("\n", prediction.strip()).strip()  # RULER's post-processing
        match = string_match_part if self.spec.metric == "string_match_part" else string_match_all
        return match(prediction, doc["outputs"])
