"""Runs that scored different samples: the caution every board gives (:func:`sample_set_cautions`, from the results
only) and ``lch leaderboard --common`` (:func:`on_common_samples`, from the logged samples)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.errors import UsageError
from harness.core.run_files import judgements_path
from harness.data.depth import length_of_metric
from harness.data.documents import read_jsonl
from harness.metrics.catalogue import COUNT_PREFIX, metric_role
from harness.metrics.common_samples import (
    doc_value,
    group_leaves,
    group_value,
    mean_stderr,
    pooled_value,
    scored_values,
)
from harness.metrics.context_length import is_curve_caution
from harness.metrics.pooling import RULES
from harness.metrics.support import is_support_caution, task_cautions
from harness.reporting.runs import Run, count_of
from harness.reporting.samples import read_rows, samples_files

# counts in the results of what a run left unscored: runs that differ in them scored other samples
UNSCORED_COUNTS = ("n_skipped", "docs_skipped", "n_valid")
COMMON_FLAG = "lch leaderboard --common"

Docs = dict[Any, Any]  # doc_id -> value (a number or a (sum, count) pair): one metric's logged values


def sample_set_cautions(runs: list[Run]) -> dict[Path, list[str]]:
    """``{a run's results file: [caution]}``: per task whose runs scored different documents (``lch_scored``, else the
    counts of what they left unscored), one sentence naming the metrics and their range of documents."""
    out: dict[Path, list[str]] = {}
    for task in sorted({task for run in runs for task in [*run.samples, *run.scored]}):
        holders = [i for i, run in enumerate(runs) if task in run.samples or task in run.scored]
        if len(holders) < 2:
            continue
        differ: dict[str, list[int]] = {}  # metric -> its counts in the runs
        recorded = [i for i in holders if task in runs[i].scored]
        for key in sorted({k for i in recorded for k in runs[i].scored[task]}):
            signatures = {
                i: (
                    int(runs[i].scored[task].get(key, {}).get("n", 0)),
                    str(runs[i].scored[task].get(key, {}).get("digest", "")),
                )
                for i in recorded
            }
            if len(set(signatures.values())) > 1:
                differ[_name(key)] = [n for n, _ in signatures.values()]
        for count in UNSCORED_COUNTS:
            values = {i: runs[i].metrics[f"{task}/{count}"] for i in holders if f"{task}/{count}" in runs[i].metrics}
            if len(set(values.values())) > 1:
                differ[count] = [int(v) for v in values.values()]
        if not differ:
            continue
        sentence = (
            f"{task}: the runs scored different samples ({_differences(differ)}); `{COMMON_FLAG}` compares "
            "them on the samples every run scored"
        )
        for i in holders:
            out.setdefault(runs[i].path, []).append(sentence)
    return out


def _differences(differ: dict[str, list[int]]) -> str:
    """``em, f1 on 10 to 17 documents; n_skipped 0 to 7``: scores by range of documents, then unscored counts."""
    ranges: dict[tuple[int, int], list[str]] = {}
    for name in sorted(m for m in differ if m not in UNSCORED_COUNTS):
        ranges.setdefault((min(differ[name]), max(differ[name])), []).append(name)
    parts = [
        f"{', '.join(names[:3])}{', ...' if len(names) > 3 else ''} on {low}"
        + (f" to {high}" if high != low else "")
        + " documents"
        for (low, high), names in sorted(ranges.items())
    ]
    parts += [f"{name} {min(differ[name])} to {max(differ[name])}" for name in UNSCORED_COUNTS if name in differ]
    return "; ".join(parts)


def _is_bookkeeping(name: str) -> bool:
    return metric_role(name.partition(",")[0]) == "bookkeeping"


def _name(key: str) -> str:
    """A results key ``<metric>,<filter>`` as the board names the metric (filter ``none`` dropped)."""
    metric, _, flt = key.partition(",")
    return metric if flt in ("", "none") else key


def logged_values(run: Run) -> dict[str, dict[str, Docs]]:
    """``{task: {metric name: {doc_id: value}}}`` of a run's logged samples, the per-sample judged
    ``quality`` of ``lch judge``'s judgements beside them included; a run that logged none is refused."""
    files = samples_files(run.path)
    if not files:
        raise UsageError(
            f"{run.path.parent}: no samples_*.jsonl beside {run.path.name}; comparing on common samples "
            "reads them: run lm-eval with --log_samples"
        )
    out: dict[str, dict[str, Docs]] = {}
    for task, path in files.items():
        rows = read_rows(path)
        values = {_name(key): docs for key, docs in scored_values(rows).items()}
        judged = judgements_path(path)
        if judged.is_file():
            quality = {
                row.get("doc_id"): doc_value(row.get("quality")) for row in read_jsonl(judged, "a judgements file")
            }
            values["quality"] = {doc: q for doc, q in quality.items() if q is not None}
        out[task] = values
    return out


