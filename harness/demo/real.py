"""README's main command (``lch demo``): a registry model (:data:`DEMO_MODELS`) under five PIC variants, offline, as a
sweep of ``lch eval`` cells (its grid: :data:`DEMO_SWEEP`, a file shipped with the package): RULER / BABILong at 1k
and 2k tokens on an essay haystack, and PPL / LongPPL on essays cut to 2048 tokens with the vanilla model as
LongPPL's evaluator at ``K = d = 256`` (why: docs/demo.md); then the reports over the cells."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import LchError, MissingDataError, UsageError
from harness.core.files import writable_problem, write_json_atomic, write_text_atomic
from harness.demo.shared import DEMO_SWEEP, demo_grid, variants, write_reports
from harness.longppl.formulas import KEY_TOKEN_DEFAULTS
from harness.sweep.worker import CELLS, COMPLETE


@dataclass(frozen=True)
class DemoModel:
    """A registry model the demo can run, and how it is prompted."""

    title: str
    chat_template: bool  # instruction-tuned: prompts through its chat template
    short_start: str  # how LongPPL's short windows start (harness.longppl.formulas.KEY_TOKEN_DEFAULTS)


DEMO_MODELS = {
    "smollm2-135m": DemoModel("SmolLM2-135M-Instruct", chat_template=True, short_start="text"),
    "gemma3-270m": DemoModel("Gemma 3 270M (base)", chat_template=False, short_start="bos"),
}
DEFAULT_MODEL = "smollm2-135m"
RULER_TASKS = ["lch_ruler_niah_single_1", "lch_ruler_niah_single_2"]
BABILONG_TASKS = ["lch_babilong_qa1"]
GROUP = "lch_demo_long_context"


def longppl_settings() -> dict[str, Any]:
    """LongPPL's windows as the grid sets them, with the paper's thresholds (recorded in the metadata as run)."""
    metadata = demo_grid()["metadata"]
    return {
        "trunc_len": metadata["trunc_len"],
        "sliding_window": metadata["sliding_window"],
        "alpha": KEY_TOKEN_DEFAULTS["alpha"],
        "beta": KEY_TOKEN_DEFAULTS["beta"],
    }


@dataclass(frozen=True)
class DemoCorpus:
    """The essays the demo reads: their ``folder``, the corpus's ``name`` and how it was ``chosen``."""

    folder: Path
    name: str
    chosen: str


def demo_corpus(explicit: str | None = None) -> DemoCorpus:
    """The demo's essays: ``explicit`` (``--essays``; the name :data:`~harness.data.haystacks.BUILTIN_ESSAYS` too),
    else ``$LCH_ESSAYS``, else ``../shared/data/paul_graham_essays`` beside this checkout, else the essays shipped
    with the package; a folder given that holds no essays is refused, never replaced by the next."""
    import os

    from harness.data.haystacks import BUILTIN_ESSAYS, BUILTIN_ESSAYS_DIR

    def shipped(chosen: str) -> DemoCorpus:
        if not any(BUILTIN_ESSAYS_DIR.glob("*.txt")):
            raise MissingDataError(
                f"the essays shipped with the package are not in {BUILTIN_ESSAYS_DIR}: reinstall "
                "lch-harness, or pass --essays DIR (a folder of .txt essays)"
            )
        return DemoCorpus(BUILTIN_ESSAYS_DIR, BUILTIN_ESSAYS, chosen)

    for given, what in ((explicit, "--essays"), (os.environ.get("LCH_ESSAYS"), "$LCH_ESSAYS")):
        if given == BUILTIN_ESSAYS:
            return shipped(f"shipped with the package, named by {what}")
        if given:  # a folder asked for is the one used, or the demo stops: never another folder of essays instead
            folder = Path(given).expanduser()
            if not folder.is_dir():
                raise MissingDataError(
                    f"{what} {given} is not a folder: give a folder of .txt essays, or "
                    f"{BUILTIN_ESSAYS} (the essays shipped with the package)"
                )
            if not any(folder.glob("*.txt")):
                raise MissingDataError(
                    f"{what} {given} holds no .txt file: give a folder of .txt essays, or "
                    f"{BUILTIN_ESSAYS} (the essays shipped with the package)"
                )
            return DemoCorpus(folder, folder.resolve().name, what)
    checkout = Path(__file__).resolve().parents[2]
    beside = checkout.parent / "shared" / "data" / "paul_graham_essays"
    if (checkout / "pyproject.toml").is_file() and any(beside.glob("*.txt")):  # a source checkout, not an install
        return DemoCorpus(beside, beside.name, "beside the checkout")
    return shipped("shipped with the package")


