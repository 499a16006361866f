"""Our plugin applied in this process now: lm-eval's discovery of our models and tasks
(:mod:`harness.plugin.discovery`) and the preflight before every evaluation (:mod:`harness.plugin.preflight`), the
same hooks the start-up activation (``lch_harness_lm_eval.py``) applies when lm-eval's modules are imported."""

from __future__ import annotations

from harness.plugin.discovery import after_models_import, after_task_manager_import
from harness.plugin.preflight import after_evaluator_import


def activate() -> None:
    """The backport applied in this process now (``lch eval``; tests), whether or not the start-up activation
    ran (an install into a ``--target`` folder processes no ``.pth``): lm-eval's models, task manager and evaluator
    imported, discovery added where lm-eval has none, and the evaluator's hook applied."""
    import lm_eval.evaluator
    import lm_eval.models  # noqa: F401  (the built-in models first, as lm-eval registers them)
    import lm_eval.tasks.manager

    after_models_import()
    after_task_manager_import(lm_eval.tasks.manager)
    after_evaluator_import(lm_eval.evaluator)  # the preflight in simple_evaluate and the quiet git lookup
