"""A plan in words and as JSON (no I/O): the cells as a table with totals, and the time estimate with its basis."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from harness.core.sizes import in_words
from harness.core.tables import aligned
from harness.plan.cells import COLUMNS, Throughput, scores_only, totals

HEADERS = {
    "task": "task",
    "length": "length",
    "samples": "samples",
    "prompt_tokens": "prompt tokens",
    "longest_prompt": "longest",
    "generated_tokens": "generated <=",
    "scored_tokens": "scored",
    "cut": "cut or skipped",
    "judge_calls": "judge calls",
    "judge_tokens": "judge tokens <=",
    "cached": "cached",
    "memory": "memory",
    "fits": "fits",
}
CALIBRATE_HINT = (
    "no time estimate: this model, device and model args were never timed here; add --calibrate "
    "(times one prefill and decode of the model at two lengths)"
)


def duration(seconds: float) -> str:
    """``seconds`` as a person reads a duration: 45 s, 12 min 5 s, 3 h 20 min, 2 d 4 h."""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


def _cell_text(name: str, value: Any) -> str:
    if name == "memory":
        return "-" if value is None else in_words(value)
    if name in ("cached", "fits"):
        # before this plan: RULER's plan builds (and caches) samples that were not; LongPPL's key tokens the run finds
        return "-" if value is None else "yes" if value else "no"
    if value is None:  # a count that could not be made (the judge's prompt not at hand)
        return "?"
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def table(
    rows: list[dict[str, Any]],
    columns: Sequence[str] = COLUMNS,
    headers: Mapping[str, str] = HEADERS,
    text: Callable[[str, Any], str] = _cell_text,
    left: Collection[str] = ("task", "length", "cached", "fits"),
) -> str:
    """``rows`` (:data:`COLUMNS`) as aligned text: names left, numbers right."""
    texts = [[headers[c] for c in columns]] + [[text(c, row.get(c)) for c in columns] for row in rows]
    return "\n".join(aligned(texts, right=[i for i, c in enumerate(columns) if c not in left]))


def estimate_seconds(plan: Any, throughput: Throughput) -> float:
    """The run's wall time at ``throughput`` (:meth:`Throughput.cell_seconds` summed)."""
    return sum(throughput.cell_seconds(cell) for cell in plan.cells)


def plan_text(run: Any, plan: Any, throughput: Throughput | None, source: str | None) -> str:
    """The plan of ``run`` as a person reads it."""
    rows = [cell.row() for cell in plan.cells]
    total = {"task": "total", "length": "", **totals(plan.cells), "cached": None}
    template = "chat template applied" if run.apply_chat_template else "no chat template"
    lines = [
        f"lch plan: {run.model} on {len({c.task for c in plan.cells})} tasks; tokens counted in "
        f"{plan.tokenizer} ({template}); nothing generated, no model loaded",
        "",
        table(rows + [total]),
        "",
    ]
    lines += memory_lines(plan)
    if throughput is None:
        lines.append(CALIBRATE_HINT)
    else:
        lines.append(
            f"estimated wall time: {duration(estimate_seconds(plan, throughput))} at most, batch 1 "
            f"(an estimate: every generation taking its whole budget; batching and early stops shorten it), "
            f"from throughput {source}: {throughput.basis}"
        )
    return "\n".join(lines)


def memory_lines(plan: Any) -> list[str]:
    """What the memory column was checked against, and each cell that does not fit with what would."""
    device = getattr(plan, "device", None)
    if device is None or all(cell.memory is None for cell in plan.cells):
        return []
    head = (
        f"memory: each cell's longest request, weights included, on {device.name} ({in_words(device.size)}); "
        f"predicted from the model's config, no weight read"
    )
    if not plan.misfits:
        return [head + ": every cell fits", ""]
    return [head + "; does not fit:", *(f"  {line}" for line in plan.misfits), ""]


def plan_json(run: Any, plan: Any, throughput: Throughput | None, source: str | None) -> dict[str, Any]:
    """The plan as JSON: the run's settings, each cell, the totals and the estimate (None without a throughput)."""
    from dataclasses import asdict

    device = getattr(plan, "device", None)
    return {
        "run": asdict(run),
        "tokenizer": plan.tokenizer,
        "cells": [cell.row() for cell in plan.cells],
        "totals": totals(plan.cells),
        "memory": None if device is None else {**asdict(device), "does_not_fit": list(plan.misfits)},
        "estimate": None
        if throughput is None
        else {"seconds": estimate_seconds(plan, throughput), "throughput": asdict(throughput), "source": source},
    }


AGAINST_HEADERS = {
    "task": "task",
    "samples": "samples",
    "requests": "requests run",
    "prompt_tokens": "prompt tokens",
    "prompt_tokens_run": "run",
    "generated_tokens": "generated <=",
    "generated_tokens_run": "run",
    "seconds_estimated": "seconds est.",
    "seconds_at_run_tokens": "at run's tokens",
    "seconds_run": "run",
    "estimate_over_run": "est. / run",
    "model_over_run": "at run's / run",
}
AGAINST = tuple(AGAINST_HEADERS)  # the columns of lch plan --against, in order


