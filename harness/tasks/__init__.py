"""lm-eval task folder (``harness.tasks``), named by our ``lm_eval.tasks`` entry point: every YAML below is indexed."""

from pathlib import Path

TASKS_PATH = Path(__file__).resolve().parent
