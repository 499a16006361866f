"""What a run of ours does to lm-eval's results object before it is written (:func:`finish_results`): aggregates
settled, group curves at every length, uncomputable numbers left out with why, the cautions of metrics resting on a
handful of items (:mod:`harness.metrics.support`), effective context lengths, the device the model ran on."""

from __future__ import annotations

import logging
import math
from dataclasses import asdict
from typing import Any

from harness.core import results as keys
from harness.core.costs import RunCost
from harness.data.depth import cell_metric, length_of_metric, read_cell_metric
from harness.data.lengths import length_tokens
from harness.metrics.catalogue import COUNT_PREFIX, LENGTH_PREFIX, metric_role
from harness.metrics.common_samples import group_leaves, group_stderr, group_value, scored_digest, scored_values
from harness.metrics.context_length import curve_caution, curve_points, effective_lengths, shared_threshold
from harness.metrics.support import results_cautions

log = logging.getLogger(__name__)


def record_cautions(results: dict) -> dict[str, list[str]]:
    """The run's cautions written under :data:`harness.core.results.CAUTIONS` (``{}``: none) and logged as warnings."""
    found = results_cautions(results)
    results[keys.CAUTIONS] = found
    for sentences in found.values():
        for sentence in sentences:
            log.warning("caution: %s", sentence)
    return found


def record_effective_lengths(results: dict) -> dict[str, dict]:
    """The effective context length of every task and group with ``len_<L>`` scores
    (:func:`harness.metrics.context_length.effective_lengths` at their shared ``effective_threshold``), written under
    :data:`harness.core.results.EFFECTIVE_LENGTH` as ``{task: {"absolute": {...}, "relative": {...}}}``; a curve not
    monotone within its intervals adds a caution."""
    metrics: dict[str, float] = {}
    stderrs: dict[str, float] = {}
    for task, values in (results.get("results") or {}).items():
        for key, value in (values or {}).items() if isinstance(values, dict) else ():
            name, _, flt = str(key).partition(",")
            if flt != "none" or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if name.endswith("_stderr"):
                stderrs[f"{task}/{name[: -len('_stderr')]}"] = float(value)
            else:
                metrics[f"{task}/{name}"] = float(value)
    subtasks = {
        str(g): [str(t) for t in ts] for g, ts in (results.get("group_subtasks") or {}).items() if isinstance(ts, list)
    }
    configs = results.get("configs") or {}

    def threshold(task: str) -> float:
        return shared_threshold(
            [
                ((configs.get(t) or {}).get("metadata") or {}).get("effective_threshold")
                for t in subtasks.get(task) or [task]
            ]
        )

    out: dict[str, dict] = {}
    for task in sorted({m.split("/", 1)[0] for m in metrics}):
        found = effective_lengths(curve_points(task, metrics, stderrs, subtasks, length_tokens), threshold(task))
        if found is None:
            continue
        out[task] = {length.kind: asdict(length) for length in found}
        caution = found[0].caution
        if caution:
            sentence = curve_caution(task, caution)
            results.setdefault(keys.CAUTIONS, {}).setdefault(task, []).append(sentence)
            log.warning("caution: %s", sentence)
    results[keys.EFFECTIVE_LENGTH] = out
    return out


def _finite(value: object) -> bool:
    return not isinstance(value, float) or math.isfinite(value)


def drop_absent(results: dict) -> dict[str, dict[str, str]]:
    """Take every metric whose value is not a finite number out of lm-eval's results (groups too), its stderr with it;
    returns ``{task: {metric: reason}}`` (the task's ``lch_absent`` reason, else "not a number")."""
    absent: dict[str, dict[str, str]] = {}
    configs = results.get("configs") or {}
    for section in ("results", "groups"):
        for task, values in (results.get(section) or {}).items():
            if not isinstance(values, dict):
                continue
            metadata = ((configs.get(task) or {}).get("metadata") or {}) if isinstance(configs.get(task), dict) else {}
            absent_here = metadata.get(keys.ABSENT)
            reasons: dict[str, Any] = absent_here if isinstance(absent_here, dict) else {}
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


