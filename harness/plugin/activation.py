"""Our plugin's discovery and preflight hooks applied in this process now, as the start-up activation applies them."""

from __future__ import annotations

from harness.plugin.discovery import after_models_import, after_task_manager_import
from harness.plugin.preflight import after_evaluator_import


def activate() -> None:
    """Apply the hooks in this process now (``lch eval``; tests), whether or not the start-up activation ran (an
    install into a ``--target`` folder processes no ``.pth``)."""
    import lm_eval.evaluator
    import lm_eval.models  # noqa: F401  (the built-in models first, as lm-eval registers them)
    import lm_eval.tasks.manager

    after_models_import()
    after_task_manager_import(lm_eval.tasks.manager)
    after_evaluator_import(lm_eval.evaluator)  # the preflight in simple_evaluate and the quiet git lookup