def group_yaml(tasks: list[str]) -> str:
    lines = [f"group: {GROUP}", "task:"] + [f"  - {t}" for t in tasks]
    lines += ["aggregate_metric_list:", "  - metric: score", "    weight_by_size: false", "metadata:", "  version: 1.0"]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class DemoSetup:
    """What the demo's runs read, resolved before any of them: its essays, model folder, output, its tasks' metadata
    (the grid's, with the run-time paths) and the folder of its group of tasks."""

    corpus: DemoCorpus
    model_dir: Path
    out: Path
    metadata: dict
    group_dir: Path


def prepare_demo(
    output: str | Path = "results/demo",
    essays: str | None = None,
    lengths: tuple[str, ...] | None = None,
    num_samples: int | None = None,
    num_docs: int | None = None,
    doc_tokens: int | None = None,
    model: str = DEFAULT_MODEL,
) -> DemoSetup:
    """The demo's inputs (:func:`demo_corpus` of ``essays`` first: a mistake costs no fetch and no output folder),
    its output folder, the model fetched, the demo's group written and its tasks' metadata: the grid's
    (:data:`DEMO_SWEEP`; a size given here replaces the grid's) with what this run found."""
    if model not in DEMO_MODELS:
        raise UsageError(f"the demo runs {', '.join(DEMO_MODELS)}; got --model {model!r}")
    demo_model = DEMO_MODELS[model]
    from harness.models.fetch import fetch_model

    corpus = demo_corpus(essays)
    essays_dir = corpus.folder
    out = Path(output).expanduser().resolve()
    problem = writable_problem(str(out), folder=True)
    if problem:
        raise UsageError(f"--output {output}: {problem}; give a folder you can write")
    out.mkdir(parents=True, exist_ok=True)
    model_dir = fetch_model(model)
    group_dir = out / "tasks"
    write_text_atomic(group_dir / f"{GROUP}.yaml", group_yaml(RULER_TASKS + BABILONG_TASKS))
    grid = demo_grid()
    sizes = {
        "lengths": list(lengths or grid["lengths"]),
        "num_samples": num_samples,
        "num_docs": num_docs,
        "min_tokens": doc_tokens,
        "max_tokens": doc_tokens,
    }
    metadata = {
        **grid["metadata"],
        **{key: value for key, value in sizes.items() if value is not None},
        "pretrained": str(model_dir),  # lm-eval's CLI merges model_args into task metadata; tasks size prompts by it
        # RULER and BABILong: real prose haystack / filler, the chat template counted when fitting
        "essays": str(essays_dir),
        "filler": str(essays_dir),
        "chat_template": demo_model.chat_template,
        # PPL / LongPPL: the essays; the vanilla model as evaluator (docs/demo.md)
        "data_files": str(essays_dir),
        "evaluator": str(model_dir),
        "key_cache_dir": str(out / "keytokens"),
        **longppl_settings(),
        "short_start": demo_model.short_start,
    }
    return DemoSetup(corpus, model_dir, out, metadata, group_dir)


def demo_sweep(setup: DemoSetup, model: str, chosen: list[tuple[str, dict]] | None = None) -> Any:
    """The demo as a sweep (:class:`harness.sweep.spec.SweepSpec`): the grid's, with this run's model, paths and
    ``chosen`` variants (default the grid's)."""
    from harness.sweep.spec import parse_spec

    grid = demo_grid()
    metadata = {k: v for k, v in setup.metadata.items() if k not in ("pretrained", "lengths")}
    lm_eval = {
        **grid.get("lm_eval", {}),
        "include_path": str(setup.group_dir),
        "apply_chat_template": DEMO_MODELS[model].chat_template,
    }
    return parse_spec(
        {
            **grid,
            "models": [str(setup.model_dir)],
            "variants": dict(chosen or variants()),
            "lengths": setup.metadata["lengths"],
            "metadata": metadata,
            "lm_eval": lm_eval,
        },
        str(DEMO_SWEEP),
    )


