"""lm-eval task folder of the harness (installed as ``harness.tasks``).

Pass this folder to lm-eval with ``--include_path "$(lch tasks-path)"``; ``lch eval`` adds it itself.
"""

from pathlib import Path

TASKS_PATH = Path(__file__).resolve().parent
