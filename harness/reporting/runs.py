"""lm-eval run folders read as :class:`Run`s, one per ``results_*.json``: a metric is ``<task>/<metric>`` (filter
``none`` dropped, others kept as ``<metric>,<filter>``), its stderr and direction (``higher_is_better``) beside it."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core import results as keys
from harness.core.errors import DataFormatError
from harness.core.run_record import RunRecord
from harness.metrics.catalogue import COUNT_PREFIX
from harness.metrics.support import Support, results_cautions
from harness.reporting.labels import checkpoint_of, model_args_of, run_name


class RunError(DataFormatError):
    """A results file that cannot be used; the message names the file."""


@dataclass
class Run:
    path: Path
    model: str
    model_args: dict
    date: float
    metrics: dict[str, float] = field(default_factory=dict)
    stderrs: dict[str, float] = field(default_factory=dict)
    higher_is_better: dict[str, bool] = field(default_factory=dict)
    variant: str = ""  # what was evaluated, in words (``config.lch_evaluated_as`` written by hf-pic / vllm-pic)
    applied: dict | None = None  # the inference applied, as model args (``config.lch_inference``), if recorded
    record: RunRecord = field(default_factory=RunRecord)  # what the run was run with (harness.core.run_record)
    # "<task>/<metric>" -> perplexity | score | bookkeeping as our tasks declare them; not other tasks' or groups'
    roles: dict[str, str] = field(default_factory=dict)
    # task -> metric -> how its per-document values pool over any subset, as the task declared it (None: not poolable);
    # a task absent here recorded none (another package's task, an older file)
    pooling: dict[str, dict[str, str | None]] = field(default_factory=dict)
    subtasks: dict[str, list[str]] = field(default_factory=dict)  # group -> its tasks (lm-eval's group_subtasks)
    # group -> whether its aggregates weight its tasks by size (lch_group_weighting); absent where unrecorded
    weighted: dict[str, bool] = field(default_factory=dict)
    # task -> sentences on metrics that rest on too little (harness.metrics.support; the results' lch_cautions)
    cautions: dict[str, list[str]] = field(default_factory=dict)
    # task -> what it measured with (config metadata keys.CONFIGURATION: harness.tasks.base.LchTask)
    configurations: dict[str, dict] = field(default_factory=dict)
    samples: dict[str, int] = field(default_factory=dict)  # task -> documents scored (lm-eval's n-samples effective)
    # "<task>/<metric>" -> why it has no number: a NaN / inf in the file, or left out by our run (lch_absent)
    absent: dict[str, str] = field(default_factory=dict)
    cost: dict = field(
        default_factory=dict
    )  # what the run cost (the results' lch_cost: harness.core.costs), {} if unrecorded
    # task -> "<metric>,<filter>" -> {"n", "digest"}: the documents each score rests on (lch_scored); {} if unlogged
    scored: dict[str, dict[str, dict]] = field(default_factory=dict)
    supports: dict[str, list[Support]] = field(default_factory=dict)  # task -> what its metrics rest on, as declared

    @property
    def key(self) -> str:
        """The configuration: model and model_args (PIC / EPL settings included)."""
        return f"{self.model}|{json.dumps(self.model_args, sort_keys=True)}"

    @property
    def checkpoint(self) -> str:
        return checkpoint_of(self.model_args)

    @property
    def label(self) -> str:
        """The run's name, as every report names it (:mod:`harness.reporting.labels`)."""
        return run_name(self).text


def _metric_name(task: str, key: str) -> tuple[str, bool] | None:
    if "," not in key:
        return None
    metric, flt = key.split(",", 1)
    is_stderr = metric.endswith("_stderr")
    metric = metric[: -len("_stderr")] if is_stderr else metric
    return f"{task}/{metric}" + ("" if flt == "none" else f",{flt}"), is_stderr


def count_of(metric: str) -> str:
    """``<task>/n_<metric>``: how many documents ``<task>/<metric>`` rests on."""
    task, name = metric.split("/", 1)
    return f"{task}/{COUNT_PREFIX}{name}"


def read_json(path: Path, error: type[ValueError]) -> Any:
    """The file's JSON, or ``error("<path>: not readable JSON (...)")``."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:  # UnicodeDecodeError: a binary file
        raise error(f"{path}: not readable JSON ({err})") from None


def declared(data: dict, key: str, kind: type = dict) -> dict[str, Any]:
    """``{task: metadata[key]}`` of the results' task configs that declare ``key`` as an object (a ``kind``)."""
    out = {}
    for task, config in (data.get("configs") or {}).items():
        declared = ((config or {}).get("metadata") or {}).get(key) if isinstance(config, dict) else None
        if isinstance(declared, kind):
            out[str(task)] = declared
    return out


def _metric_roles(data: dict) -> dict[str, str]:
    """``{"<task>/<metric>": role}`` declared in the results' task configs (``metadata.lch_metric_roles``)."""
    return {
        f"{task}/{metric}": str(role)
        for task, roles in declared(data, keys.METRIC_ROLES).items()
        for metric, role in roles.items()
    }


def _supports(data: dict) -> dict[str, list[Support]]:
    """``{task: [Support]}`` declared in the results' task configs (``metadata.lch_support``)."""
    return {
        task: [Support.from_json(s) for s in found if isinstance(s, dict)]
        for task, found in declared(data, keys.SUPPORT, list).items()
    }


