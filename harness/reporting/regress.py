"""``lch regress``: compare a run with a baseline and gate CI on it.

Baseline JSON (``results/baselines/NAME.json``, see ``results/README.md``)::

    {"name": "...", "created": "...", "source": "<results file>", "run": {<run record>},
     "tasks": {"<task>": {<what the task measured with: its lch_configuration>}},
     "defaults": {"abs_tol": 0.0, "rel_tol": 0.0, "k": 2.0},
     "metrics": {"<task>/<metric>": {"value": 12.3, "stderr": 0.4, "higher_is_better": false,
                                      "role": "perplexity", "rel_tol": 0.01, "k": 2.0}}}

Which metrics: a baseline holds the run's scores (every metric with a direction whose task does not declare it
bookkeeping: ``harness.metrics.catalogue.metric_role``; token, document and sample counts describe the run, and a
change in them is no regression of the model), or every directed metric with ``all_metrics``, or those listed.

A metric regresses when it moves in its bad direction by more than its tolerance
``max(abs_tol, rel_tol * |baseline value|, k * stderr, NUMERIC_NOISE * |baseline value|)``: ``stderr`` is the
baseline's and the run's combined (``sqrt(s_b^2 + s_r^2)``, missing ones count 0); ``rel_tol`` is for perplexities
(a perplexity moves by a share of itself), ``abs_tol`` for scores, in the score's own units (points of a x100
accuracy); per-metric values override the defaults. :data:`NUMERIC_NOISE` is the floor under every tolerance: the
same checkpoint re-run with another thread count or batch size moves a perplexity by floating-point reassociation
alone (measured: ``benchmarks/gate_noise.py``), and a gate must not fail on that; metrics without a stderr (n = 1,
and perplexities, which lm-eval gives none) would otherwise be gated exactly.
A baseline metric absent from the run is a regression too (a gate must not pass on missing data); one the run holds
as NaN, or left out with a reason (``lch_absent``: its judge failed), makes the run unusable (exit 2): there is
nothing to compare. A baseline is never made of a run whose scores could not all be computed, and a hand-edited or
damaged baseline (a NaN value, ``higher_is_better`` not a boolean, a negative tolerance) is refused naming the field.

The baseline also keeps the run record of the run it was made from (``"run"``: :mod:`harness.core.run_record`); a run
whose configuration differs (:data:`harness.reporting.comparability.SAME_CONFIGURATION`: another architecture,
dtype, inference, length, chat template or seeds), or whose tasks measured with other options than the baseline's
(``"tasks"``: other LongPPL windows, other RULER lengths or sample counts, other documents by name:
:func:`harness.reporting.comparability.check_task_configurations`), is refused before any metric is compared
(exit 3) unless ``allow_mismatch``. Exit codes: 0 nothing regressed, 1 regression, 2 unusable input, 3 not comparable.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from harness.core.errors import DataFormatError
from harness.reporting.comparability import SAME_CONFIGURATION, check_comparable, check_task_configurations
from harness.reporting.runs import Run, RunError, read_json
from harness.core.run_record import FIELDS, RunRecord
from harness.core import results as keys


NUMERIC_NOISE = 1e-4  # the smallest tolerance of any metric, as a share of its baseline value (module docstring)


class BaselineError(DataFormatError):
    """A baseline file that cannot be used; the message names the file."""


@dataclass
class Comparison:
    metric: str
    baseline: float
    value: float | None
    tolerance: float
    status: str  # ok | improved | regressed | missing

    @property
    def delta(self) -> float | None:
        return None if self.value is None else self.value - self.baseline


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def load_baseline(path: str | Path) -> dict:
    """A baseline file, each field checked (a hand edit or a damaged file is one line naming the metric and the
    field): every metric has a finite numeric ``value`` and a boolean ``higher_is_better``; a ``stderr`` is null or a
    finite number >= 0; ``abs_tol`` / ``rel_tol`` / ``k`` (per metric or in ``defaults``) finite numbers >= 0."""
    path = Path(path)
    return check_baseline(read_json(path, BaselineError), str(path))


def check_baseline(data: object, where: str) -> dict:
    """:func:`load_baseline`'s checks of a baseline's content (``where``: how the messages name it), also made on a
    baseline about to be written (:func:`baseline_from_run`), so that none is written that could not be read."""
    path = where
    metrics = data.get("metrics") if isinstance(data, dict) else None
    if not isinstance(metrics, dict) or not metrics:
        raise BaselineError(f"{path}: no 'metrics' object")
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise BaselineError(f"{path}: 'defaults' must be an object")
    for name, spec in [("defaults", defaults), *metrics.items()]:
        if name != "defaults":
            if not isinstance(spec, dict) or not _number(spec.get("value")):
                raise BaselineError(f"{path}: metric {name!r} needs a finite numeric 'value' (got "
                                    f"{spec.get('value') if isinstance(spec, dict) else spec!r}); remake the baseline "
                                    "with --update-baseline")
            if not isinstance(spec.get("higher_is_better"), bool):
                raise BaselineError(f"{path}: metric {name!r} needs 'higher_is_better' true or false (got "
                                    f"{spec.get('higher_is_better')!r})")
            if spec.get("stderr") is not None and not (_number(spec["stderr"]) and spec["stderr"] >= 0):
                raise BaselineError(f"{path}: metric {name!r} has stderr {spec['stderr']!r}: give a finite number "
                                    ">= 0 or null")
        for key in ("abs_tol", "rel_tol", "k"):
            if key in spec and not (_number(spec[key]) and spec[key] >= 0):
                raise BaselineError(f"{path}: {name} {key} is {spec[key]!r}: give a finite number >= 0")
    return data


def baseline_from_run(run: Run, name: str, abs_tol: float = 0.0, k: float = 2.0, metrics: list[str] | None = None,
                      rel_tol: float = 0.0, all_metrics: bool = False) -> dict:
    """A baseline of ``run`` (module docstring): its scores, every directed metric with ``all_metrics``, or the
    listed ``metrics``; ``rel_tol`` set on perplexities, ``abs_tol`` on the rest."""
    directed = [m for m in run.metrics if m in run.higher_is_better]
    chosen = metrics or [m for m in directed if all_metrics or run.roles.get(m) != "bookkeeping"]
    uncomputed = [m for m in (metrics or run.absent) if m in run.absent and (all_metrics or run.roles.get(m) != "bookkeeping")]
    if uncomputed:  # a baseline without them would never gate them again
        raise BaselineError(f"{run.path}: {uncomputed[0]} has no value in this run ({run.absent[uncomputed[0]]}): a "
                            "baseline needs every score of the run; rerun it once that is fixed")
    missing = [m for m in chosen if m not in run.metrics]
    if missing:
        raise BaselineError(f"{run.path}: no metric {missing[0]!r}")
    if not chosen:
        raise BaselineError(f"{run.path}: no score to gate on (only bookkeeping metrics: pass --all-metrics to gate "
                            "on them)")

    def spec(m: str) -> dict:
        role = run.roles.get(m, "score")
        return {"value": run.metrics[m], "stderr": run.stderrs.get(m), "higher_is_better": run.higher_is_better.get(m, True),
                "role": role, **({"abs_tol": 0.0, "rel_tol": rel_tol} if role == "perplexity" else
                                 {"abs_tol": abs_tol, "rel_tol": 0.0})}

    tasks = sorted({m.split("/", 1)[0] for m in chosen} & set(run.configurations))
    baseline = {"name": name, "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "source": str(run.path),
                "run": run.record.as_info()[keys.RUN], "tasks": {t: run.configurations[t] for t in tasks},
                "defaults": {"abs_tol": abs_tol, "rel_tol": rel_tol, "k": k},
                "metrics": {m: spec(m) for m in sorted(chosen)}}
    return check_baseline(baseline, f"the baseline of {run.path}")


def baseline_record(baseline: dict) -> RunRecord:
    """The run record a baseline keeps (an older baseline without one: every field unknown)."""
    saved = baseline.get("run") if isinstance(baseline.get("run"), dict) else {}
    return RunRecord(**{k: None if saved.get(k) is None else str(saved[k]) for k in FIELDS})


def compare(run: Run, baseline: dict, allow_mismatch: bool = False) -> list[Comparison]:
    """Each baseline metric against the run (module docstring), once the run is of the baseline's configuration
    (:class:`~harness.reporting.comparability.NotComparable` otherwise, unless ``allow_mismatch``)."""
    if not allow_mismatch:
        check_comparable({"baseline": baseline_record(baseline), "run": run.record}, SAME_CONFIGURATION,
                         override="--allow-mismatch")
        saved = baseline.get("tasks") if isinstance(baseline.get("tasks"), dict) else {}  # older baselines: none
        check_task_configurations({"baseline": saved, "run": run.configurations})
    uncomputed = [name for name in sorted(baseline["metrics"]) if name in run.absent]
    if uncomputed:  # neither a regression nor a pass: the run has nothing to compare
        raise RunError(f"{run.path}: {uncomputed[0]} has no value in this run ({run.absent[uncomputed[0]]}): it cannot "
                       "be gated; fix the run and run it again")
    defaults = baseline.get("defaults") or {}
    out = []
    for name, spec in sorted(baseline["metrics"].items()):
        abs_tol = float(spec.get("abs_tol", defaults.get("abs_tol", 0.0)))
        rel_tol = float(spec.get("rel_tol", defaults.get("rel_tol", 0.0)))
        k = float(spec.get("k", defaults.get("k", 2.0)))
        stderr = math.hypot(float(spec.get("stderr") or 0.0), float(run.stderrs.get(name) or 0.0))
        tolerance = max(abs_tol, rel_tol * abs(float(spec["value"])), k * stderr,
                        NUMERIC_NOISE * abs(float(spec["value"])))
        value = run.metrics.get(name)
        if value is None:
            out.append(Comparison(name, spec["value"], None, tolerance, "missing"))
            continue
        change = (value - spec["value"]) * (1 if spec["higher_is_better"] else -1)  # > 0: better
        status = "regressed" if change < -tolerance else "improved" if change > tolerance else "ok"
        out.append(Comparison(name, spec["value"], value, tolerance, status))
    return out


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
    return (f"tolerances: {', '.join(parts)}, or {float(defaults.get('k', 2.0)):g} x stderr where there is one "
            f"({with_stderr} of {len(baseline['metrics'])} metrics), never under {NUMERIC_NOISE:g} of a value (numeric "
            "noise of a re-run on another core count or batch size); --rel-tol / --abs-tol widen them")


def format_table(rows: list[Comparison]) -> str:
    lines = [f"{'metric':50s} {'baseline':>12s} {'run':>12s} {'delta':>12s} {'tolerance':>10s}  status"]
    for r in rows:
        value = "" if r.value is None else f"{r.value:12.6g}"
        delta = "" if r.delta is None else f"{r.delta:+12.6g}"
        lines.append(f"{r.metric:50s} {r.baseline:12.6g} {value:>12s} {delta:>12s} {r.tolerance:10.4g}  {r.status}")
    return "\n".join(lines)


def exit_code(rows: list[Comparison]) -> int:
    return 1 if any(r.status in ("regressed", "missing") for r in rows) else 0


def junit_error(message: str, suite: str) -> str:
    """The JUnit report of a gate that could not compare (unusable input, exit 2; not comparable, exit 3): one
    test case in error with the reason, so that a CI reader sees why instead of no report."""
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name={quoteattr(suite)} tests="1" failures="0" '
            f'errors="1">\n<testcase classname={quoteattr(suite)} name="lch regress"><error message='
            f'{quoteattr(message)}>{escape(message)}</error></testcase>\n</testsuite>\n')


def junit_xml(rows: list[Comparison], suite: str) -> str:
    """One test case per metric; regressions and missing metrics are failures."""
    failures = sum(r.status in ("regressed", "missing") for r in rows)
    cases = []
    for r in rows:
        case = f"<testcase classname={quoteattr(suite)} name={quoteattr(r.metric)}"
        if r.status in ("regressed", "missing"):
            message = (f"{r.metric} missing from the run" if r.value is None else
                       f"{r.metric}: {r.value:.6g} vs baseline {r.baseline:.6g} (delta {r.delta:+.6g}, tolerance {r.tolerance:.4g})")
            case += f"><failure message={quoteattr(message)}>{escape(message)}</failure></testcase>"
        else:
            case += "/>"
        cases.append(case)
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name={quoteattr(suite)} tests="{len(rows)}" '
            f'failures="{failures}" errors="0">\n' + "\n".join(cases) + "\n</testsuite>\n")