def run_real_demo(
    output: str | Path = "results/demo",
    essays: str | None = None,
    lengths: tuple[str, ...] | None = None,
    num_samples: int | None = None,
    num_docs: int | None = None,
    doc_tokens: int | None = None,
    variants: list[tuple[str, dict]] | None = None,
    model: str = DEFAULT_MODEL,
) -> dict:
    """Run the demo's sweep, then its reports; returns the summary also written to ``summary.json``. A cell with a
    result from an earlier demo of the same settings is not run again."""
    from harness.sweep.gather import record
    from harness.sweep.run import sweep
    from harness.sweep.spec import expand

    start = time.perf_counter()
    setup = prepare_demo(output, essays, lengths, num_samples, num_docs, doc_tokens, model)
    demo_model, out, metadata = DEMO_MODELS[model], setup.out, setup.metadata
    spec = demo_sweep(setup, model, variants)
    cells = expand(spec, str(DEMO_SWEEP))
    outcome = sweep(spec, cells, out, log=lambda line: print(line, file=sys.stderr))
    record(out, spec, outcome)
    failed = [p for p in outcome.prepared if p.status == "failed"]
    if failed:
        raise DemoFailed(
            f"the demo's cell {failed[0].cell.label!r} failed: {failed[0].line} (its log: "
            f"{out / 'logs' / (failed[0].folder.name + '.log')})"
        )
    rows = [
        summary_row(
            p.cell.variant,
            spec.variants[p.cell.variant],
            cell_results(p.folder),
            metadata["lengths"],
            cell_seconds(p.folder),
        )
        for p in outcome.prepared
    ]
    headline = [
        f"{GROUP}/score",
        *(f"{t}/score" for t in RULER_TASKS + BABILONG_TASKS),
        "longppl_govreport/longppl",
        "longppl_govreport/ppl_nobos",
        "longppl_govreport/n_key_tokens",
    ]
    paths, stats = write_reports(out / CELLS, out, ppl_metric="longppl_govreport/ppl_nobos", headline=headline)
    paths += long_context_reports(out)
    corpus = setup.corpus
    summary = {
        "model": str(setup.model_dir),
        "title": demo_model.title,
        "short_start": demo_model.short_start,
        "corpus": {"name": corpus.name, "chosen": corpus.chosen, "folder": str(corpus.folder)},
        "lengths": list(metadata["lengths"]),
        "num_samples": metadata["num_samples"],
        "num_docs": metadata["num_docs"],
        "doc_tokens": metadata["max_tokens"],
        "longppl_settings": longppl_settings(),
        "rows": rows,
        "longppl_vs_ppl": stats,
        "seconds": round(time.perf_counter() - start, 1),
    }
    write_json_atomic(out / "summary.json", summary, indent=2)
    print(format_summary(summary))
    for path in paths:
        print(f"  {path}")
    return summary


class DemoFailed(LchError):
    """A cell of the demo ended without a result (its one line, and where its log is)."""


def cell_results(folder: Path) -> dict:
    """The lm-eval results a cell of the demo wrote."""
    import json

    return json.loads(next(folder.rglob("results_*.json")).read_text(encoding="utf-8"))


def cell_seconds(folder: Path) -> float:
    """A cell's run time as its ``cell.json`` records it (an earlier demo's for a cell not run again)."""
    import json

    return float(json.loads((folder / COMPLETE).read_text(encoding="utf-8"))["seconds"])


