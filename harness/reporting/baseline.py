"""The baseline of ``lch regress`` (format: results/README.md): made from a run, checked when read. By default it
holds the run's scores: not bookkeeping metrics (counts describe the run) nor depth x length cells."""

from __future__ import annotations

import time
from pathlib import Path

from harness.core import results as keys
from harness.core.errors import DataFormatError
from harness.core.run_record import FIELDS, RunRecord
from harness.metrics.catalogue import DEPTH_PREFIX
from harness.reporting.runs import Run, read_json
from harness.reporting.samples import by_doc, number, read_rows, samples_files

NUMERIC_NOISE = 1e-4  # the smallest tolerance of any metric, as a share of its baseline value


SAMPLES = "samples"  # a metric's per-document values in a paired baseline: {doc_id: [value, doc_hash]}


MEAN_CHECK = 1e-6  # a metric is gated paired when its aggregate is the mean of its samples within this share


class BaselineError(DataFormatError):
    """A baseline file that cannot be used; the message names the file."""


def load_baseline(path: str | Path) -> dict:
    """A baseline file, each field checked (:class:`BaselineError` naming metric and field): a finite ``value``, a
    boolean ``higher_is_better``, ``stderr`` null or a finite number >= 0, ``abs_tol`` / ``rel_tol`` / ``k`` >= 0."""
    path = Path(path)
    return check_baseline(read_json(path, BaselineError), str(path))


def check_baseline(data: object, where: str) -> dict:
    """:func:`load_baseline`'s checks on content (``where``: its name in messages); made before writing one too."""
    if not isinstance(data, dict) or not isinstance(metrics := data.get("metrics"), dict) or not metrics:
        raise BaselineError(f"{where}: no 'metrics' object")
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise BaselineError(f"{where}: 'defaults' must be an object")
    for name, spec in [("defaults", defaults), *metrics.items()]:
        if name != "defaults":
            if not isinstance(spec, dict) or not number(spec.get("value")):
                raise BaselineError(
                    f"{where}: metric {name!r} needs a finite numeric 'value' (got "
                    f"{spec.get('value') if isinstance(spec, dict) else spec!r}); remake the baseline "
                    "with --update-baseline"
                )
            if not isinstance(spec.get("higher_is_better"), bool):
                raise BaselineError(
                    f"{where}: metric {name!r} needs 'higher_is_better' true or false (got "
                    f"{spec.get('higher_is_better')!r})"
                )
            if spec.get("stderr") is not None and not (number(spec["stderr"]) and spec["stderr"] >= 0):
                raise BaselineError(
                    f"{where}: metric {name!r} has stderr {spec['stderr']!r}: give a finite number >= 0 or null"
                )
            if SAMPLES in spec:
                _check_samples(where, name, spec[SAMPLES])
        for key in ("abs_tol", "rel_tol", "k"):
            if key in spec and not (number(spec[key]) and spec[key] >= 0):
                raise BaselineError(f"{where}: {name} {key} is {spec[key]!r}: give a finite number >= 0")
    return data


def _check_samples(path: str, name: str, samples: object) -> None:
    """A paired metric's ``samples``: a non-empty ``{doc_id: [finite value, doc_hash or null]}``."""
    remake = "remake the baseline with --update-baseline --paired"
    if not isinstance(samples, dict) or not samples:
        raise BaselineError(
            f"{path}: metric {name!r} field 'samples' must be a non-empty object of doc_id: [value, "
            f"doc_hash] (got {_short(samples)}); {remake}"
        )
    for doc, entry in samples.items():
        if not (
            isinstance(entry, list)
            and len(entry) == 2
            and number(entry[0])
            and (entry[1] is None or isinstance(entry[1], str))
        ):
            raise BaselineError(
                f"{path}: metric {name!r} field 'samples' has {_short(entry)} for doc_id {doc}: give "
                f"[finite value, doc_hash]; {remake}"
            )


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def baseline_from_run(
    run: Run,
    name: str,
    abs_tol: float = 0.0,
    k: float = 2.0,
    metrics: list[str] | None = None,
    rel_tol: float = 0.0,
    all_metrics: bool = False,
) -> dict:
    """A baseline of ``run``: its scores, every directed metric with ``all_metrics``, or the listed ``metrics``;
    ``rel_tol`` set on perplexities, ``abs_tol`` on the rest."""
    directed = [m for m in run.metrics if m in run.higher_is_better]
    chosen = metrics or [m for m in directed if all_metrics or (run.roles.get(m) != "bookkeeping" and not _cell(m))]
    uncomputed = [
        m for m in (metrics or run.absent) if m in run.absent and (all_metrics or run.roles.get(m) != "bookkeeping")
    ]
    if uncomputed:  # a baseline without them would never gate them again
        raise BaselineError(
            f"{run.path}: {uncomputed[0]} has no value in this run ({run.absent[uncomputed[0]]}): a "
            "baseline needs every score of the run; rerun it once that is fixed"
        )
    missing = [m for m in chosen if m not in run.metrics]
    if missing:
        raise BaselineError(f"{run.path}: no metric {missing[0]!r}")
    if not chosen:
        raise BaselineError(
            f"{run.path}: no score to gate on (only bookkeeping metrics: pass --all-metrics to gate on them)"
        )

    def spec(m: str) -> dict:
        role = run.roles.get(m, "score")
        return {
            "value": run.metrics[m],
            "stderr": run.stderrs.get(m),
            "higher_is_better": run.higher_is_better.get(m, True),
            "role": role,
            **({"abs_tol": 0.0, "rel_tol": rel_tol} if role == "perplexity" else {"abs_tol": abs_tol, "rel_tol": 0.0}),
        }

    tasks = sorted({m.split("/", 1)[0] for m in chosen} & set(run.configurations))
    baseline = {
        "name": name,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "source": str(run.path),
        "run": run.record.as_info()[keys.RUN],
        "tasks": {t: run.configurations[t] for t in tasks},
        "defaults": {"abs_tol": abs_tol, "rel_tol": rel_tol, "k": k},
        "metrics": {m: spec(m) for m in sorted(chosen)},
    }
    return check_baseline(baseline, f"the baseline of {run.path}")