def against_rows(plan: Any, throughput: Throughput | None, cost: dict[str, Any]) -> list[dict[str, Any]]:
    """Per task the plan beside the run's ``lch_cost``: samples, requests, tokens, seconds estimated, the throughput's
    seconds at the run's actual tokens, seconds run, each estimate over the run's (None: unknown); last, totals."""
    by_task: dict[str, list] = {}
    for cell in plan.cells:
        by_task.setdefault(cell.task, []).append(cell)
    recorded = given_tasks if isinstance(given_tasks := cost.get("tasks"), dict) else {}
    rows: list[dict[str, Any]] = []
    for task, cells in by_task.items():
        run = given_task if isinstance(given_task := recorded.get(task), dict) else {}
        planned = totals(cells)
        work: dict[str, Any] = {
            k: run.get(k) for k in ("prompt_tokens", "prompt_tokens_squared", "generated_tokens", "decode_context")
        }
        scoring = scores_only(run.get("scored_tokens") or 0, run.get("generated_tokens") or 0)
        rows.append(
            {
                "task": task,
                "samples": planned["samples"],
                "requests": run.get("requests"),
                "prompt_tokens": planned["prompt_tokens"],
                "prompt_tokens_run": run.get("prompt_tokens"),
                "generated_tokens": planned["generated_tokens"],
                "generated_tokens_run": run.get("generated_tokens"),
                "seconds_estimated": None if throughput is None else sum(throughput.cell_seconds(c) for c in cells),
                "seconds_at_run_tokens": None
                if throughput is None or None in work.values()
                else throughput.work_seconds(**work, scoring=scoring),
                "seconds_run": run.get("seconds"),
            }
        )
    total: dict[str, Any] = {"task": "total"}
    for name in AGAINST[1:-2]:  # the counts and seconds; the two ratios are made below
        values = [r[name] for r in rows]
        total[name] = None if any(v is None for v in values) else sum(values)
    rows.append(total)
    for row in rows:
        ran = row["seconds_run"]
        for ratio, est in (
            ("estimate_over_run", row["seconds_estimated"]),
            ("model_over_run", row["seconds_at_run_tokens"]),
        ):
            row[ratio] = est / ran if est is not None and ran else None
    return rows


def _against_text(name: str, value: Any) -> str:
    if value is None:
        return "-"
    if name.startswith("seconds"):
        return f"{value:.1f}"
    if name in ("estimate_over_run", "model_over_run"):
        return f"{value:.2f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def memory_against(plan: Any, cost: dict[str, Any]) -> dict[str, Any] | None:
    """The plan's largest cell memory beside the run's recorded peak, and their ratio; None where either is missing."""
    planned = totals(plan.cells).get("memory")
    peak = given_peak_memory if isinstance(given_peak_memory := cost.get("peak_memory"), dict) else {}
    recorded = peak.get("bytes")
    if not isinstance(planned, int) or not isinstance(recorded, (int, float)) or not recorded:
        return None
    return {
        "planned_bytes": planned,
        "recorded_bytes": int(recorded),
        "planned_over_recorded": planned / recorded,
        "recorded_what": peak.get("what"),
    }


def against_text(
    results: str,
    rows: list[dict[str, Any]],
    cost: dict[str, Any],
    source: str | None,
    throughput: Throughput | None,
    memory: dict[str, Any] | None = None,
) -> str:
    """The plan of the run ``results`` recorded beside what it cost, as a person reads it."""
    lines = [
        f"lch plan --against {results}: the run's plan (made again from its recorded invocation) beside what it "
        "recorded (lch_cost)",
        "",
        table(rows, AGAINST, AGAINST_HEADERS, _against_text, ("task",)),
    ]
    wall = cost.get("wall_seconds")
    lines.append("")
    if isinstance(wall, (int, float)):
        device = cost.get("device_name") or cost.get("device") or "device unrecorded"
        lines.append(
            f"the run: {duration(wall)} wall ({device}); its engine computed for {rows[-1]['seconds_run'] or 0:.1f} s"
        )
    if memory is not None:
        lines.append(
            f"memory: planned {in_words(memory['planned_bytes'])} for its largest cell, recorded "
            f"{in_words(memory['recorded_bytes'])} ({memory['recorded_what']}): "
            f"{memory['planned_over_recorded']:.2f}x"
        )
    if throughput is None:
        lines.append(CALIBRATE_HINT)
    else:
        estimated = rows[-1]["seconds_estimated"]
        ratio = f"{estimated / wall:.2f}x the run's wall time" if isinstance(wall, (int, float)) and wall else ""
        lines.append(
            f"estimated: {duration(estimated)} at most, batch 1 ({ratio}), from throughput {source}: {throughput.basis}"
        )
        modelled, ran = rows[-1]["seconds_at_run_tokens"], rows[-1]["seconds_run"]
        if modelled is not None and ran:
            lines.append(
                f"with the generations as long as the run's: {modelled:.1f} s, {modelled / ran:.2f}x what its "
                "engine computed"
            )
    return "\n".join(lines)