def summary_row(name: str, pic_args: dict, run: dict, lengths, seconds: float) -> dict:
    """One variant's summary line from its lm-eval results ``run`` (``variant``: the demo's name; ``run``: reports')."""
    from harness.data.lengths import length_label, length_tokens, parse_lengths
    from harness.reporting.labels import name_from_results

    results = run["results"]

    def mean_at(tasks: list[str], metric: str) -> float:
        return sum(results[t][f"{metric},none"] for t in tasks) / len(tasks)

    parsed = parse_lengths(list(lengths), [])
    lp = results["longppl_govreport"]
    return {
        "variant": name,
        "run": name_from_results(run).text,
        **pic_args,
        "ruler": {length_label(x): mean_at(RULER_TASKS, f"len_{length_tokens(x)}") for x in parsed},
        "babilong": {length_label(x): mean_at(BABILONG_TASKS, f"len_{length_label(x)}") for x in parsed},
        "long_context_score": results[GROUP]["score,none"],
        "ppl": lp["ppl_nobos,none"],
        "longppl": lp["longppl,none"],
        "n_key_tokens": int(lp["n_key_tokens,none"]),
        "n_tokens": int(lp["n_tokens,none"]),
        "seconds": round(seconds, 1),
    }


def long_context_reports(out: Path) -> list[Path]:
    """Score-vs-length PNG of the RULER / BABILong tasks and the long-context score vs PPL / LongPPL."""
    from harness.reporting.correlate import write_report
    from harness.reporting.plots import context_curves, plot_context
    from harness.reporting.runs import load_runs

    runs, _ = load_runs([out / CELLS])
    curves = {task: context_curves(runs, task) for task in RULER_TASKS + BABILONG_TASKS}
    paths = [plot_context(curves, out / "context_length.png")]
    for x in ("longppl_govreport/longppl", "longppl_govreport/ppl_nobos"):
        png, _ = write_report(runs, x, f"{GROUP}/score", out / "correlation")
        paths.append(png)
    return paths


def format_summary(summary: dict) -> str:
    """The ten-second read: one line per variant, then the correlations with their n."""
    from harness.reporting.correlate import correlation
    from harness.reporting.labels import split_shared

    rows, corpus, windows = summary["rows"], summary["corpus"], summary["longppl_settings"]
    labels = list(rows[0]["ruler"])
    shared, names = split_shared([r["run"] for r in rows])  # runs named as the leaderboard and plots name them
    width = max(len(n) for n in names + ["run"]) + 2
    head = (
        f"{'run':<{width}}"
        + "".join(f"{'RULER ' + l:>10}" for l in labels)
        + "".join(f"{'bAbI ' + l:>9}" for l in labels)
        + f"{'long':>7}{'PPL':>8}{'LongPPL':>9}{'keys':>6}{'s':>6}"
    )
    lines = [
        f"\n{summary['title']}, {summary['num_samples']} samples per RULER/BABILong task and length, "
        f"PPL/LongPPL on {summary['num_docs']} essays x {summary['doc_tokens']} tokens "
        f"(LongPPL: vanilla model as evaluator, K={windows['trunc_len']}, d={windows['sliding_window']}, "
        f"alpha={windows['alpha']}, beta={windows['beta']}, short windows start with "
        f"{'BOS' if summary['short_start'] == 'bos' else 'the text'}; keys = key tokens found)"
        + f"\nessays (RULER haystack, BABILong filler, PPL / LongPPL): {corpus['name']} ({corpus['chosen']}: "
        f"{corpus['folder']})" + (f"\nruns of {shared}" if shared else ""),
        head,
    ]
    for r, name in zip(rows, names):
        lines.append(
            f"{name:<{width}}"
            + "".join(f"{r['ruler'][l]:>10.1f}" for l in labels)
            + "".join(f"{r['babilong'][l]:>9.1f}" for l in labels)
            + f"{r['long_context_score']:>7.1f}{r['ppl']:>8.2f}{r['longppl']:>9.2f}{r['n_key_tokens']:>6d}"
            f"{r['seconds']:>6.0f}"
        )
    score = [r["long_context_score"] for r in rows]
    for metric in ("longppl", "ppl"):
        found = correlation([r[metric] for r in rows], score, (metric, "long-context score"))
        p = found["pearson"]
        lines.append(
            f"long-context score vs {metric}: "
            + (
                f"not estimable ({found['undefined']})"
                if found["undefined"]
                else f"Pearson r = {p['r']:+.2f} (95% CI {p['ci'][0]:+.2f}..{p['ci'][1]:+.2f}, p = {p['p']:.2g}, "
                f"n = {found['n']} variants)"
            )
        )
    lines.append(f"total {summary['seconds']:.0f} s")
    return "\n".join(lines)