@dataclass
class _Recomputed:
    metrics: dict[str, float] = field(default_factory=dict)
    stderrs: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # "<task>/<metric>" -> documents it rests on


def on_common_samples(runs: list[Run]) -> tuple[list[Run], list[str]]:
    """``(runs, notes)``: copies of the runs with each metric recomputed on the documents every run holding its task
    scored by its pooling rule (a mean's stderr too), its count as ``<task>/n_<metric>``, groups by their weighting;
    the notes name what was left out and why."""
    logged = [logged_values(run) for run in runs]
    out = [_Recomputed() for _ in runs]
    left_out: dict[str, set[str]] = {}  # reason -> metrics
    for task in sorted({t for values in logged for t in values}):
        holders = [i for i, values in enumerate(logged) if task in values]
        for name in sorted({m for i in holders for m in logged[i][task] if not _is_bookkeeping(m)}):
            full = f"{task}/{name}"
            reason = _recompute(full, [(i, runs[i], logged[i][task].get(name, {})) for i in holders], out)
            if reason:
                left_out.setdefault(reason, set()).add(full)
    for i, run in enumerate(runs):
        for group in run.subtasks:
            for name in [m.split("/", 1)[1] for m in run.metrics if m.split("/", 1)[0] == group]:
                if not _is_bookkeeping(name) and (reason := _recompute_group(run, group, name, out[i])):
                    left_out.setdefault(reason, set()).add(f"{group}/{name}")
    done = []
    for run, found in zip(runs, out):
        metrics = {**found.metrics, **{count_of(m): float(n) for m, n in found.counts.items()}}
        roles = {**run.roles, **{count_of(m): "bookkeeping" for m in found.counts}}
        kept = set(found.metrics)
        done.append(
            dataclasses.replace(
                run,
                metrics=metrics,
                stderrs=found.stderrs,
                roles=roles,
                higher_is_better={m: h for m, h in run.higher_is_better.items() if m in kept},
                cautions=_cautions(run, found),
            )
        )
    for full in sorted({m for run in runs for m in run.metrics} - {m for r in done for m in r.metrics}):
        if not any(full in ms for ms in left_out.values()) and not _is_bookkeeping(full.split("/", 1)[1]):
            left_out.setdefault("no per-sample values were logged for it", set()).add(full)
    notes = [
        "Each task's scores on the samples every run holding it scored: n_<metric> counts them; the runs' "
        "bookkeeping totals (tokens, truncations) are of their whole runs and left out."
    ]
    notes += [f"Left out ({reason}): {', '.join(sorted(metrics))}." for reason, metrics in sorted(left_out.items())]
    return done, notes


def _cautions(run: Run, found: _Recomputed) -> dict[str, list[str]]:
    """A run's cautions on the common samples: support ones from the counts there, curve ones left to the board."""
    out = {
        task: [c for c in sentences if not is_support_caution(c) and not is_curve_caution(c, task)]
        for task, sentences in run.cautions.items()
    }
    for task, supports in run.supports.items():
        values = {}  # lm-eval's results[task] as it would read on the common samples
        for full, value in [*found.metrics.items(), *((count_of(m), n) for m, n in found.counts.items())]:
            owner, name = full.split("/", 1)
            if owner == task:
                values[f"{name},none"] = value
        on_common = [dataclasses.replace(s, count=f"{COUNT_PREFIX}{s.metric}") for s in supports]
        out.setdefault(task, []).extend(task_cautions(task, values, on_common))
    return {task: sentences for task, sentences in out.items() if sentences}


def reproducing(candidates: dict[Any, float], reported: float) -> Any:
    """For a results file of another package (an older file too), which records no pooling (``lch_metric_pooling``)
    or group weighting (``lch_group_weighting``): the first rule of ``candidates`` (rule -> the value it gives) whose
    value is ``reported`` to a relative 1e-9 (the same numbers summed in another order), or None. The only inference
    from the numbers; a file of ours is read as it records them."""
    return next(
        (
            rule
            for rule, value in candidates.items()
            if math.isfinite(value)
            and math.isfinite(reported)
            and abs(value - reported) <= 1e-9 * max(abs(value), abs(reported), 1e-300)
        ),
        None,
    )


