"""Reporting commands (leaderboard, regress, correlate, plot, agree, template-effect): they read result files only."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.core.errors import LchError, UsageError
from harness.core.files import write_json_atomic, write_text_atomic
from harness.core.options import MAX_SEED
from harness.metrics.paired import DEFAULT_ALPHA, DEFAULT_RESAMPLES, DEFAULT_SEED, INTERVALS
from harness.reporting import agreement
from harness.reporting.comparability import check_side_by_side, parse_allow
from harness.reporting.runs import load_runs
from harness.reporting.samples import report_json

ALLOW_HELP = (
    "compare runs that differ in these run-record fields anyway (comma-separated, e.g. dtype for fp32 vs "
    "bf16; task_options: tasks run with other options); without it runs not run alike exit 3 before any "
    "verdict"
)
ONE_TASK_EXAMPLES = {"depth": "lch_ruler_niah_single_1", "pic": "hellobench_htg or longbench_write"}


def add(sub: argparse._SubParsersAction) -> None:
    board = sub.add_parser("leaderboard", help="one row per run, one column per metric: CSV + Markdown + HTML")
    board.add_argument("runs", nargs="+", help="lm-eval output folders (or results_*.json files)")
    board.add_argument("-o", "--output", required=True, help="CSV path; .md and .html are written beside it")
    board.add_argument("--sort", help="metric column to sort by, best first (e.g. lch_ruler/len_4096)")
    board.add_argument("--all", action="store_true", help="every run, not only the latest per configuration")
    board.add_argument("--on-error", default="fail", choices=["fail", "skip"], help="malformed results files")
    board.add_argument("--allow", action="append", help=ALLOW_HELP)
    board.add_argument(
        "--cost",
        action="store_true",
        help="add what each run cost: wall time, device, peak memory, tokens and their rate, judge tokens",
    )
    board.add_argument(
        "--common",
        action="store_true",
        help="compare on the samples every run scored (runs that skipped other samples: truncation "
        "skip, unparsed judgements), with the n of each score; needs --log_samples runs",
    )
    board.set_defaults(handler=run_leaderboard, outputs=_leaderboard_outputs)
    reg = sub.add_parser("regress", help="gate a run on a baseline: exit 0 ok, 1 regression, 2 unusable input")
    reg.add_argument("run", help="lm-eval output folder (its latest results_*.json) or a results file")
    reg.add_argument("--baseline", required=True, help="baseline JSON (results/baselines/NAME.json)")
    reg.add_argument("--junit", help="write a JUnit XML report here")
    reg.add_argument("--update-baseline", action="store_true", help="write the baseline from this run instead")
    reg.add_argument(
        "--abs-tol",
        type=float,
        default=0.0,
        help="with --update-baseline: tolerance of scores, in their own units (points of a x100 score)",
    )
    reg.add_argument(
        "--rel-tol",
        type=float,
        default=0.0,
        help="with --update-baseline: tolerance of perplexities, as a share of the baseline (0.01: 1%%)",
    )
    reg.add_argument(
        "--all-metrics",
        action="store_true",
        help="with --update-baseline: gate bookkeeping too (token / document counts), not only scores",
    )
    reg.add_argument("--k", type=float, default=2.0, help="with --update-baseline: default stderr multiple")
    reg.add_argument(
        "--allow-mismatch",
        action="store_true",
        help="gate a run whose architecture, dtype, inference, length, chat template or seeds differ from "
        "the baseline's (refused with exit 3 otherwise); paired: leave out documents whose doc_hash "
        "differs from the baseline's",
    )
    reg.add_argument(
        "--paired",
        action="store_true",
        help="with --update-baseline: keep each gated score's per-document values (the run must log "
        "samples: --log_samples); a run that logs samples is then gated on the paired difference: "
        "it fails when a drop is significant (p < --alpha) and beyond --abs-tol / --rel-tol",
    )
    reg.add_argument(
        "--alpha",
        type=float,
        default=DEFAULT_ALPHA,
        help=f"paired gate: significance level of the paired test (default {DEFAULT_ALPHA:g})",
    )
    reg.add_argument(
        "--aggregate-only",
        action="store_true",
        help="gate on aggregate values only, even with a paired baseline (the tolerance gate)",
    )
    # the baseline it writes is removed if the command fails; a JUnit report stays: at exit 2 / 3 it says why
    reg.set_defaults(handler=run_regress, outputs=lambda args: [args.baseline] if args.update_baseline else [])
    corr = sub.add_parser(
        "correlate",
        help="Pearson / Spearman / Kendall between metrics across runs (p-values and 95%% "
        "CIs from one approximation each; 5 runs at least), plot + report",
    )
    corr.add_argument("runs", nargs="+", help="lm-eval output folders (or results_*.json files)")
    corr.add_argument("--x", help="metric on the x axis, e.g. longppl_govreport/longppl")
    corr.add_argument("--y", nargs="+", default=[], help="metric(s) on the y axis")
    corr.add_argument("--matrix", nargs="+", help="matrix mode: pairwise coefficients of these metrics")
    corr.add_argument("--method", default="pearson", choices=["pearson", "spearman", "kendall"], help="matrix mode")
    corr.add_argument("-o", "--output", default="reports/correlation", help="folder for PNG / Markdown / JSON")
    corr.add_argument("--allow", action="append", help=ALLOW_HELP)
    corr.set_defaults(handler=run_correlate)
    plot = sub.add_parser(
        "plot",
        help="PNG figures: score vs context length; generation length / quality vs PIC ratio",
        description="context: score vs context length per configuration from <task>/len_<L> "
        "(RULER, BABILong). pic: generation length and quality vs PIC ratio, one "
        "panel per base model and method (the PIC paper, Fig. 1). depth: heat map of the "
        "score per needle-depth bucket and context length, one panel per run, from "
        "<task>/depth_<D>_len_<L> (RULER niah_*, synthetic BABILong).",
    )
    plot.add_argument("kind", choices=["context", "pic", "depth"])
    plot.add_argument("runs", nargs="+", help="lm-eval output folders (or results_*.json files)")
    plot.add_argument(
        "--task",
        nargs="+",
        required=True,
        help="context: tasks / groups with len_<L> metrics (lch_ruler lch_babilong); pic, depth: one task",
    )
    plot.add_argument(
        "-o",
        "--output",
        help="PNG path (default reports/context_length.png, reports/pic_<task>.png or reports/depth_<task>.png)",
    )
    plot.add_argument("--length-metric", default="length", help="pic: length metric of the task (default length)")
    plot.add_argument("--quality-metric", default="quality", help="pic: quality metric of the task (default quality)")
    plot.add_argument(
        "--appendix-a",
        action="store_true",
        help="pic: average length / quality over shared non-corrupted logged samples (the PIC paper App. A)",
    )
    plot.add_argument("--threshold", type=float, default=0.2, help="pic --appendix-a: CR threshold (default 0.2)")
    plot.add_argument("--allow", action="append", help=ALLOW_HELP)
    plot.set_defaults(handler=run_plot)
    agree = sub.add_parser(
        "agree",
        help="agreement of two runs of the same tasks (engines, dtypes): exit 0 agree, 1 differ",
        description="Pairs the logged samples (--log_samples) of two runs by document: exact-match "
        "rate of generations and their first diverging token, per-token log-probability "
        "differences, per-sample score deltas with a paired test, aggregate metric "
        "deltas. Exit 0 when every shared task agrees within the tolerances, 1 when one "
        "does not, 2 on unusable input, 3 when the runs were not run alike (model, "
        "dtype, inference, length, chat template, seeds; --allow).",
    )
    agree.add_argument("run_a", help="lm-eval output folder (its latest results_*.json) or a results file")
    agree.add_argument("run_b", help="the run to compare with A")
    agree.add_argument("-o", "--output", help="write OUTPUT.md and OUTPUT.json (default: Markdown on stdout only)")
    agree.add_argument(
        "--tokenizer", help="tokenizer for diverging tokens (default: run A's model; 'none': characters)"
    )
    agree.add_argument("--allow", action="append", help=ALLOW_HELP)
    defaults = agreement.Tolerances()
    agree.add_argument(
        "--min-exact-match",
        type=float,
        default=defaults.min_exact_match,
        help=f"share of identical generations needed (default {defaults.min_exact_match:g})",
    )
    agree.add_argument(
        "--max-logprob-diff",
        type=float,
        default=defaults.max_logprob_diff,
        help=f"largest allowed per-token log-probability difference (default {defaults.max_logprob_diff:g})",
    )
    agree.add_argument(
        "--max-rel-diff",
        type=float,
        default=defaults.max_rel_diff,
        help=f"largest allowed relative difference of a task metric (default {defaults.max_rel_diff:g})",
    )
    agree.set_defaults(handler=run_agree, outputs=_agree_outputs)
    effect = sub.add_parser(
        "template-effect",
        help="what a chat template does to the scores: two runs that differ in "
        "the chat template only, paired by document",
        description="Pairs the logged samples (--log_samples) of a run without a chat template "
        "(RUN_RAW) and one with it (RUN_CHAT) by document: for every task and score "
        "(per length where the task has len_<L>): n, mean raw, mean chat, chat - raw "
        "with its paired-bootstrap interval and the p of the paired test (exact "
        "McNemar for 0/1 or 0/100 scores, else Wilcoxon). Exit 0 when written, 2 on "
        "unusable input, 3 when the runs differ in more than the chat template.",
    )
    effect.add_argument(
        "run_raw", help="lm-eval output folder (its latest results_*.json) or a results file: no template"
    )
    effect.add_argument("run_chat", help="the same run with --apply_chat_template")
    effect.add_argument("-o", "--output", help="write OUTPUT.md and OUTPUT.json (default: Markdown on stdout only)")
    effect.add_argument("--allow", action="append", help=ALLOW_HELP)
    effect.add_argument(
        "--resamples",
        type=int,
        default=DEFAULT_RESAMPLES,
        help=f"bootstrap resamples of the documents (default {DEFAULT_RESAMPLES})",
    )
    effect.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"bootstrap seed (default {DEFAULT_SEED})")
    effect.add_argument(
        "--interval",
        default="percentile",
        choices=INTERVALS,
        help="bootstrap interval: percentile (default) or bca (bias-corrected and accelerated)",
    )
    effect.set_defaults(handler=run_template_effect, outputs=_agree_outputs)


def _leaderboard_outputs(args: argparse.Namespace) -> list[str]:
    from harness.reporting.leaderboard import leaderboard_paths

    return [str(p) for p in leaderboard_paths(args.output)]


def _agree_outputs(args: argparse.Namespace) -> list[str]:
    return [args.output + suffix for suffix in (".md", ".json")] if args.output else []


def run_leaderboard(args: argparse.Namespace) -> int:
    from harness.reporting.leaderboard import leaderboard, write_leaderboard

    runs, errors = load_runs(args.runs, on_error=args.on_error)
    for message in errors:
        print(f"skipped: {message}", file=sys.stderr)
    board = leaderboard(
        runs, all_runs=args.all, sort_by=args.sort, allow=parse_allow(args.allow), cost=args.cost, common=args.common
    )
    for path in write_leaderboard(board, args.output):
        print(path)
    return 0


def run_regress(args: argparse.Namespace) -> int:
    from harness.reporting.baseline import (
        attach_samples,
        baseline_from_run,
        check_baseline,
        load_baseline,
        tolerance_words,
    )
    from harness.reporting.gate_report import format_table, junit_error, junit_xml
    from harness.reporting.regress import compare, exit_code

    if args.junit and Path(args.junit).is_dir():  # found before anything runs: no report could be written there
        raise UsageError(f"--junit {args.junit} is a folder: give the path of the XML file to write")
    if args.update_baseline:
        run = load_runs([args.run])[0][-1]  # the latest results file of the folder
        baseline = baseline_from_run(
            run, Path(args.baseline).stem, args.abs_tol, args.k, rel_tol=args.rel_tol, all_metrics=args.all_metrics
        )
        notes = attach_samples(baseline, run) if args.paired else []
        check_baseline(baseline, f"the baseline of {run.path}")
        write_json_atomic(args.baseline, baseline, indent=1)
        print(f"baseline {args.baseline}: {len(baseline['metrics'])} metrics from {run.path}")
        print(tolerance_words(baseline))
        for note in notes:
            print(f"note: {note}")
        return 0
    try:
        run = load_runs([args.run])[0][-1]
        rows = compare(
            run, load_baseline(args.baseline), args.allow_mismatch, alpha=args.alpha, aggregate_only=args.aggregate_only
        )
    except LchError as err:  # exit 2 or 3: the CI reader gets the reason in the report too
        if args.junit:
            write_text_atomic(args.junit, junit_error(str(err), Path(args.baseline).stem))
        raise
    print(format_table(rows))
    for sentence in (c for found in run.cautions.values() for c in found):  # what the run's scores rest on
        print(f"caution: {sentence}")
    if args.junit:
        write_text_atomic(args.junit, junit_xml(rows, Path(args.baseline).stem))
    code = exit_code(rows)
    print("REGRESSION" if code else "OK")
    return code


def run_correlate(args: argparse.Namespace) -> int:
    from harness.reporting.correlate import matrix_markdown, paired_values, write_report

    out = Path(args.output)
    runs, _ = load_runs(args.runs)
    check_side_by_side(runs, parse_allow(args.allow))
    if args.matrix:
        labels, values = paired_values(runs, args.matrix)
        write_text_atomic(out / "matrix.md", matrix_markdown(args.matrix, values, args.method))
        print(out / "matrix.md")
        return 0
    if not args.x or not args.y:
        raise UsageError("lch correlate: give --x and --y, or --matrix")
    for y_name in args.y:
        png, stats = write_report(runs, args.x, y_name, out)
        p = stats["pearson"]
        if stats.get("undefined"):
            print(f"{y_name} vs {args.x}: n={stats['n']} not estimable ({stats['undefined']}) -> {png}")
            continue
        print(
            f"{y_name} vs {args.x}: n={stats['n']} pearson {p['r']:.3f} (p={p['p']:.3g}, CI "
            f"{p['ci'][0]:.2f}..{p['ci'][1]:.2f}) "
            f"spearman {stats['spearman']['r']:.3f} kendall {stats['kendall']['r']:.3f} -> {png}"
        )
    return 0


def run_plot(args: argparse.Namespace) -> int:
    from harness.reporting.curves import declared_threshold
    from harness.reporting.pic_plot import pic_figure, pic_points_from_runs, pic_points_from_samples, pic_series
    from harness.reporting.plots import context_curves, plot_context, save_png

    allow = parse_allow(args.allow)
    task = args.task[0]
    if args.kind != "context" and len(args.task) != 1:
        raise UsageError(f"lch plot {args.kind} takes one --task (e.g. {ONE_TASK_EXAMPLES[args.kind]})")
    if not (args.kind == "pic" and args.appendix_a):  # Appendix A reads the logged samples instead
        runs = load_runs(args.runs)[0]
        check_side_by_side(runs, allow)
    if args.kind == "context":
        curves = {task: context_curves(runs, task) for task in args.task}
        bars = {task: declared_threshold(runs[-1], task) for task in args.task}  # what the newest run declared
        path = plot_context(curves, args.output or "reports/context_length.png", bars)
        for task, by_label in curves.items():
            for label, points in by_label.items():
                print(f"{task} | {label}: " + ", ".join(f"{p.name} {p.score:.4g}" for p in points))
    elif args.kind == "depth":
        from harness.reporting.depth_plot import depth_figure, depth_grids, depth_table

        grids = depth_grids(runs, task)
        path = save_png(depth_figure(grids, task), args.output or f"reports/depth_{task}.png")
        print("\n".join(depth_table(task, grids)))
    else:
        series = pic_series(
            pic_points_from_samples(args.runs, task, args.threshold)
            if args.appendix_a
            else pic_points_from_runs(runs, task, args.length_metric, args.quality_metric)
        )
        title = "Appendix-A averages" if args.appendix_a else ""
        path = save_png(
            pic_figure(series, f"{task} {args.length_metric}", f"{task} {args.quality_metric}", title),
            args.output or f"reports/pic_{task}.png",
        )
        for base, by_method in series.items():
            for method, lines in by_method.items():
                for variant, line in lines.items():
                    print(
                        f"{base} | {method} {variant}".rstrip()
                        + ": "
                        + ", ".join(f"s={r:g} len={p.length} q={p.quality} cr={p.corrupted_ratio}" for r, p in line)
                    )
    print(path)
    return 0


def run_agree(args: argparse.Namespace) -> int:
    tolerances = agreement.Tolerances(args.min_exact_match, args.max_logprob_diff, args.max_rel_diff)
    allow = parse_allow(args.allow)  # before the tokenizer loads
    report = agreement.agreement(args.run_a, args.run_b, tolerances, _diff_tokenizer(args.tokenizer, args.run_a), allow)
    _write_report(args.output, report, agreement)
    return 0 if report["agrees"] else 1


def run_template_effect(args: argparse.Namespace) -> int:
    from harness.reporting import template_effect

    if not 1 <= args.resamples <= 1_000_000:
        raise UsageError(f"--resamples {args.resamples}: give a count from 1 to 1000000 (default {DEFAULT_RESAMPLES})")
    if not 0 <= args.seed <= MAX_SEED:
        raise UsageError(f"--seed {args.seed}: give a seed from 0 to {MAX_SEED}")
    report = template_effect.template_effect(
        args.run_raw,
        args.run_chat,
        parse_allow(args.allow),
        resamples=args.resamples,
        seed=args.seed,
        interval=args.interval,
    )
    _write_report(args.output, report, template_effect)
    return 0


def _write_report(output: str | None, report: dict, module) -> None:
    """The report's Markdown (``module``'s) on stdout, and ``OUTPUT.md`` / ``OUTPUT.json`` when ``output``."""
    markdown = module.to_markdown(report)
    if output:
        for suffix, text in ((".md", markdown), (".json", report_json(report))):
            write_text_atomic(Path(output + suffix), text)
    print(markdown, end="")


def _diff_tokenizer(name: str | None, run: str):
    """The tokenizer that locates diverging tokens: ``name``, else run A's model's; None for characters."""
    name = name or agreement.model_tokenizer_name(run)
    if not name or name == "none":
        return None
    from harness.data.prompt_tokens import load_tokenizer

    try:
        return load_tokenizer(name)
    except (OSError, ValueError):
        print(
            f"lch agree: tokenizer {name} does not load here: diverging characters are shown instead", file=sys.stderr
        )
        return None
