"""MRQA tasks: one generate_until subtask per MRQA dataset, scored with EM / F1 / ROUGE-1 (docs/formulas.md §6)."""

from harness.metrics.qa import em_f1, rouge1_f1
from harness.tasks.mrqa.dataset import load_mrqa
from harness.tasks.mrqa.task import MrqaTask


def process_results(doc: dict, results: list) -> dict:
    prediction = results[0].strip()
    em, f1 = em_f1(prediction, doc["answers"])
    return {"em": em, "f1": f1, "rouge1": rouge1_f1(prediction, doc["answers"])}


__all__ = ["MrqaTask", "load_mrqa", "process_results"]
