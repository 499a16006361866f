"""``lch sweep``: a grid of ``lch eval`` cells (models or checkpoints x variants, over tasks and lengths) run on Ray,
each placed by its planned memory, resumable, gathered into one leaderboard (harness/sweep; docs/sweep.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from harness.core.errors import EXIT_OK, EXIT_REGRESSION, EXIT_USAGE, UsageError

DEFAULT_OUTPUT = "results/sweeps"


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="a grid of lch eval cells (models or checkpoints x model-arg variants, over "
        "tasks and lengths) on Ray: planned, placed by memory, resumable, gathered",
    )
    p.add_argument(
        "file",
        nargs="?",
        help="the sweep file (YAML: engine, models, model_args, variants, tasks, lengths, "
        "metadata, lm_eval, resources); flags below override its keys",
    )
    p.add_argument("--engine", choices=("hf-pic", "vllm-pic"), help="the model of every cell (default hf-pic)")
    p.add_argument("--models", nargs="+", help="model folders, catalogue names, hub names or globs of checkpoints")
    p.add_argument("--model_args", help="model args every cell shares (k=v,k=v)")
    p.add_argument(
        "--variant",
        action="append",
        metavar="NAME:ARGS",
        help="a variant: a name and its model args (ntk4:pic=ntk,pic_ratio=4); repeat for each",
    )
    p.add_argument("--tasks", help="tasks of every cell, comma-separated")
    p.add_argument("--lengths", nargs="+", help="RULER / BABILong lengths (4096 or 4k)")
    p.add_argument("--metadata", help="--metadata of every cell (JSON)")
    p.add_argument("--output", help=f"the sweep's folder (default {DEFAULT_OUTPUT}/<sweep file's name>)")
    p.add_argument("--address", help="a running Ray cluster (ray start, KubeRay, Ray on Slurm); default: a local Ray")
    p.add_argument("--dry-run", action="store_true", help="print every cell's plan and placement, run nothing")
    p.add_argument(
        "--gate",
        metavar="previous|BASELINE",
        help="gate the newest checkpoint against the previous one, or against a baseline file (exit 1: a regression)",
    )
    p.add_argument("--gpu-memory", help="one GPU's memory where Ray does not tell it (80GiB, h100)")
    p.set_defaults(handler=run_sweep)


def _pairs(text: str, flag: str) -> dict[str, Any]:
    from harness.plugin.preflight import as_dict

    try:
        return as_dict(text)
    except (ValueError, TypeError) as err:
        raise UsageError(f"{flag} {text!r}: give k=v,k=v pairs") from err


def declared(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """The sweep's keys: the file's, with each flag given in their place; and where they came from, in words."""
    data: dict[str, Any] = {}
    where = "the flags"
    if args.file:
        from harness.sweep.spec import load_spec

        data = load_spec(args.file).model_dump(exclude_unset=True)
        where = args.file
    if args.engine:
        data["engine"] = args.engine
    if args.models:
        data["models"] = args.models
    if args.model_args:
        data["model_args"] = _pairs(args.model_args, "--model_args")
    if args.variant:
        variants = {}
        for given in args.variant:
            name, sep, rest = given.partition(":")
            if not name or (sep and not rest):
                raise UsageError(f"--variant {given!r}: give NAME:k=v,k=v (or NAME alone for the model args as given)")
            variants[name] = _pairs(rest, "--variant") if rest else {}
        data["variants"] = variants
    if args.tasks:
        data["tasks"] = [t.strip() for t in args.tasks.split(",") if t.strip()]
    if args.lengths:
        data["lengths"] = [int(x) if x.isdigit() else x for x in args.lengths]
    if args.metadata:
        try:
            data["metadata"] = json.loads(args.metadata)
        except json.JSONDecodeError as err:
            raise UsageError(f"--metadata is not JSON ({err.msg}): give a JSON object") from err
    return data, where


def resolve_model(name: str) -> str:
    """A catalogue name (``lch models list``) as its folder, fetched on first use; anything else as given."""
    from harness.models.catalogue import MODELS

    if name in MODELS and not Path(name).exists():
        from harness.models.fetch import fetch_model

        return str(fetch_model(name))
    return name


def run_sweep(args: argparse.Namespace) -> int:
    from harness.plan.devices import parse_memory
    from harness.sweep import gather
    from harness.sweep.run import sweep
    from harness.sweep.spec import expand, parse_spec

    data, where = declared(args)
    if not args.file and not data:
        raise UsageError("lch sweep needs a sweep: a sweep file, or --models and --tasks (see `lch sweep --help`)")
    spec = parse_spec(data, where)
    gpu_memory = parse_memory(args.gpu_memory).size if args.gpu_memory else None
    out = (
        Path(args.output or Path(DEFAULT_OUTPUT) / (Path(args.file).stem if args.file else "sweep"))
        .expanduser()
        .resolve()
    )
    cells = expand(spec, where, resolve_model)
    outcome = sweep(spec, cells, out, args.address, args.dry_run, gpu_memory)
    if args.dry_run:  # a cell whose plan fails (bad input) fails the dry run too, as it would the run
        return EXIT_USAGE if any(p.status == "failed" for p in outcome.prepared) else EXIT_OK
    gather.record(out, spec, outcome)
    print(gather.outcome_table(outcome.prepared))
    if any(p.status in ("done", "skipped") for p in outcome.prepared):
        for path in gather.leaderboard(out):
            print(f"  {path}")
    by_variant = gather.series(outcome.prepared)
    if by_variant:
        for path in gather.step_reports(out, by_variant):
            print(f"  {path}")
    code = EXIT_OK if outcome.complete else EXIT_USAGE
    if args.gate:
        if not by_variant:
            raise UsageError(
                "--gate compares checkpoints of a training run: give models as a glob of at least two "
                "checkpoint folders (checkpoint-<step>) with results"
            )
        found, text = gather.gate(by_variant, None if args.gate == "previous" else args.gate)
        print(text, file=sys.stdout)
        code = code or (EXIT_REGRESSION if found else EXIT_OK)
    return code
