"""A mistake costs seconds, not the run: bad inputs that need no model, each refused with one `lch: error:` line,
exit 2, nothing written, within a time bound.

The bound: :data:`BOUND_S` seconds in-process (lm-eval, transformers and torch already imported by an earlier case,
as in a long session; every check here runs before a model, a dataset or a sample is touched: reading a model's
config or a task's YAML is all), and :data:`PROCESS_BOUND_S` for one case run as a fresh `lch` process (the
interpreter start and those imports: about 5 s on 2 cores, doubled for a loaded machine). A misspelt task name is
found by lm-eval, which indexes its 14,000 task YAMLs first (10-14 s on 2 cores): its bound is that index built once,
timed here on the same machine, plus :data:`BOUND_S` (the "did you mean" reads that index, it does not build a second
one). Without these checks the
same inputs cost minutes to hours: a RULER run builds every sample before scoring, an evaluation writes its
results only at the end (docs/tasks.md, "Domains and preflight").
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cli import main

BOUND_S = 5.0
PROCESS_BOUND_S = 20.0
# a task name nobody defines is lm-eval's to look up: its task index reads 14,000 YAMLs (about 4.5 s on 2 cores), the
# same cost as before any run of lm-eval's, and the "did you mean" reads that index again, not the files
LOOKUPS = ("task typo", "family task typo")


def _eval(tiny: Path, tasks: str, metadata: dict, model_args: str = "", out: str | None = None) -> list[str]:
    argv = [
        "eval",
        "--model",
        "hf-pic",
        "--model_args",
        f"pretrained={tiny}{model_args}",
        "--device",
        "cpu",
        "--tasks",
        tasks,
        "--metadata",
        json.dumps(metadata),
    ]
    return argv + (["--output_path", out] if out else [])


def cases(tiny: Path, root: Path) -> list[tuple[str, list[str], dict, str]]:
    """(id, argv, environment, the error line after 'lch: error: ' as a regex)."""
    corpus = root / "corpus.jsonl"
    ruler = {"num_samples": 1, "lengths": [1024], "essays": "synthetic"}
    docs = {"data_files": str(corpus), "min_tokens": 10}
    a_file = root / "a-file.txt"
    empty = root / "no-runs"
    return [
        (
            "samples zero",
            _eval(tiny, "lch_ruler_niah_single_1", {**ruler, "num_samples": 0}),
            {},
            r"num_samples must be between 1 and 100000, got 0$",
        ),
        (
            "samples 1e12",
            _eval(tiny, "lch_ruler_niah_single_1", {**ruler, "num_samples": 1e12}),
            {},
            r"num_samples must be between 1 and 100000, got 1000000000000$",
        ),
        (
            "lengths empty",
            _eval(tiny, "lch_ruler_niah_single_1", {**ruler, "lengths": []}),
            {},
            r"lengths must not be empty",
        ),
        (
            "length absurd",
            _eval(tiny, "lch_ruler_niah_single_1", {**ruler, "lengths": ["4k", "99999999k"]}),
            {},
            r"lengths must be between 1 and 10000000 tokens each, got '99999999k'$",
        ),
        (
            "samples x lengths",
            _eval(
                tiny,
                "lch_babilong_qa1",
                {"num_samples": 500, "lengths": [f"{k}k" for k in range(1, 300)], "source": "synthetic"},
            ),
            {},
            r"num_samples 500 x 299 lengths = 149500 samples, more than the 100000 a task builds",
        ),
        (
            "max below min",
            _eval(tiny, "ppl_govreport", {**docs, "min_tokens": 100, "max_tokens": 10}),
            {},
            r"max_tokens 10 is below min_tokens 100",
        ),
        (
            "no documents",
            _eval(tiny, "ppl_govreport", {**docs, "num_docs": 0}),
            {},
            r"num_docs must be between 1 and 100000, got 0$",
        ),
        (
            "output under a file",
            _eval(tiny, "ppl_govreport", docs, out=str(a_file / "out")),
            {},
            rf"--output_path {a_file}/out: {a_file} is a file, so nothing can be written under it",
        ),
        (
            "cache is a file",
            _eval(tiny, "ppl_govreport", docs),
            {"LCH_CACHE": str(a_file)},
            rf"\$LCH_CACHE={a_file}: {a_file} is a file, not a folder",
        ),
        (
            "task typo",
            _eval(tiny, "ppl_govreprot", docs),
            {},
            r"Tasks not found: ppl_govreprot; did you mean ppl_govreport\?",
        ),
        ("family task typo", _eval(tiny, "lch_babilong_qa99", {}), {}, r"did you mean lch_babilong_qa9\?"),
        (
            "model arg typo",
            _eval(tiny, "ppl_govreport", docs, ",pic=naive,pic_ration=4"),
            {},
            r"hf-pic: unknown model arg pic_ration; did you mean pic_ratio\?",
        ),
        (
            "report on no runs",
            ["leaderboard", str(empty), "-o", str(root / "board.csv")],
            {},
            rf"{empty}: no results_\*\.json found",
        ),
        (
            "training data missing",
            [
                "train",
                "pic-sft",
                "--model",
                str(tiny),
                "--data",
                str(root / "missing.jsonl"),
                "--output",
                str(root / "ckpt"),
            ],
            {},
            r"missing.jsonl does not exist",
        ),
    ]


@pytest.fixture(scope="module")
def table(tiny_model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("time-to-error")
    (root / "corpus.jsonl").write_text(json.dumps({"report": "The agency reviewed its costs. " * 50}) + "\n")
    (root / "a-file.txt").write_text("not a folder\n")
    (root / "no-runs").mkdir()
    main(["eval", "--tasks", "list"])  # warm: lm-eval's task index and imports, as in a session's second command
    return root, cases(tiny_model_dir, root), lm_eval_index_seconds()


def lm_eval_index_seconds() -> float:
    """Seconds lm-eval takes to index every task once (``TaskManager()``, our plugin folders included), here."""
    from lm_eval.tasks import TaskManager

    from harness.plugin.activation import activate

    activate()
    start = time.perf_counter()
    TaskManager()
    return time.perf_counter() - start


def test_bad_inputs_fail_in_seconds(table, capsys, monkeypatch):
    """Every case of :func:`cases`: exit 2, its one error line, nothing written, within :data:`BOUND_S` (the task
    lookups within lm-eval's index time plus :data:`BOUND_S`)."""
    root, rows, index_seconds = table
    report, failures = [], []
    for name, argv, environ, pattern in rows:
        before = {p for p in root.rglob("*")}
        capsys.readouterr()
        with monkeypatch.context() as mp:
            for key, value in environ.items():
                mp.setenv(key, value)
            start = time.perf_counter()
            code = main(argv)
            seconds = time.perf_counter() - start
        err = capsys.readouterr().err.strip().splitlines()
        line = err[-1] if err else ""
        bound = index_seconds + BOUND_S if name in LOOKUPS else BOUND_S
        ok = code == 2 and re.search(pattern, line.removeprefix("lch: error: ")) and seconds < bound
        report.append(f"{name:<24}{seconds:6.2f} s  exit {code}  {line}")
        if not ok:
            failures.append(f"{name}: exit {code} in {seconds:.1f} s: {line!r} (expected {pattern!r})")
        if {p for p in root.rglob("*")} != before:
            failures.append(f"{name}: left {sorted(str(p) for p in set(root.rglob('*')) - before)}")
    print("\n" + "\n".join(report))
    assert not failures, "\n".join(failures)


def test_a_fresh_process_fails_in_seconds(table):
    """One case as a new `lch` process: the interpreter start and the imports included, within
    :data:`PROCESS_BOUND_S`."""
    root, rows, _ = table
    name, argv, environ, pattern = rows[0]
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", *argv],
        capture_output=True,
        text=True,
        env={**os.environ, **environ},
        timeout=120,
    )
    seconds = time.perf_counter() - start
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1].startswith("lch: error: ")
    assert seconds < PROCESS_BOUND_S, seconds
    print(f"\nfresh process, {name}: {seconds:.2f} s")
