"""``lch regress``: compare a run with a baseline (:mod:`harness.reporting.baseline`, its format) and gate CI on
it; the table and JUnit XML a gate prints: :mod:`harness.reporting.gate_report`.

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
from dataclasses import dataclass

from harness.core.errors import UsageError
from harness.metrics.paired import DEFAULT_ALPHA, DEFAULT_RESAMPLES, DEFAULT_SEED, PairedDifference, paired_difference
from harness.reporting.baseline import (NUMERIC_NOISE, SAMPLES, RunSamples, baseline_record, sample_value,
                                        split_metric)
from harness.reporting.comparability import SAME_CONFIGURATION, NotComparable, check_comparable, check_task_configurations
from harness.reporting.runs import Run, RunError
from harness.reporting.samples import number


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


def compare(run: Run, baseline: dict, allow_mismatch: bool = False, alpha: float = DEFAULT_ALPHA,
            aggregate_only: bool = False, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> list[Comparison]:
    """Each baseline metric against the run (module docstring), once the run is of the baseline's configuration
    (:class:`~harness.reporting.comparability.NotComparable` otherwise, unless ``allow_mismatch``). Metrics with
    per-sample values in the baseline are gated paired (level ``alpha``; bootstrap ``resamples`` and ``seed``) where
    the run logged samples of their task, unless ``aggregate_only``."""
    if not (number(alpha) and 0.0 < alpha < 1.0):
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
    found = None if aggregate_only else RunSamples(run)
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
            task, _, flt = split_metric(name)
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
    metric = split_metric(name)[1]
    saved = spec[SAMPLES]
    mismatched = [doc for doc, (_, digest) in saved.items() if doc in docs and digest is not None
                  and docs[doc].get("doc_hash") is not None and docs[doc]["doc_hash"] != digest]
    if mismatched and not allow_mismatch:
        raise NotComparable(f"not comparable: {name}: {len(mismatched)} of the baseline's {len(saved)} documents are "
                            f"other inputs in the run (doc_hash differs; first doc_id {mismatched[0]}) (compare runs "
                            "of the same documents, or pass --allow-mismatch to gate on the others)")
    left_out = set(mismatched)
    pairs = [(float(base), run_value) for doc, (base, _) in saved.items()
             if doc in docs and doc not in left_out and (run_value := sample_value(docs[doc], metric)) is not None]
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


def exit_code(rows: list[Comparison]) -> int:
    return 1 if any(r.status in ("regressed", "missing") for r in rows) else 0