def settle_aggregates(results: dict) -> dict[str, dict[str, str]]:
    """Move what our tasks recorded while aggregating (:data:`harness.core.results.AGGREGATED` in their metadata) into
    the results: the stderr of each mean lm-eval could not give, and a metric no document had left out (a count stays,
    0; a depth cell silently, any other with its reason, returned as ``{task: {metric: why}}``). Logged samples lose
    the None of metrics that were not theirs."""
    absent: dict[str, dict[str, str]] = {}
    configs = results.get("configs") or {}
    for task, config in configs.items():
        metadata = config.get("metadata") if isinstance(config, dict) else None
        recorded = metadata.pop(keys.AGGREGATED, None) if isinstance(metadata, dict) else None
        values = (results.get("results") or {}).get(task)
        if not isinstance(recorded, dict) or not isinstance(values, dict):
            continue
        for key in [k for k in values if "," in k]:
            metric, _, flt = key.partition(",")
            info = recorded.get(metric)
            if not isinstance(info, dict):
                continue
            cell = read_cell_metric(metric[len(COUNT_PREFIX) :] if metric.startswith(COUNT_PREFIX) else metric)
            if not info.get("n") and (cell is not None or not _finite(values[key])):  # a count of none stays: 0
                values.pop(key)
                values.pop(f"{metric}_stderr,{flt}", None)
                if cell is None:
                    absent.setdefault(str(task), {})[metric] = (
                        "no sample was scored on it: each was left unscored (n_skipped) or none was drawn"
                    )
            elif info.get("stderr") is not None and values.get(f"{metric}_stderr,{flt}") in (None, "N/A"):
                values[f"{metric}_stderr,{flt}"] = info["stderr"]
    for rows in (results.get("samples") or {}).values():
        for row in rows if isinstance(rows, list) else ():
            names = row.get("metrics") if isinstance(row, dict) else None
            if not isinstance(names, list):
                continue
            unscored = [name for name in names if name in row and row[name] is None]
            for name in unscored:
                del row[name]
            row["metrics"] = [name for name in names if name not in unscored]
    return absent


def record_group_aggregates(results: dict, weighting: dict[str, bool]) -> dict[str, list[str]]:
    """For each group whose tasks are all ours, average over the tasks reporting it every metric its YAML names and
    every ``len_<L>`` / ``depth_<D>_len_<L>`` score (a length matched by its tokens), by lm-eval's group formulas
    (:mod:`harness.metrics.common_samples`), weighted by size as ``weighting`` (the run's groups' declarations:
    :func:`harness.plugin.discovery.group_weighting`) says; a group it has not is left as lm-eval made it. Written
    into ``results`` and ``groups``, the weighting under ``lch_group_weighting``; returns ``{group: [metrics
    written]}``."""
    task_results = results.get("results") or {}
    configs = results.get("configs") or {}
    subtasks = {
        str(g): [str(t) for t in ts] for g, ts in (results.get("group_subtasks") or {}).items() if isinstance(ts, list)
    }
    ours = {
        t
        for t, c in configs.items()
        if isinstance(c, dict) and isinstance(c.get("metadata"), dict) and keys.CONFIGURATION in c["metadata"]
    }

    def number(value: object) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

    def names(values: dict) -> list[str]:
        return [k.partition(",")[0] for k in values if k.partition(",")[2] == "none" and not k.endswith("_stderr,none")]

    written: dict[str, list[str]] = {}
    weightings: dict[str, bool] = {}
    for group in subtasks:
        leaves = group_leaves(group, subtasks)
        current = task_results.get(group)
        weighted = weighting.get(group)
        if not leaves or not set(leaves) <= ours or not isinstance(current, dict) or weighted is None:
            continue
        # each group metric -> the metric each task reports for it: the YAML's own by name, lengths by their tokens
        sources: dict[str, dict[str, str]] = {m: {leaf: m for leaf in leaves} for m in names(current)}
        by_length: dict[tuple[int | None, int], dict[str, str]] = {}
        for leaf in leaves:
            for metric in names(task_results.get(leaf) or {}):
                found = length_of_metric(metric)
                if found is not None:
                    by_length.setdefault(found, {})[leaf] = metric
        for (bucket, tokens), per_leaf in by_length.items():
            spellings = {m.rpartition(LENGTH_PREFIX)[2] for m in per_leaf.values()}  # the length as each spells it
            label = spellings.pop() if len(spellings) == 1 else str(tokens)
            sources[f"{LENGTH_PREFIX}{label}" if bucket is None else cell_metric(bucket, label)] = per_leaf
        sizes = {leaf: int((task_results.get(leaf) or {}).get("sample_len") or 0) for leaf in leaves}
        weightings[group] = weighted
        for metric in sorted(sources):
            have = [
                leaf
                for leaf, own in sources[metric].items()
                if number((task_results.get(leaf) or {}).get(f"{own},none"))
            ]
            if not have:
                continue
            rows = [(task_results[leaf], sources[metric][leaf]) for leaf in have]
            values = [row[f"{own},none"] for row, own in rows]
            stderrs = [row.get(f"{own}_stderr,none") for row, own in rows]
            size = [sizes[leaf] for leaf in have]
            current[f"{metric},none"] = float(group_value(values, size, weighted))
            current[f"{metric}_stderr,none"] = (
                float(group_stderr(stderrs, size, weighted)) if all(number(e) for e in stderrs) else "N/A"
            )
            if isinstance(current.get("sample_count"), dict):  # the samples it rests on where the tasks count them
                counts = [row.get(f"{COUNT_PREFIX}{own},none") for row, own in rows]
                current["sample_count"][f"{metric},none"] = (
                    int(sum(counts)) if all(number(c) for c in counts) else sum(size)
                )
            written.setdefault(group, []).append(metric)
        groups = results.get("groups")
        if isinstance(groups, dict) and group in groups and groups[group] is not current:
            groups[group] = current
    if weightings:
        results[keys.GROUP_WEIGHTING] = weightings
    return written


