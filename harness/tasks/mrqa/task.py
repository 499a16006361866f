"""The MRQA task class: one MRQA subset per YAML, scored by the YAML's ``process_results`` (EM / F1 / ROUGE-1)."""

from __future__ import annotations

from harness.tasks.generate_until import HonestGenerationTask
from harness.tasks.mrqa.dataset import MrqaOptions


class MrqaTask(HonestGenerationTask):
    """One MRQA subset (:class:`~harness.tasks.mrqa.dataset.MrqaOptions`), scored by the YAML's ``process_results``."""

    OPTIONS = MrqaOptions