def cautions_of(data: dict) -> dict[str, list[str]]:
    """The run's cautions as it recorded them (``lch_cautions``), else as its tasks' declared supports give them."""
    recorded = data.get(keys.CAUTIONS)
    if isinstance(recorded, dict):
        return {str(t): [str(s) for s in found] for t, found in recorded.items() if isinstance(found, list)}
    return results_cautions(data)


def read_results(path: Path) -> dict:
    """An lm-eval results file's JSON, or :class:`RunError` naming the file."""
    data = read_json(path, RunError)
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise RunError(f"{path}: no 'results' object (not an lm-eval results file)")
    return data


def read_run(path: str | Path) -> Run:
    path = Path(path)
    data = read_results(path)
    config = data.get("config") or {}
    run = Run(
        path,
        str(config.get("model") or data.get("model_name") or "?"),
        model_args_of(data),
        float(data["date"] if isinstance(data.get("date"), (int, float)) else path.stat().st_mtime),
        variant=str(config.get(keys.EVALUATED_AS) or ""),
        applied=given_keys_inference if isinstance(given_keys_inference := config.get(keys.INFERENCE), dict) else None,
        record=RunRecord.from_results(data),
        roles=_metric_roles(data),
        pooling=declared(data, keys.METRIC_POOLING),
        subtasks={
            str(g): [str(t) for t in ts] for g, ts in (data.get("group_subtasks") or {}).items() if isinstance(ts, list)
        },
        cautions=cautions_of(data),
        weighted={str(g): w for g, w in (data.get(keys.GROUP_WEIGHTING) or {}).items() if isinstance(w, bool)},
        configurations=declared(data, keys.CONFIGURATION),
        samples={
            str(t): int(n["effective"])
            for t, n in (data.get("n-samples") or {}).items()
            if isinstance(n, dict) and isinstance(n.get("effective"), int)
        },
        cost=data[keys.COST] if isinstance(data.get(keys.COST), dict) else {},
        scored={str(t): dict(v) for t, v in data[keys.SCORED].items() if isinstance(v, dict)}
        if isinstance(data.get(keys.SCORED), dict)
        else {},
        supports=_supports(data),
    )
    for task, values in data["results"].items():
        if not isinstance(values, dict):
            raise RunError(f"{path}: results[{task!r}] is not an object")
        directions = (data.get("higher_is_better") or {}).get(task, {})
        for key, value in values.items():
            named = _metric_name(task, key)
            if named is None or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue  # alias, name, sample_len, "N/A" stderrs
            name, is_stderr = named
            if not math.isfinite(value):  # json reads NaN / Infinity: a number that could not be computed
                if not is_stderr:
                    run.absent[name] = f"{value} in the results file (it could not be computed)"
                continue
            (run.stderrs if is_stderr else run.metrics)[name] = float(value)
            base = name.split("/", 1)[1].split(",")[0]
            if not is_stderr and base in directions:
                run.higher_is_better[name] = bool(directions[base])
    for task, metrics in (data.get(keys.ABSENT) or {}).items() if isinstance(data.get(keys.ABSENT), dict) else ():
        for metric, why in (metrics or {}).items() if isinstance(metrics, dict) else ():
            run.absent.setdefault(f"{task}/{metric}", f"not computed: {why}")
    return run


def load_runs(folders: list[str | Path], on_error: str = "fail") -> tuple[list[Run], list[str]]:
    """Runs of every ``results_*.json`` under ``folders`` (a results file itself also works), by date.
    ``on_error``: ``fail`` raises :class:`RunError` on the first bad file, ``skip`` collects its message."""
    runs, errors = [], []
    for folder in folders:
        folder = Path(folder)
        files = [folder] if folder.is_file() else sorted(folder.rglob("results_*.json"))
        if not files:
            message = (
                f"{folder}: no results_*.json found (give the folders lm-eval wrote with --output_path)"
                if folder.exists()
                else f"{folder} does not exist: give lm-eval output folders"
            )
            if on_error == "fail":
                raise RunError(message)
            errors.append(message)
        for file in files:
            try:
                run = read_run(file)
                if not run.metrics:  # a report over it would be an empty board that says nothing
                    raise RunError(
                        f"{file}: its results hold no metric"
                        + (
                            f" ({len(run.absent)} could not be computed: {next(iter(run.absent.items()))[1]})"
                            if run.absent
                            else " (an empty 'results' object)"
                        )
                    )
                runs.append(run)
            except RunError as err:
                if on_error == "fail":
                    raise
                errors.append(str(err))
    if not runs:  # a report over nothing would be an empty file and exit 0
        raise RunError(
            f"no usable lm-eval results under {', '.join(str(f) for f in folders) or 'the folders given'}"
            + (f" ({'; '.join(errors)})" if errors else "")
            + ": give folders lm-eval wrote with --output_path"
        )
    return sorted(runs, key=lambda r: r.date), errors


def latest_per_configuration(runs: list[Run]) -> list[Run]:
    """The newest run of each configuration, in date order; ``runs`` date-sorted, as :func:`load_runs` gives."""
    latest: dict[str, Run] = {}
    for run in runs:
        latest.pop(run.key, None)  # re-insert so the order is that of the newest runs
        latest[run.key] = run
    return list(latest.values())