def split_metric(name: str) -> tuple[str, str, str]:
    """``<task>/<metric>[,<filter>]`` -> (task, metric, filter); lm-eval's filter ``none`` when none is named."""
    task, _, rest = name.partition("/")
    metric, _, flt = rest.partition(",")
    return task, metric, flt or "none"


class LoggedSamples:
    """The samples files beside a run's results file, each read once, by task and filter: ``{str(doc_id): row}``."""

    def __init__(self, run: Run) -> None:
        self.files = samples_files(run.path)
        self._rows: dict[str, list[dict]] = {}

    def docs(self, task: str, flt: str) -> dict[str, dict] | None:
        """The task's documents of one filter; None when the run logged no samples of the task."""
        if task not in self.files:
            return None
        if task not in self._rows:
            self._rows[task] = read_rows(self.files[task])
        return {str(doc): row for doc, row in by_doc(self._rows[task], flt).items()}


def sample_value(row: dict, metric: str) -> float | None:
    """A sample's plain numeric value of ``metric`` (None: the sample does not hold it, e.g. another length's)."""
    value = row.get(metric)
    return float(value) if metric in (row.get("metrics") or ()) and number(value) else None


def attach_samples(baseline: dict, run: Run) -> list[str]:
    """Make ``baseline`` (of ``run``) paired: each ``score`` whose aggregate is the mean of its logged values (within
    :data:`MEAN_CHECK`) gets ``samples``: ``{doc_id: [value, doc_hash]}``. Returns notes on the metrics left on the
    aggregate gate; :class:`BaselineError` when the run logged no samples or none gives a metric its values."""
    found = LoggedSamples(run)
    if not found.files:
        raise BaselineError(
            f"{run.path}: --paired needs the run's samples (samples_<task>_*.jsonl beside it): run "
            "lm-eval with --log_samples"
        )
    notes, paired = [], 0
    for name, spec in baseline["metrics"].items():
        if spec.get("role") != "score":
            continue
        task, metric, flt = split_metric(name)
        docs = found.docs(task, flt)
        if docs is None:
            notes.append(f"{name}: no samples of {task} logged: gated on its aggregate")
            continue
        scores = {doc: v for doc, row in docs.items() if (v := sample_value(row, metric)) is not None}
        values = {doc: [v, docs[doc].get("doc_hash")] for doc, v in scores.items()}
        if not values:
            notes.append(f"{name}: no per-document values in the samples of {task}: gated on its aggregate")
            continue
        mean = sum(scores.values()) / len(scores)
        if abs(mean - float(spec["value"])) > MEAN_CHECK * max(1.0, abs(float(spec["value"]))):
            notes.append(
                f"{name}: its value {float(spec['value']):.6g} is not the mean of its {len(values)} samples "
                f"({mean:.6g}): gated on its aggregate"
            )
            continue
        spec[SAMPLES] = values
        paired += 1
    if not paired:
        raise BaselineError(
            f"{run.path}: --paired: no gated score has per-document values in the run's samples ("
            + "; ".join(notes or ["only perplexities and counts are gated"])
            + ")"
        )
    return notes


def _cell(metric: str) -> bool:
    """A depth x length cell (``<task>/depth_<D>_len_<L>``): gated only when listed or with ``all_metrics``."""
    return metric.split("/", 1)[-1].startswith(DEPTH_PREFIX)


def baseline_record(baseline: dict) -> RunRecord:
    """The run record a baseline keeps (an older baseline without one: every field unknown)."""
    saved = given_run if isinstance(given_run := baseline.get("run"), dict) else {}
    return RunRecord(**{k: None if saved.get(k) is None else str(saved[k]) for k in FIELDS})


def tolerance_words(baseline: dict) -> str:
    """What a baseline tolerates, in words (said when it is written)."""
    defaults = baseline.get("defaults") or {}
    roles = {spec.get("role") for spec in baseline["metrics"].values()}
    parts = []
    if "perplexity" in roles:
        parts.append(f"perplexities {max(float(defaults.get('rel_tol', 0)), NUMERIC_NOISE):.2%} of their value")
    if roles - {"perplexity"}:
        parts.append(f"scores {float(defaults.get('abs_tol', 0)):g} points")
    with_stderr = sum(bool(spec.get("stderr")) for spec in baseline["metrics"].values())
    words = (
        f"tolerances: {', '.join(parts)}, or {float(defaults.get('k', 2.0)):g} x stderr where there is one "
        f"({with_stderr} of {len(baseline['metrics'])} metrics), never under {NUMERIC_NOISE:g} of a value (numeric "
        "noise of a re-run on another core count or batch size); --rel-tol / --abs-tol widen them"
    )
    paired = sum(SAMPLES in spec for spec in baseline["metrics"].values())
    if paired:
        words += (
            f"\npaired: {paired} of {len(baseline['metrics'])} metrics keep their per-document values: a run that "
            "logs samples fails on them when its drop over the paired documents is significant (p < --alpha, "
            "0.05) and larger than --abs-tol / --rel-tol (0: any significant drop)"
        )
    return words
