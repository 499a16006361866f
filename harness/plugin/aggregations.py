"""Aggregations that refuse to report a meaningless number: a perplexity over no scored token is an error
that says what to do, not a NaN with exit 0; and, after a run, the cautions of a metric that rests on a handful of
items (a LongPPL over 12 key tokens, a score over 1 sample: :mod:`harness.metrics.support`) written into the
results and the log."""

from __future__ import annotations

import logging
import math
from typing import Sequence

from harness.core.errors import UsageError
from harness.metrics.pooling import pooled_perplexity
from harness.metrics.support import results_cautions
from harness.core import results as keys

log = logging.getLogger(__name__)


def perplexity(items: Sequence[tuple[float, float]]) -> float:
    """:func:`harness.metrics.pooling.pooled_perplexity` of the documents' ``(nll_sum, n_tokens)``; raises
    when no document had a token to score (every document empty, or skipped by ``min_tokens``)."""
    if not any(n for _, n in items):
        raise UsageError(f"none of the {len(items)} documents could be scored (each was empty or shorter than "
                         "min_tokens; docs_skipped counts them): give longer documents or lower min_tokens")
    return pooled_perplexity(items)


def key_perplexity(items: Sequence[tuple[float, float]]) -> float:
    """LongPPL: :func:`harness.metrics.pooling.pooled_perplexity` of the documents' ``(key nll_sum, n_key)``.
    No key token in any document is an error (a LongPPL of nothing, never NaN); fewer than
    :data:`~harness.longppl.formulas.MIN_KEY_TOKENS` is a caution in the results (:func:`record_cautions`; the count
    is ``n_key_tokens``)."""
    n_key = sum(n for _, n in items)
    if not n_key:
        raise UsageError(f"LongPPL has no key token in any of the {len(items)} documents under the evaluated "
                         "tokenizer (key_spans_dropped counts the evaluator's spans no evaluated token lies inside): "
                         "LongPPL means nothing here; give longer documents or lower trunc_len / sliding_window")
    return pooled_perplexity(items)


def record_cautions(results: dict) -> dict[str, list[str]]:
    """The cautions of a run (:func:`harness.metrics.support.results_cautions`) written into lm-eval's results object
    under :data:`harness.core.results.CAUTIONS` (``{}``: checked, none) and logged as warnings."""
    found = results_cautions(results)
    results[keys.CAUTIONS] = found
    for sentences in found.values():
        for sentence in sentences:
            log.warning("caution: %s", sentence)
    return found


def record_effective_lengths(results: dict) -> dict[str, dict]:
    """The effective context length of every task and group with ``len_<L>`` scores in lm-eval's results object
    (:func:`harness.metrics.context_length.effective_lengths`, at the threshold the task declared in its options,
    ``effective_threshold``; a group's when its tasks share one), written under
    :data:`harness.core.results.EFFECTIVE_LENGTH` as ``{task: {"absolute": {...}, "relative": {...}}}``; a curve not
    monotone within its intervals adds its caution to the task's cautions."""
    from dataclasses import asdict

    from harness.data.lengths import length_tokens
    from harness.metrics.context_length import RULER_THRESHOLD, curve_points, effective_lengths

    metrics: dict[str, float] = {}
    stderrs: dict[str, float] = {}
    for task, values in (results.get("results") or {}).items():
        for key, value in (values or {}).items() if isinstance(values, dict) else ():
            name, _, flt = str(key).partition(",")
            if flt != "none" or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if name.endswith("_stderr"):
                stderrs[f"{task}/{name[:-len('_stderr')]}"] = float(value)
            else:
                metrics[f"{task}/{name}"] = float(value)
    subtasks = {str(g): [str(t) for t in ts] for g, ts in (results.get("group_subtasks") or {}).items()
                if isinstance(ts, list)}
    configs = results.get("configs") or {}

    def threshold(task: str) -> float:
        declared = {(((configs.get(t) or {}).get("metadata") or {}).get("effective_threshold"))
                    for t in subtasks.get(task) or [task]}
        value = declared.pop() if len(declared) == 1 else None
        return float(value) if isinstance(value, (int, float)) else RULER_THRESHOLD

    out: dict[str, dict] = {}
    for task in sorted({m.split("/", 1)[0] for m in metrics}):
        found = effective_lengths(curve_points(task, metrics, stderrs, subtasks, length_tokens), threshold(task))
        if found is None:
            continue
        out[task] = {length.kind: asdict(length) for length in found}
        caution = found[0].caution
        if caution:
            results.setdefault(keys.CAUTIONS, {}).setdefault(task, []).append(f"{task} effective length: {caution}")
            log.warning("caution: %s effective length: %s", task, caution)
    results[keys.EFFECTIVE_LENGTH] = out
    return out


