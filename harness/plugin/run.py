"""Running lm-eval from Python (the demos): our models registered, our task folder included, results saved
in lm-eval's ``--output_path`` layout so that the ``lch`` reports read them."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, Sequence

from harness.core.files import write_text_atomic


def task_manager(extra_paths: Sequence[str] = (), metadata: dict | None = None) -> Any:
    """An lm-eval ``TaskManager`` over lm-eval's tasks, ours (found as a task plugin) and ``extra_paths``, with
    ``metadata`` for every task. Indexing the task folders is slow: build it once per run of several evaluations."""
    from lm_eval.tasks import TaskManager

    from harness.plugin.activation import activate

    activate()
    return TaskManager(include_path=[str(p) for p in extra_paths] or None, metadata=metadata)


def evaluate(model_args: dict, tasks: list[str], manager: Any, model: str = "hf-pic", **kwargs: Any) -> dict:
    """``lm_eval.simple_evaluate`` of ``model`` (default our ``hf-pic``) on ``tasks``."""
    from lm_eval import simple_evaluate

    from harness.plugin.activation import activate

    activate()
    return simple_evaluate(model=model, model_args=model_args, tasks=tasks, task_manager=manager, **kwargs)


def save_run(results: dict, run_dir: Path) -> Path:
    """Write ``results`` as ``<run_dir>/results_<date>.json`` (lm-eval's layout, so ``lch`` reports read it)."""
    from lm_eval.utils import handle_non_serializable

    stamp = datetime.fromtimestamp(results["date"]).strftime("%Y-%m-%dT%H-%M-%S.%f")
    # atomic: `lch leaderboard` reading the folder while a run saves never sees half a results file
    return write_text_atomic(run_dir / f"results_{stamp}.json",
                             json.dumps(results, indent=2, default=handle_non_serializable))
