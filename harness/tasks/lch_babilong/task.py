"""The BABILong task class: one bAbI task per YAML (option ``babilong_task``) at each length."""

from __future__ import annotations

from harness.data.lengths import length_label
from harness.tasks.depth import DepthScores
from harness.tasks.generate_until import PerLengthTask
from harness.tasks.lch_babilong.dataset import BabilongOptions


class BabilongTask(DepthScores, PerLengthTask):
    """One BABILong task (option ``babilong_task``) scored by the official label-set rule, x 100; with ``source``
    synthetic also per depth bucket of the answer's fact at each length (:mod:`harness.tasks.depth`)."""

    OPTIONS = BabilongOptions
    label = staticmethod(length_label)

    def has_depth(self) -> bool:
        return self.options.source == "synthetic"  # HF and local rows do not say which fact answers

    def score_sample(self, doc: dict, prediction: str) -> float:
        from harness.tasks.lch_babilong.scoring import compare_answers

        return 100.0 * float(compare_answers(doc["target"], prediction, doc["question"], doc["task"]))