_incomplete: list[str] = []  # what a run of this process could not compute for a failed service (report_incomplete)


def report_incomplete(message: str) -> None:
    """Say that the current run could not compute a metric it was asked for because a service failed it (a judge
    server): its results are still written (the metric absent, with the reason), then its command ends with this
    message as one ``lch: error:`` line and exit 2 (:func:`take_incomplete`)."""
    log.warning("%s", message)
    _incomplete.append(message)


def take_incomplete() -> list[str]:
    """The messages of :func:`report_incomplete` since the last call (emptied)."""
    found = list(_incomplete)
    _incomplete.clear()
    return found


def raise_if_incomplete() -> None:
    """After a command has written its results: :class:`~harness.core.errors.IncompleteError` (one line, exit 2) with
    what :func:`report_incomplete` said since the last call, if anything."""
    failed = take_incomplete()
    if failed:
        from harness.core.errors import IncompleteError

        raise IncompleteError("; ".join(failed))


def _finite(value: object) -> bool:
    return not isinstance(value, float) or math.isfinite(value)


def drop_absent(results: dict) -> dict[str, dict[str, str]]:
    """Every metric of lm-eval's results object whose value is not a finite number (NaN, inf: it could not be
    computed) taken out, its stderr with it, and recorded under :data:`harness.core.results.ABSENT` with its reason: the one the task
    gave in its metadata (``lch_absent``, e.g. the judge's failures), else that it is not a number. A group whose
    score averages an absent metric loses it too (lm-eval's mean of a NaN). Returns ``{task: {metric: reason}}``."""
    absent: dict[str, dict[str, str]] = {}
    configs = results.get("configs") or {}
    for section in ("results", "groups"):
        for task, values in (results.get(section) or {}).items():
            if not isinstance(values, dict):
                continue
            metadata = ((configs.get(task) or {}).get("metadata") or {}) if isinstance(configs.get(task), dict) else {}
            reasons = metadata.get(keys.ABSENT) if isinstance(metadata.get(keys.ABSENT), dict) else {}
            for key in [k for k, v in values.items() if "," in k and not _finite(v)]:
                metric, _, flt = key.partition(",")
                if metric.endswith("_stderr"):
                    values[key] = "N/A"  # lm-eval's word for a stderr it has not
                    continue
                values.pop(key)
                values.pop(f"{metric}_stderr,{flt}", None)
                why = reasons.get(metric) or "not a number: it could not be computed from these samples"
                absent.setdefault(str(task), {})[metric] = str(why)
    return absent


def finish_results(results: dict) -> dict:
    """What a run of ours does to lm-eval's results object before its caller writes it: the cautions
    (:func:`record_cautions`), and no number that could not be computed (:func:`drop_absent`: the metric left out,
    the reason under ``lch_absent``, ``{}`` when every metric was computed), and the device the model ran on as the
    config's ``device`` (lm-eval's ``--device`` as asked kept under ``lch_device_asked`` where it differs)."""
    absent = drop_absent(results)
    results[keys.ABSENT] = absent
    for task, metrics in absent.items():
        for metric, why in metrics.items():
            log.warning("%s/%s left out of the results: %s", task, metric, why)
    record_cautions(results)
    record_effective_lengths(results)
    config = results.get("config")
    ran_on = (config.get(keys.RUN) or {}).get("device") if isinstance(config, dict) else None
    if ran_on and config.get("device") != ran_on:  # lm-eval records its --device (cuda:0 by default, on a CPU too)
        config[keys.DEVICE_ASKED], config["device"] = config.get("device"), ran_on
    return results
