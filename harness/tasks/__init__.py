"""lm-eval task folder of the harness (installed as ``harness.tasks``).

Our ``lm_eval.tasks`` entry point names this package: lm-eval's task plugin discovery (and its backport,
:mod:`harness.plugin.discovery`) indexes every YAML below this folder.
"""

from pathlib import Path

TASKS_PATH = Path(__file__).resolve().parent
