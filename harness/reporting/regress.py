"""``lch regress``: compare a run with a baseline and gate CI on it.

Baseline JSON (``results/baselines/NAME.json``, see ``results/README.md``)::

    {"name": "...", "created": "...", "source": "<results file>", "run": {<run record>},
     "tasks": {"<task>": {<what the task measured with: its lch_configuration>}},
     "defaults": {"abs_tol": 0.0, "rel_tol": 0.0, "k": 2.0},
     "metrics": {"<task>/<metric>": {"value": 12.3, "stderr": 0.4, "higher_is_better": false,
                                      "role": "perplexity", "rel_tol": 0.01, "k": 2.0}}}

Which metrics: a baseline holds the run's scores (every metric with a direction whose task does not declare it
bookkeeping: ``harness.metrics.catalogue.metric_role``; token, document and sample counts describe the run, and a
change in them is no regression of the model; nor the depth x length cells, a breakdown of ``len_<L>`` on a few
samples each), or every directed metric with ``all_metrics``, or those listed.

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

**Paired gate** (``--update-baseline --paired``). A baseline made from a run that logged its samples
(``--log_samples``) also keeps, for each gated metric of the role ``score`` whose aggregate is the mean of its
per-document values, those values by document (:func:`attach_samples`)::

    "metrics": {"<task>/<metric>": {..., "samples": {"<doc_id>": [<value>, "<doc_hash>"], ...}}}

(a metric whose aggregate is no mean of its samples, such as a corpus BLEU, a perplexity pooled over tokens, or one
of a task that logged no samples, keeps the aggregate gate). A run that logged samples is then gated on the
documents it shares with the baseline, paired by ``doc_id`` (:mod:`harness.metrics.paired`): the paired
difference ``delta = mean(run - baseline)`` over the pairs (a per-length metric ``len_<L>``: the documents of that
length only, those whose sample holds it), its 95 % percentile-bootstrap interval (10,000 resamples, seed 0), the
p-value of the exact McNemar test (two-valued scores: 0/1, 0/100) or of the Wilcoxon signed-rank test, and the
minimum detectable effect at that n (alpha 0.05, power 0.8). The metric regresses when its drop is significant
(``p < alpha``, ``alpha`` 0.05 unless told) AND larger than its declared tolerance ``max(abs_tol, rel_tol * |baseline
value|)`` (0: any significant drop fails); the stderr multiple ``k`` and the numeric-noise floor have no part in it
(the test is what tells noise from a change). A document whose ``doc_hash`` differs from the baseline's is another
input: the run is refused, exit 3, naming the task and the first such document (``allow_mismatch`` leaves those
documents out and gates on the others). A run that logged no samples of a task is gated on that task's aggregates
as above, and the row says so (``note``); so is every metric with ``aggregate_only``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from harness.core.errors import DataFormatError, UsageError
from harness.metrics.catalogue import DEPTH_PREFIX
from harness.metrics.paired import DEFAULT_ALPHA, DEFAULT_RESAMPLES, DEFAULT_SEED, PairedDifference, paired_difference
from harness.reporting.comparability import SAME_CONFIGURATION, NotComparable, check_comparable, check_task_configurations
from harness.reporting.runs import Run, RunError, read_json
from harness.reporting.samples import by_doc, number, read_rows, samples_files
from harness.core.run_record import FIELDS, RunRecord
from harness.core import results as keys


NUMERIC_NOISE = 1e-4  # the smallest tolerance of any metric, as a share of its baseline value (module docstring)
SAMPLES = "samples"  # a metric's per-document values in a paired baseline: {doc_id: [value, doc_hash]}
MEAN_CHECK = 1e-6  # a metric is gated paired when its aggregate is the mean of its samples within this share


class BaselineError(DataFormatError):
    """A baseline file that cannot be used; the message names the file."""


@dataclass
class Comparison:
    metric: str
    baseline: float
    value: float | None
    tolerance: float
    status: str  # ok | improved | regressed | missing
    paired: PairedDifference | None = None  # the paired gate's numbers (run - baseline over shared documents)
    note: str = ""  # why a metric of a paired baseline was gated otherwise, or what the pairing left out

    @property
    def delta(self) -> float | None:
        """The run's value minus the baseline's: over the paired documents when the row is paired."""
        if self.paired is not None:
            return self.paired.delta
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
            if SAMPLES in spec:
                _check_samples(path, name, spec[SAMPLES])
        for key in ("abs_tol", "rel_tol", "k"):
            if key in spec and not (_number(spec[key]) and spec[key] >= 0):
                raise BaselineError(f"{path}: {name} {key} is {spec[key]!r}: give a finite number >= 0")
    return data


def _check_samples(path: str, name: str, samples: object) -> None:
    """A paired baseline's ``samples`` field of one metric: a non-empty object of doc_id -> [finite value,
    doc_hash string or null]."""
    remake = "remake the baseline with --update-baseline --paired"
    if not isinstance(samples, dict) or not samples:
        raise BaselineError(f"{path}: metric {name!r} field 'samples' must be a non-empty object of doc_id: [value, "
                            f"doc_hash] (got {_short(samples)}); {remake}")
    for doc, entry in samples.items():
        if not (isinstance(entry, list) and len(entry) == 2 and _number(entry[0])
                and (entry[1] is None or isinstance(entry[1], str))):
            raise BaselineError(f"{path}: metric {name!r} field 'samples' has {_short(entry)} for doc_id {doc}: give "
                                f"[finite value, doc_hash]; {remake}")


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def baseline_from_run(run: Run, name: str, abs_tol: float = 0.0, k: float = 2.0, metrics: list[str] | None = None,
                      rel_tol: float = 0.0, all_metrics: bool = False) -> dict:
    """A baseline of ``run`` (module docstring): its scores, every directed metric with ``all_metrics``, or the
    listed ``metrics``; ``rel_tol`` set on perplexities, ``abs_tol`` on the rest."""
    directed = [m for m in run.metrics if m in run.higher_is_better]
    chosen = metrics or [m for m in directed if all_metrics or (run.roles.get(m) != "bookkeeping" and not _cell(m))]
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


def _split(name: str) -> tuple[str, str, str]:
    """``<task>/<metric>[,<filter>]`` -> (task, metric, filter); lm-eval's filter ``none`` when none is named."""
    task, _, rest = name.partition("/")
    metric, _, flt = rest.partition(",")
    return task, metric, flt or "none"