def pooling_rule(declared: dict[str, str | None] | None, key: str, values: list, reported: float) -> str | None:
    """How a run pooled ``key`` (``<metric>,<filter>``) over its documents, a rule of :data:`RULES` or None (not
    recomputed): as its task declared it (``declared``: the results' ``lch_metric_pooling`` of the task), checked
    against the shape of the logged values; for a task that declared none (None), :func:`reproducing`."""
    pairs = bool(values) and all(isinstance(v, tuple) for v in values)
    if declared is None:
        shaped = pairs or (bool(values) and all(isinstance(v, float) for v in values))
        rules = (("pooled", "pooled_exp") if pairs else ("mean",)) if shaped else ()
        return reproducing({rule: pooled_value(values, rule) for rule in rules}, reported)
    rule = declared.get(key.partition(",")[0])
    return rule if rule in RULES and values and pairs == (rule != "mean") else None


def on_documents(reported: float, docs: Docs, common: set, rule: str) -> float:
    """``reported`` recomputed from ``docs`` by ``rule`` on the documents ``common`` only (``reported`` itself when
    those are all the run's)."""
    if len(common) == len(docs) and common >= set(docs):
        return reported
    return pooled_value([v for doc, v in docs.items() if doc in common], rule)


def _recompute(full: str, holders: list[tuple[int, Run, Docs]], out: list[_Recomputed]) -> str | None:
    """``full`` (``<task>/<metric>``) of each holder recomputed on the documents all of them scored, into ``out``;
    the reason it is not, or None."""
    rules = {}
    for i, run, docs in holders:
        if not docs:
            continue  # the run scored no document on it: nothing in common
        if full not in run.metrics:
            return "a run has no value for it"
        task, name = full.split("/", 1)
        declared = run.pooling.get(task)
        rule = pooling_rule(declared, name, list(docs.values()), run.metrics[full])
        if rule is None:
            return (
                "its task declares no pooling of its per-sample values over documents"
                if declared is not None
                else "no pooling of its logged per-sample values reproduces its reported value"
            )
        rules[i] = rule
    if len(set(rules.values())) > 1:
        return "the runs pooled it differently"
    common = set.intersection(*(set(docs) for _, _, docs in holders))
    for i, run, docs in holders:
        found = out[i]
        found.counts[full] = len(common)
        if not common:
            continue  # nothing in common: no number (its count, 0, says so)
        found.metrics[full] = on_documents(run.metrics[full], docs, common, rules[i])
        if full in run.stderrs:  # a mean's standard error on those documents; a pooled value's is not known
            stderr = (
                run.stderrs[full]
                if len(common) == len(docs)
                else mean_stderr([v for doc, v in docs.items() if doc in common])
                if rules[i] == "mean"
                else None
            )
            if stderr is not None:
                found.stderrs[full] = stderr
    return None


def _recompute_group(run: Run, group: str, name: str, found: _Recomputed) -> str | None:
    """A group's metric from its tasks' recomputed values, by the group's weighting as the run recorded it
    (``lch_group_weighting``), else (:func:`reproducing`) the one that gives its reported value from their reported
    ones (weights: the documents each rests on)."""
    full = f"{group}/{name}"
    want = length_of_metric(name.partition(",")[0])
    sources = {}
    for leaf in group_leaves(group, run.subtasks):
        own = [
            m.split("/", 1)[1]
            for m in run.metrics
            if m.split("/", 1)[0] == leaf
            and (
                m.split("/", 1)[1] == name
                or (want is not None and "," not in name and length_of_metric(m.split("/", 1)[1]) == want)
            )
        ]
        if own:
            sources[leaf] = f"{leaf}/{own[0]}"
    if not sources:
        return "a group metric none of its tasks reports"
    if any(src not in found.counts for src in sources.values()):
        return "its tasks' values were not recomputed"
    rule = run.weighted.get(group)
    if rule is None:
        reported = [run.metrics[src] for src in sources.values()]
        sizes = [run.samples.get(leaf, 0) for leaf in sources]
        rule = reproducing({w: group_value(reported, sizes, w) for w in (False, True)}, run.metrics[full])
    if rule is None:
        return "no group rule over its tasks' values reproduces its reported value"
    have = [src for src in sources.values() if src in found.metrics]
    found.counts[full] = sum(found.counts[src] for src in sources.values())
    if have:
        found.metrics[full] = group_value([found.metrics[s] for s in have], [found.counts[s] for s in have], rule)
        stderrs = [e for s in have if (e := found.stderrs.get(s)) is not None]
        if not rule and full in run.stderrs and len(stderrs) == len(have):
            found.stderrs[full] = math.sqrt(sum(e * e for e in stderrs)) / len(stderrs)
    return None
