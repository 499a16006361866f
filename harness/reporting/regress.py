"""``lch regress``: a run against a baseline, for CI; the rules in docs/ci-regression-gate.md. A metric regresses
when it moves its bad way by more than ``max(abs_tol, rel_tol * |b|, k * sqrt(s_b^2 + s_r^2), NUMERIC_NOISE * |b|)``;
paired, when its drop over the shared documents is significant (``p < alpha``) and over
``max(abs_tol, rel_tol * |b|)``. A metric missing from the run regresses."""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.core.errors import UsageError
from harness.metrics.paired import DEFAULT_ALPHA, DEFAULT_RESAMPLES, DEFAULT_SEED, PairedDifference, paired_difference
from harness.reporting.baseline import (
    NUMERIC_NOISE,
    SAMPLES,
    LoggedSamples,
    baseline_record,
    sample_value,
    split_metric,
)
from harness.reporting.comparability import SAME_CONFIGURATION, NotComparable, check_comparable, check_task_options
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


def compare(
    run: Run,
    baseline: dict,
    allow_mismatch: bool = False,
    alpha: float = DEFAULT_ALPHA,
    aggregate_only: bool = False,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> list[Comparison]:
    """Each baseline metric against the run, once it is of the baseline's configuration and task options
    (:class:`NotComparable` otherwise, unless ``allow_mismatch``); metrics with per-sample values are gated paired where
    the run logged their task's samples, unless ``aggregate_only``."""
    if not (number(alpha) and 0.0 < alpha < 1.0):
        raise UsageError(f"--alpha {alpha}: give a significance level in (0, 1), e.g. 0.05")
    if not allow_mismatch:
        check_comparable(
            {"baseline": baseline_record(baseline), "run": run.record}, SAME_CONFIGURATION, override="--allow-mismatch"
        )
        saved = given_tasks if isinstance(given_tasks := baseline.get("tasks"), dict) else {}  # older baselines: none
        check_task_options({"baseline": saved, "run": run.configurations}, override="--allow-mismatch")
    uncomputed = [name for name in sorted(baseline["metrics"]) if name in run.absent]
    if uncomputed:  # neither a regression nor a pass: the run has nothing to compare
        raise RunError(
            f"{run.path}: {uncomputed[0]} has no value in this run ({run.absent[uncomputed[0]]}): it cannot "
            "be gated; fix the run and run it again"
        )
    defaults = baseline.get("defaults") or {}
    found = None if aggregate_only else LoggedSamples(run)
    out = []
    for name, spec in sorted(baseline["metrics"].items()):
        abs_tol = float(spec.get("abs_tol", defaults.get("abs_tol", 0.0)))
        rel_tol = float(spec.get("rel_tol", defaults.get("rel_tol", 0.0)))
        k = float(spec.get("k", defaults.get("k", 2.0)))
        stderr = math.hypot(float(spec.get("stderr") or 0.0), float(run.stderrs.get(name) or 0.0))
        tolerance = max(
            abs_tol, rel_tol * abs(float(spec["value"])), k * stderr, NUMERIC_NOISE * abs(float(spec["value"]))
        )
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


def _paired_row(
    name: str,
    spec: dict,
    value: float,
    docs: dict[str, dict],
    tolerance: float,
    alpha: float,
    allow_mismatch: bool,
    resamples: int,
    seed: int,
) -> Comparison:
    """The paired gate of one metric on the run's documents ``docs`` ({doc_id: sample})."""
    metric = split_metric(name)[1]
    saved = spec[SAMPLES]
    mismatched = [
        doc
        for doc, (_, digest) in saved.items()
        if doc in docs
        and digest is not None
        and docs[doc].get("doc_hash") is not None
        and docs[doc]["doc_hash"] != digest
    ]
    if mismatched and not allow_mismatch:
        raise NotComparable(
            f"not comparable: {name}: {len(mismatched)} of the baseline's {len(saved)} documents are "
            f"other inputs in the run (doc_hash differs; first doc_id {mismatched[0]}) (compare runs "
            "of the same documents, or pass --allow-mismatch to gate on the others)"
        )
    left_out = set(mismatched)
    pairs = [
        (float(base), run_value)
        for doc, (base, _) in saved.items()
        if doc in docs and doc not in left_out and (run_value := sample_value(docs[doc], metric)) is not None
    ]
    notes = []
    if left_out:
        notes.append(f"{len(left_out)} documents left out (doc_hash differs from the baseline's)")
    if len(pairs) + len(left_out) < len(saved):
        notes.append(
            f"{len(saved) - len(pairs) - len(left_out)} of the baseline's {len(saved)} documents have no "
            f"{metric} in the run's samples"
        )
    if not pairs:
        return Comparison(name, spec["value"], value, tolerance, "missing", note="; ".join(notes))
    diff = paired_difference([a for a, _ in pairs], [b for _, b in pairs], alpha=alpha, resamples=resamples, seed=seed)
    assert diff.delta is not None  # pairs is not empty
    change = float(diff.delta) * (1 if spec["higher_is_better"] else -1)  # > 0: better
    significant = diff.p_value < alpha
    status = (
        "regressed"
        if significant and change < -tolerance
        else "improved"
        if significant and change > tolerance
        else "ok"
    )
    return Comparison(name, spec["value"], value, tolerance, status, paired=diff, note="; ".join(notes))


def exit_code(rows: list[Comparison]) -> int:
    return 1 if any(r.status in ("regressed", "missing") for r in rows) else 0
