"""Running lm-eval from Python (the demos): our models registered, our task folder included, results saved
in lm-eval's ``--output_path`` layout so that the ``lch`` reports read them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.core.files import write_text_atomic


def task_manager(extra_paths: Sequence[str] = (), metadata: dict | None = None, ours_only: bool = False) -> Any:
    """An lm-eval ``TaskManager`` over lm-eval's tasks, ours and ``extra_paths``, with ``metadata`` for every task;
    ``ours_only``: our folder and ``extra_paths`` only (lm-eval's own take tens of seconds to index)."""
    from lm_eval.tasks import TaskManager

    from harness.plugin.activation import activate
    from harness.plugin.discovery import tasks_path

    activate()
    paths = [str(p) for p in extra_paths]
    if ours_only:
        return TaskManager(include_path=[str(tasks_path()), *paths], include_defaults=False, metadata=metadata)
    return TaskManager(include_path=paths or None, metadata=metadata)


def sample_size(task: Any, limit: float | None) -> int | None:
    """How many of ``task``'s documents lm-eval's evaluator takes under ``--limit`` (a count, or a fraction)."""
    from harness.plugin.discovery import sample_size as lm_eval_sample_size

    return lm_eval_sample_size(task, limit)


def evaluate(model_args: dict, tasks: list[str], manager: Any, model: str = "hf-pic", **kwargs: Any) -> dict:
    """``lm_eval.simple_evaluate`` of ``model`` (default our ``hf-pic``) on ``tasks``."""
    from lm_eval import simple_evaluate

    from harness.plugin.activation import activate

    activate()
    return simple_evaluate(model=model, model_args=model_args, tasks=tasks, task_manager=manager, **kwargs)


def save_run(results: dict, run_dir: Path) -> Path:
    """Write ``results`` (and its logged samples) into ``run_dir`` in lm-eval's ``--output_path`` layout."""
    import copy

    from lm_eval.loggers import EvaluationTracker
    from lm_eval.utils import handle_non_serializable

    stamp = datetime.fromtimestamp(results["date"]).strftime("%Y-%m-%dT%H-%M-%S.%f")
    # atomic: `lch leaderboard` reading the folder while a run saves never sees half a results file
    path = write_text_atomic(
        run_dir / f"results_{stamp}.json",
        json.dumps({k: v for k, v in results.items() if k != "samples"}, indent=2, default=handle_non_serializable),
    )
    samples = results.get("samples") or {}
    if samples:
        tracker = EvaluationTracker(output_path=str(path))  # a .json output path: its samples go beside it
        tracker.date_id = stamp  # the results file's stamp, which pairs the samples with it
        for task, rows in samples.items():
            tracker.save_results_samples(task, copy.deepcopy(rows))  # the writer reshapes the rows it is given
    return path
