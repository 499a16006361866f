"""``lch plan``: what a run will cost before it runs (:mod:`harness.plan`), from ``lch eval``'s own flags."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.core.errors import UsageError

# ours, taken out before lm-eval's parser reads the rest: the value each takes, in words (None: a switch)
OWN_FLAGS = {
    "--calibrate": None,
    "--json": "a file path",
    "--against": "a results file",
    "--memory": "a size or a device name",
}


def add(sub: argparse._SubParsersAction) -> None:
    # dispatched before argparse, as `lch eval` is (every other argument is lm-eval's); listed here for --help
    sub.add_parser(
        "plan",
        add_help=False,
        help="what a run will cost before it runs: per task and length the samples, exact prompt tokens, "
        "generation budget, tokens scored, judge calls, cache state, and an estimated wall time "
        "(lch eval's flags; --calibrate times the model here first; --json FILE writes the plan; "
        "--against RESULTS: a recorded run's plan beside what it cost)",
    )


def split_own_flags(argv: list[str]) -> tuple[dict[str, str | bool], list[str]]:
    """``(our flags, lm-eval's arguments)`` of an ``lch plan`` command line."""
    own: dict[str, str | bool] = {}
    rest: list[str] = []
    args = iter(argv)
    for arg in args:
        flag, eq, value = arg.partition("=")
        if flag not in OWN_FLAGS:
            rest.append(arg)
        elif OWN_FLAGS[flag]:
            value = value if eq else next(args, "")
            if not value:
                raise UsageError(f"lch plan: {flag} needs {OWN_FLAGS[flag]}")
            own[flag] = value
        else:
            own[flag] = True
    return own, rest


def run_plan(argv: list[str]) -> int:
    from harness.plan.command_line import estimate_source, plan_settings
    from harness.plan.devices import parse_memory
    from harness.plan.make import make_plan
    from harness.plan.report import plan_json, plan_text

    if any(a in ("-h", "--help") for a in argv):
        print(
            "usage: lch plan --model M --model_args ARGS --tasks T [--metadata JSON] [any lch eval flag] "
            "[--calibrate] [--memory SIZE|DEVICE] [--json FILE]\n"
            "       lch plan --against RESULTS [--calibrate] [--json FILE]\n\n"
            "What the run `lch eval` would make of the same flags will cost, before it runs: nothing is generated "
            "and no model is loaded (but for --calibrate). --memory 80GiB / h100: check each cell's memory against "
            "that device (default: the run's device). --against: the plan of a run a results file (or its "
            "folder) recorded, beside what the run cost."
        )
        return 0
    own, rest = split_own_flags(argv)
    out = own.get("--json")
    if isinstance(out, str) and Path(out).expanduser().is_dir():
        raise UsageError(f"--json {out} is a folder: give a file path")
    against = own.get("--against")
    if isinstance(against, str):
        if rest:
            raise UsageError(
                f"lch plan --against plans the run its results file recorded: leave out {rest[0]} "
                "(the run's own flags are used)"
            )
        return run_against(against, bool(own.get("--calibrate")), out if isinstance(out, str) else None)
    memory = own.get("--memory")  # a flag with a value: a string when given
    device = parse_memory(memory) if isinstance(memory, str) else None
    run = plan_settings(rest)
    plan = make_plan(run, device)
    throughput, source = estimate_source(run, plan, bool(own.get("--calibrate")))
    print(plan_text(run, plan, throughput, source))
    if isinstance(out, str):
        _write(out, plan_json(run, plan, throughput, source))
    return 0


def _write(path: str, data: dict) -> None:
    from harness.core.files import write_text_atomic

    write_text_atomic(Path(path).expanduser(), json.dumps(data, indent=2) + "\n")
    print(f"plan written to {path}", file=sys.stderr)


def run_against(results: str, calibrate: bool, out: str | None) -> int:
    """``lch plan --against RESULTS``: the run's recorded invocation planned again (in its folder) beside its cost."""
    import os

    from harness.core import results as keys
    from harness.core.context import chdir
    from harness.core.invocation import Invocation
    from harness.plan.command_line import estimate_source
    from harness.plan.make import make_plan, settings_of
    from harness.plan.report import against_rows, against_text, memory_against, plan_json
    from harness.reporting.runs import RunError, read_json
    from harness.reporting.samples import results_file

    path = results_file(results, "a results file (or the folder lm-eval wrote it in)")
    data = read_json(path, RunError)
    invocation = Invocation.from_json(data.get(keys.INVOCATION)) if isinstance(data, dict) else None
    cost = data.get(keys.COST) if isinstance(data, dict) else None
    if invocation is None or not isinstance(cost, dict):
        raise UsageError(
            f"{path} records no {'invocation' if invocation is None else 'cost'} (a run of another "
            "harness, or of lch before it recorded them): plan it with the run's own flags instead"
        )
    run = settings_of(invocation)
    where = invocation.cwd if invocation.cwd and Path(invocation.cwd).is_dir() else os.getcwd()
    with chdir(where):
        ran = [h for h in cost.get("helpers") or [] if isinstance(h, dict)]  # models the run loaded beside its own
        plan = make_plan(run, helpers_ran={(str(h.get("model")), str(h.get("dtype"))) for h in ran})
        throughput, source = estimate_source(run, plan, calibrate)
    rows = against_rows(plan, throughput, cost)
    memory = memory_against(plan, cost)
    print(against_text(str(path), rows, cost, source, throughput, memory))
    if out is not None:
        _write(
            out,
            {
                **plan_json(run, plan, throughput, source),
                "against": {
                    "results": str(path),
                    "tasks": rows,
                    "wall_seconds": cost.get("wall_seconds"),
                    "memory": memory,
                },
            },
        )
    return 0
