"""A recorded run made again (its invocation, the model found by its content, ``--set`` model args applied) and
compared with the original, every sample and metric, at zero tolerance."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.core import results as keys
from harness.core.errors import UsageError
from harness.core.invocation import Invocation
from harness.core.run_record import FIELDS, RunRecord
from harness.reporting.comparability import TASK_OPTIONS, NotComparable
from harness.reporting.runs import RunError, read_json
from harness.reporting.samples import results_file, samples_files
from harness.rerun.environment import Difference, differences, locate_model, model_folders

LAYER = "app"  # harness/devtools/layers.py: a run (lmeval) then a report of it (reporting)


@dataclass
class Comparison:
    """A rerun against its original: samples paired, identical and differing (``task doc N``), metrics differing."""

    samples: int = 0
    identical: int = 0
    differing_samples: list[str] = field(default_factory=list)
    metrics: int = 0
    differing_metrics: list[str] = field(default_factory=list)
    unpaired: list[str] = field(default_factory=list)  # what one run has and the other has not

    @property
    def reproduced(self) -> bool:
        return self.identical == self.samples and not self.differing_metrics and not self.unpaired


@dataclass
class Rerun:
    """A rerun's outcome: both results, the run-record fields that differ, and the comparison."""

    original: Path
    rerun: Path
    differences: list[Difference]
    comparison: Comparison
    notes: list[str] = field(default_factory=list)


def prepare(
    results: Path, overrides: Mapping[str, Any], model_dir: str | None, allow: Iterable[str]
) -> tuple[Invocation, list[Difference], list[str]]:
    """The invocation to call again (model located, ``overrides`` applied), the run-record differences and notes; a
    difference neither in ``allow`` nor overridden is refused (``NotComparable``, exit 3) before anything runs."""
    data = read_json(results, RunError)
    invocation = Invocation.from_json(data.get(keys.INVOCATION)) if isinstance(data, dict) else None
    if invocation is None:
        raise UsageError(
            f"{results} records no invocation (a run of another harness, or of lch before it recorded "
            "them): rerun it by hand with lch eval"
        )
    record = RunRecord.from_results(data)
    model_args = {**invocation.model_args, **overrides}
    notes = [f"asked: {k} {invocation.model_args.get(k, 'unset')} -> {v}" for k, v in overrides.items()]
    pretrained = model_args.get("pretrained")
    if record.model and pretrained == record.model:  # a hub name is its own identity
        found: Path | None = Path(str(pretrained))
    else:
        found = locate_model(record.model, model_folders([model_dir or "", str(pretrained or "")]))
        if found is not None and str(found) != str(pretrained):
            notes.append(f"the model ({record.model}) is not at {pretrained}: found at {found}")
            model_args["pretrained"] = str(found)
    device = invocation.arguments.get("device")
    found_differences = differences(
        record, invocation.model, model_args, device if isinstance(device, str) else None, found
    )
    if any(d.field == "model" for d in found_differences):
        raise UsageError(
            f"the model of {results.name} ({record.model}) is not at {pretrained} nor in the model "
            "cache: give --model-dir FOLDER holding it"
        )
    allowed = set(allow) | set(overrides)
    refused = [d for d in found_differences if d.field not in allowed]
    if refused:
        raise NotComparable(
            f"this rerun would not run as {results.name} was: "
            f"{'; '.join(d.label() for d in refused)}; pass --allow "
            f"{','.join(d.field for d in refused)} to run it anyway"
        )
    if invocation.cwd and not Path(invocation.cwd).is_dir():
        notes.append(
            f"the run was made in {invocation.cwd}, which is not here: its relative paths are read from "
            "the current folder"
        )
    return replace(invocation, model_args=model_args), found_differences, notes


def run_invocation(invocation: Invocation, output: Path) -> Path:
    """Call ``simple_evaluate`` as ``invocation`` says (samples logged), in the folder it was called in when that is
    here (relative paths of the run are relative to it), and write its results to ``output``."""
    import os

    from harness.core.context import chdir
    from harness.plugin.discovery import run_task_names
    from harness.plugin.in_process import evaluate, save_run, task_manager

    output = output.absolute()
    where = invocation.cwd if invocation.cwd and Path(invocation.cwd).is_dir() else os.getcwd()
    with chdir(where):
        missing = [p for p in invocation.include_path if not Path(p).is_dir()]
        if missing:
            raise UsageError(f"the run's task folder {missing[0]} (--include_path) is not here: restore it, then rerun")
        ours_only = run_task_names(invocation.tasks, invocation.include_path or None) is not None
        manager = task_manager(
            invocation.include_path, {**invocation.model_args, **invocation.metadata}, ours_only=ours_only
        )
        arguments = {k: v for k, v in invocation.arguments.items() if k != "log_samples"}
        results = evaluate(
            invocation.model_args, invocation.tasks, manager, model=invocation.model, log_samples=True, **arguments
        )
    return save_run(results, output)


