"""``lch rerun``: a result made again from its file and compared sample by sample (:mod:`harness.rerun`)."""

from __future__ import annotations

import argparse

from harness.core.errors import UsageError


def add(sub: argparse._SubParsersAction) -> None:
    rerun = sub.add_parser(
        "rerun",
        help="make a result again from its results file and compare it with the original "
        "sample by sample: exit 0 reproduced, 1 differs",
    )
    rerun.add_argument("results", help="a results_*.json of a run of ours (or the folder lm-eval wrote it in)")
    rerun.add_argument("-o", "--output", help="folder for the new run (default: beside the original's, <name>-rerun)")
    rerun.add_argument(
        "--allow",
        action="append",
        help="run anyway where this machine differs from the record in these fields (comma-separated: "
        "model, libraries, device, dtype); without it such a rerun exits 3 before it runs",
    )
    rerun.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change a model arg for the rerun (e.g. dtype=bfloat16); named in the output",
    )
    rerun.add_argument(
        "--model-dir",
        help="a folder holding the run's model, when it is not where the run found it "
        "nor in the model cache (matched by content)",
    )
    rerun.set_defaults(handler=run_rerun, outputs=lambda args: [args.output])


def parse_sets(values: list[str]) -> dict[str, object]:
    """``--set key=value`` pairs as model args (values typed as lm-eval types model args)."""
    from harness.plugin.preflight import as_dict

    out: dict[str, object] = {}
    for value in values:
        if "=" not in value or not value.split("=", 1)[0].strip():
            raise UsageError(f"--set {value!r}: give KEY=VALUE, e.g. --set dtype=bfloat16")
        out.update(as_dict(value))  # typed as lm-eval types model args
    return out


def run_rerun(args: argparse.Namespace) -> int:
    from harness.plugin.activation import activate
    from harness.reporting.comparability import parse_allow
    from harness.rerun.environment import CHECKED
    from harness.rerun.reproduce import rerun, summary

    allow = parse_allow(args.allow)
    unknown = sorted(set(allow) - set(CHECKED))
    if unknown:
        raise UsageError(f"lch rerun --allow {','.join(unknown)}: a rerun checks {', '.join(CHECKED)} only")
    overrides = parse_sets(args.set)
    activate()
    outcome = rerun(args.results, args.output, allow, overrides, args.model_dir)
    print("\n".join(summary(outcome)))
    return 0 if outcome.comparison.reproduced else 1