class _RunSamples:
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


def _values(row: dict, metric: str) -> float | None:
    """A sample's plain numeric value of ``metric`` (None: the sample does not hold it, e.g. another length's)."""
    value = row.get(metric)
    return float(value) if metric in (row.get("metrics") or ()) and number(value) else None


def attach_samples(baseline: dict, run: Run) -> list[str]:
    """Make ``baseline`` (of ``run``) paired (module docstring): each metric of the role ``score`` whose task logged
    samples and whose aggregate is the mean of its per-document values (within :data:`MEAN_CHECK` of it) gets
    ``samples``: ``{doc_id: [value, doc_hash]}``. The notes say which metrics keep the aggregate gate and why; a
    run with no samples beside its results file, or none that give a metric its values, is refused (BaselineError)."""
    found = _RunSamples(run)
    if not found.files:
        raise BaselineError(f"{run.path}: --paired needs the run's samples (samples_<task>_*.jsonl beside it): run "
                            "lm-eval with --log_samples")
    notes, paired = [], 0
    for name, spec in baseline["metrics"].items():
        if spec.get("role") != "score":
            continue
        task, metric, flt = _split(name)
        docs = found.docs(task, flt)
        if docs is None:
            notes.append(f"{name}: no samples of {task} logged: gated on its aggregate")
            continue
        values = {doc: [v, row.get("doc_hash")] for doc, row in docs.items() if (v := _values(row, metric)) is not None}
        if not values:
            notes.append(f"{name}: no per-document values in the samples of {task}: gated on its aggregate")
            continue
        mean = sum(v for v, _ in values.values()) / len(values)
        if abs(mean - float(spec["value"])) > MEAN_CHECK * max(1.0, abs(float(spec["value"]))):
            notes.append(f"{name}: its value {float(spec['value']):.6g} is not the mean of its {len(values)} samples "
                         f"({mean:.6g}): gated on its aggregate")
            continue
        spec[SAMPLES] = values
        paired += 1
    if not paired:
        raise BaselineError(f"{run.path}: --paired: no gated score has per-document values in the run's samples ("
                            + "; ".join(notes or ["only perplexities and counts are gated"]) + ")")
    return notes


def _cell(metric: str) -> bool:
    """A depth x length cell (``<task>/depth_<D>_len_<L>``): a breakdown of ``len_<L>`` on a few samples, gated only
    when listed or with ``all_metrics`` (``len_<L>`` itself is)."""
    return metric.split("/", 1)[-1].startswith(DEPTH_PREFIX)