def compare(original: Path, rerun: Path, allow: Iterable[str]) -> Comparison:
    """Every logged sample and metric of ``original`` against ``rerun``; the metrics only when the original logged no
    samples."""
    from harness.reporting.agreement import Tolerances, agreement

    out = Comparison()
    if not samples_files(original):
        a, b = (read_json(p, RunError).get("results") or {} for p in (original, rerun))
        for task in sorted(set(a) | set(b)):
            if task not in a or task not in b:
                out.unpaired.append(f"{task} (in the {'original' if task in a else 'rerun'} only)")
                continue
            for key in sorted(k for k, v in a[task].items() if isinstance(v, (int, float)) and "_stderr" not in k):
                out.metrics += 1
                if a[task].get(key) != b[task].get(key):
                    out.differing_metrics.append(
                        f"{task}/{key.split(',')[0]}: {a[task][key]!r} -> {b[task].get(key)!r}"
                    )
        return out
    report = agreement(original, rerun, Tolerances(1.0, 0.0, 0.0, 0.0), None, allow)
    for task in report["tasks"]:
        out.samples += task.n_paired + task.n_unpaired
        out.identical += task.n_identical
        out.differing_samples += [f"{task.task} doc {d.doc_id}" for d in task.divergences]
        if task.n_identical < task.n_paired and not task.divergences:
            out.differing_samples.append(
                f"{task.task}: {task.n_paired - task.n_identical} of {task.n_paired} samples' responses differ"
            )
        if task.n_unpaired:
            out.unpaired.append(f"{task.task}: {task.n_unpaired} samples in one run only")
        out.metrics += len(task.metrics)
        out.differing_metrics += [
            f"{task.task}/{name}: {m['a']!r} -> {m['b']!r}" for name, m in task.metrics.items() if m["delta"] != 0
        ]
    out.unpaired += [f"{t} (in the original only)" for t in report["only_a"]]
    out.unpaired += [f"{t} (in the rerun only)" for t in report["only_b"]]
    return out


def rerun(
    results: str | Path,
    output: str | Path | None = None,
    allow: Iterable[str] = (),
    overrides: Mapping[str, Any] | None = None,
    model_dir: str | None = None,
) -> Rerun:
    """Make the run of ``results`` (a results file, or a run folder: its newest) again and compare; the new run goes to
    ``output`` (default: ``<name>-rerun`` beside the original's folder)."""
    original = results_file(results, "a results file (or the folder lm-eval wrote it in)")
    overrides = dict(overrides or {})
    invocation, found, notes = prepare(original, overrides, model_dir, allow)
    folder = Path(output) if output else original.parent.with_name(original.parent.name + "-rerun")
    written = run_invocation(invocation, folder)
    # the records may now differ only as allowed or asked: the comparison goes on and the summary names each field
    records = [RunRecord.from_results(read_json(p, RunError)) for p in (original, written)]
    found = [
        Difference(name, str(getattr(records[0], name)), str(getattr(records[1], name)))
        for name in FIELDS
        if getattr(records[0], name) != getattr(records[1], name)
    ]
    return Rerun(original, written, found, compare(original, written, [*FIELDS, TASK_OPTIONS]), notes)


def summary(outcome: Rerun) -> list[str]:
    """The outcome in lines: the verdict first ("reproduced: ..." or "differs: ..."), then what differs and the
    environment differences that could explain it."""
    c = outcome.comparison
    counted = f"{c.identical} of {c.samples} samples identical" if c.samples else "no samples logged by the original"
    metrics = (
        f"every metric equal ({c.metrics})"
        if not c.differing_metrics
        else f"{len(c.differing_metrics)} of {c.metrics} metrics differ"
    )
    lines = [
        f"{'reproduced' if c.reproduced else 'differs'}: {counted}, {metrics}",
        f"original: {outcome.original}",
        f"rerun:    {outcome.rerun}",
    ]
    lines += [f"- {note}" for note in outcome.notes]
    lines += [f"- run with: {d.label()}" for d in outcome.differences]
    lines += [f"- metric {m}" for m in c.differing_metrics]
    lines += [f"- sample {s}" for s in c.differing_samples[:20]]
    if len(c.differing_samples) > 20:
        lines.append(f"- ... and {len(c.differing_samples) - 20} more samples")
    lines += [f"- {u}" for u in c.unpaired]
    return lines