def record_scored(results: dict) -> dict[str, dict[str, dict]]:
    """Which documents each score of each task rests on, under :data:`harness.core.results.SCORED` as ``{task:
    {"<metric>,<filter>": {"n", "digest"}}}`` (bookkeeping counts left out); nothing without logged samples."""
    samples = results.get("samples")
    if not isinstance(samples, dict) or not samples:
        return {}
    scored = {
        str(task): {
            key: {"n": len(docs), "digest": scored_digest(docs)}
            for key, docs in sorted(scored_values(r for r in rows if isinstance(r, dict)).items())
            if metric_role(key.partition(",")[0]) != "bookkeeping"
        }
        for task, rows in samples.items()
        if isinstance(rows, list)
    }
    results[keys.SCORED] = scored
    return scored


def record_cost(results: dict, wall_seconds: float, run: RunCost) -> dict:
    """The run's cost under :data:`harness.core.results.COST`: wall time, device and its peak memory, each task's
    requests, tokens, seconds and tokens per second (:mod:`harness.core.costs`; a data-parallel run: the first
    process's share), the judge's requests and tokens, and the models loaded beside the evaluated one."""
    from harness.models.device_info import device_name, peak_memory

    given = results.get("config")
    config: dict[str, Any] = given if isinstance(given, dict) else {}
    device = (config.get(keys.RUN) or {}).get("device") or config.get("device")
    device = str(device) if device else None
    cost = {
        "wall_seconds": wall_seconds,
        "device": device,
        "device_name": device_name(device),
        "peak_memory": peak_memory(device),
        "processes": _processes(),
        "tasks": {task: cost.as_json() for task, cost in sorted(run.tasks.items())},
        "judge": asdict(run.judge),
        "helpers": list(run.helpers),
    }
    results[keys.COST] = cost
    return cost


def _processes() -> int:
    """The processes of a data-parallel run (1 otherwise): the cost's tasks are the first process's share."""
    import torch.distributed as dist

    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def finish_results(
    results: dict, weighting: dict[str, bool] | None = None, wall_seconds: float = 0.0, cost: RunCost | None = None
) -> dict:
    """What a run of ours does to lm-eval's results object before its caller writes it (module docstring; ``weighting``:
    :func:`record_group_aggregates`'; ``cost``: the run's as gathered, :func:`record_cost`); the device the model ran
    on becomes the config's ``device`` (the one asked kept as ``lch_device_asked`` where it differs)."""
    unscored = settle_aggregates(results)
    record_group_aggregates(results, weighting or {})
    absent = drop_absent(results)
    for task, metrics in unscored.items():
        absent.setdefault(task, {}).update(metrics)
    results[keys.ABSENT] = absent
    for task, metrics in absent.items():
        for metric, why in metrics.items():
            log.warning("%s/%s left out of the results: %s", task, metric, why)
    record_cautions(results)
    record_effective_lengths(results)
    record_scored(results)
    config = results.get("config")
    ran_on = (config.get(keys.RUN) or {}).get("device") if isinstance(config, dict) else None
    if isinstance(config, dict) and ran_on and config.get("device") != ran_on:  # lm-eval records its --device
        config[keys.DEVICE_ASKED], config["device"] = config.get("device"), ran_on  # (cuda:0 by default, on a CPU too)
    if cost is not None:
        record_cost(results, wall_seconds, cost)
    return results