def baseline_record(baseline: dict) -> RunRecord:
    """The run record a baseline keeps (an older baseline without one: every field unknown)."""
    saved = baseline.get("run") if isinstance(baseline.get("run"), dict) else {}
    return RunRecord(**{k: None if saved.get(k) is None else str(saved[k]) for k in FIELDS})


def compare(run: Run, baseline: dict, allow_mismatch: bool = False, alpha: float = DEFAULT_ALPHA,
            aggregate_only: bool = False, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> list[Comparison]:
    """Each baseline metric against the run (module docstring), once the run is of the baseline's configuration
    (:class:`~harness.reporting.comparability.NotComparable` otherwise, unless ``allow_mismatch``). Metrics with
    per-sample values in the baseline are gated paired (level ``alpha``; bootstrap ``resamples`` and ``seed``) where
    the run logged samples of their task, unless ``aggregate_only``."""
    if not (_number(alpha) and 0.0 < alpha < 1.0):
        raise UsageError(f"--alpha {alpha}: give a significance level in (0, 1), e.g. 0.05")
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
    found = None if aggregate_only else _RunSamples(run)
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
        note = ""
        if SAMPLES in spec and found is not None:
            task, _, flt = _split(name)
            docs = found.docs(task, flt)
            if docs is not None:
                declared = max(abs_tol, rel_tol * abs(float(spec["value"])))
                out.append(_paired_row(name, spec, value, docs, declared, alpha, allow_mismatch, resamples, seed))
                continue
            note = f"the run logged no samples of {task}: gated on the aggregate"
        change = (value - spec["value"]) * (1 if spec["higher_is_better"] else -1)  # > 0: better
        status = "regressed" if change < -tolerance else "improved" if change > tolerance else "ok"
        out.append(Comparison(name, spec["value"], value, tolerance, status, note=note))
    return out


def _paired_row(name: str, spec: dict, value: float, docs: dict[str, dict], tolerance: float, alpha: float,
                allow_mismatch: bool, resamples: int, seed: int) -> Comparison:
    """The paired gate of one metric (module docstring) on the run's documents ``docs`` ({doc_id: sample})."""
    metric = _split(name)[1]
    saved = spec[SAMPLES]
    mismatched = [doc for doc, (_, digest) in saved.items() if doc in docs and digest is not None
                  and docs[doc].get("doc_hash") is not None and docs[doc]["doc_hash"] != digest]
    if mismatched and not allow_mismatch:
        raise NotComparable(f"not comparable: {name}: {len(mismatched)} of the baseline's {len(saved)} documents are "
                            f"other inputs in the run (doc_hash differs; first doc_id {mismatched[0]}) (compare runs "
                            "of the same documents, or pass --allow-mismatch to gate on the others)")
    left_out = set(mismatched)
    pairs = [(float(base), run_value) for doc, (base, _) in saved.items()
             if doc in docs and doc not in left_out and (run_value := _values(docs[doc], metric)) is not None]
    notes = []
    if left_out:
        notes.append(f"{len(left_out)} documents left out (doc_hash differs from the baseline's)")
    if len(pairs) + len(left_out) < len(saved):
        notes.append(f"{len(saved) - len(pairs) - len(left_out)} of the baseline's {len(saved)} documents have no "
                     f"{metric} in the run's samples")
    if not pairs:
        return Comparison(name, spec["value"], value, tolerance, "missing", note="; ".join(notes))
    diff = paired_difference([a for a, _ in pairs], [b for _, b in pairs], alpha=alpha, resamples=resamples, seed=seed)
    change = float(diff.delta) * (1 if spec["higher_is_better"] else -1)  # > 0: better
    significant = diff.p_value < alpha
    status = ("regressed" if significant and change < -tolerance else
              "improved" if significant and change > tolerance else "ok")
    return Comparison(name, spec["value"], value, tolerance, status, paired=diff, note="; ".join(notes))


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
    words = (f"tolerances: {', '.join(parts)}, or {float(defaults.get('k', 2.0)):g} x stderr where there is one "
             f"({with_stderr} of {len(baseline['metrics'])} metrics), never under {NUMERIC_NOISE:g} of a value (numeric "
             "noise of a re-run on another core count or batch size); --rel-tol / --abs-tol widen them")
    paired = sum(SAMPLES in spec for spec in baseline["metrics"].values())
    if paired:
        words += (f"\npaired: {paired} of {len(baseline['metrics'])} metrics keep their per-document values: a run that "
                  "logs samples fails on them when its drop over the paired documents is significant (p < --alpha, "
                  "0.05) and larger than --abs-tol / --rel-tol (0: any significant drop)")
    return words


def format_table(rows: list[Comparison]) -> str:
    """The gate's table; with a paired row, the paired columns too (95 % interval of the delta, p, MDE, n; empty
    for rows gated on aggregates), and the rows' notes below it."""
    if not any(r.paired is not None for r in rows):
        lines = [f"{'metric':50s} {'baseline':>12s} {'run':>12s} {'delta':>12s} {'tolerance':>10s}  status"]
        for r in rows:
            value = "" if r.value is None else f"{r.value:12.6g}"
            delta = "" if r.delta is None else f"{r.delta:+12.6g}"
            lines.append(f"{r.metric:50s} {r.baseline:12.6g} {value:>12s} {delta:>12s} {r.tolerance:10.4g}  {r.status}")
        return "\n".join(lines + [f"note: {r.metric}: {r.note}" for r in rows if r.note])
    lines = [f"{'metric':40s} {'baseline':>10s} {'run':>10s} {'delta':>10s} {'95% interval':>22s} {'p':>9s} "
             f"{'MDE':>9s} {'n':>6s} {'tolerance':>9s}  status"]
    for r in rows:
        value = "" if r.value is None else f"{r.value:10.6g}"
        delta = "" if r.delta is None else f"{r.delta:+10.4g}"
        d = r.paired
        interval = "" if d is None or d.low is None else f"[{d.low:+.4g}, {d.high:+.4g}]"
        p = "" if d is None else f"{d.p_value:9.3g}"
        mde = "" if d is None or d.mde is None else f"{d.mde:9.3g}"
        n = "" if d is None else str(d.n)
        status = r.status if d is not None or r.status == "missing" else f"{r.status} (aggregate)"
        lines.append(f"{r.metric:40s} {r.baseline:10.6g} {value:>10s} {delta:>10s} {interval:>22s} {p:>9s} {mde:>9s} "
                     f"{n:>6s} {r.tolerance:9.4g}  {status}")
    return "\n".join(lines + [f"note: {r.metric}: {r.note}" for r in rows if r.note])


def _text(value: object) -> str:
    return "" if value is None else f"{value:.6g}" if isinstance(value, float) else str(value)


def _paired_words(r: Comparison) -> str:
    d = r.paired
    interval = "" if d.low is None else f", {d.confidence:.0%} interval [{d.low:+.4g}, {d.high:+.4g}]"
    mde = "" if d.mde is None else f", MDE {d.mde:.3g}"
    return (f"paired delta {d.delta:+.6g} (run - baseline) over n={d.n} documents{interval}, p={d.p_value:.3g} "
            f"({d.test}, alpha {d.alpha:g}){mde}, tolerance {r.tolerance:.4g}: {r.status}")


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
        words = _paired_words(r) if r.paired is not None else ""
        inner = ""
        if r.paired is not None:
            d = r.paired
            properties = {"delta": d.delta, "ci_low": d.low, "ci_high": d.high, "confidence": d.confidence,
                          "p_value": d.p_value, "test": d.test, "mde": d.mde, "n": d.n, "alpha": d.alpha,
                          "tolerance": r.tolerance}
            inner += "<properties>" + "".join(f"<property name={quoteattr(k)} value={quoteattr(_text(v))}/>"
                                              for k, v in properties.items()) + "</properties>"
        if r.status in ("regressed", "missing"):
            if r.value is None:
                message = f"{r.metric} missing from the run"
            elif r.paired is not None:
                message = f"{r.metric}: {words}"
            elif r.status == "missing":
                message = f"{r.metric}: no paired document ({r.note})"
            else:
                message = (f"{r.metric}: {r.value:.6g} vs baseline {r.baseline:.6g} (delta {r.delta:+.6g}, tolerance "
                           f"{r.tolerance:.4g})")
            inner += f"<failure message={quoteattr(message)}>{escape(message)}</failure>"
        if words or r.note:
            inner += f"<system-out>{escape('; '.join(w for w in (words, r.note) if w))}</system-out>"
        cases.append(case + (f">{inner}</testcase>" if inner else "/>"))
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name={quoteattr(suite)} tests="{len(rows)}" '
            f'failures="{failures}" errors="0">\n' + "\n".join(cases) + "\n</testsuite>\n")
