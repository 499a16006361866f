"""Plain ``lm_eval`` on lm-eval's next release: the source of its plugin branch (``../shared/lm-eval-next/``, PR #4015
on #4013 / #4014, a main that lacks functions 0.4.13 has) first on ``PYTHONPATH``, our package as installed. That
lm-eval discovers our models and tasks itself (our backport stands aside), and the runs give the numbers the same
runs give on the installed 0.4.13."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.conftest import SHARED_DATA

TARBALL = SHARED_DATA.parent / "lm-eval-next" / "lm-eval-pr4015.tar.gz"
pytestmark = pytest.mark.skipif(not TARBALL.is_file(), reason=f"needs {TARBALL}")


@pytest.fixture(scope="module")
def next_lm_eval(tmp_path_factory) -> Path:
    """The branch's source unpacked; the folder to put first on ``PYTHONPATH``."""
    root = tmp_path_factory.mktemp("lm-eval-next")
    with tarfile.open(TARBALL) as archive:
        archive.extractall(root, filter="data")
    (source,) = [p.parent.parent for p in root.glob("*/lm_eval/__init__.py")]
    return source


def _lm_eval(args: list[str], cwd: Path, lm_eval_path: Path | None, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LCH_CACHE": str(cache)}
    env.pop("PYTHONPATH", None)
    if lm_eval_path is not None:
        env["PYTHONPATH"] = str(lm_eval_path)
    return subprocess.run(
        [sys.executable, "-m", "lm_eval", *args], cwd=cwd, capture_output=True, text=True, timeout=500, env=env
    )


def test_the_branch_is_the_lm_eval_imported_and_lacks_what_0_4_13_has(next_lm_eval, tmp_path):
    code = "import lm_eval, lm_eval.api.metrics as m; print(lm_eval.__file__, hasattr(m, 'unweighted_mean_stderr'))"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(next_lm_eval)},
    )
    path, has = done.stdout.split()
    assert Path(path).is_relative_to(next_lm_eval) and has == "False", done.stderr[-2000:]


def test_lm_eval_ls_tasks_lists_ours_once(next_lm_eval, tmp_path):
    done = _lm_eval(["ls", "tasks"], tmp_path, next_lm_eval, tmp_path / "cache")
    assert done.returncode == 0, done.stderr[-3000:]
    names = [line.split("|")[1].strip() for line in done.stdout.splitlines() if line.startswith("|")]
    for ours in ("ppl_govreport", "longppl_govreport", "lch_ruler", "lch_ruler_niah_m", "lch_babilong", "mrqa"):
        assert names.count(ours) == 1, ours


def _outcome(out: Path) -> dict:
    (path,) = out.rglob("results_*.json")
    data = json.loads(path.read_text())
    return {key: data.get(key) for key in ("results", "groups", "n-samples")}


@pytest.mark.parametrize("case", ["perplexities", "ruler_group"])
def test_plain_lm_eval_runs_give_the_numbers_they_give_on_0_4_13(case, next_lm_eval, tiny_model_dir, tmp_path):
    from harness.data.synthetic import synthetic_reports

    if case == "perplexities":
        corpus = tmp_path / "reports.jsonl"
        corpus.write_text("".join(json.dumps({"report": t}) + "\n" for t in synthetic_reports(3, 300, seed=1)))
        tasks = "ppl_govreport,longppl_govreport"
        meta = {
            "data_files": str(corpus),
            "min_tokens": 1,
            "num_docs": 3,
            "evaluator": str(tiny_model_dir),
            "trunc_len": 64,
            "sliding_window": 32,
        }
    else:
        tasks = "lch_ruler_niah_m"
        meta = {"lengths": [1024, 2048], "num_samples": 1, "essays": "synthetic"}
    outcomes = []
    for lm_eval_path in (next_lm_eval, None):
        out = tmp_path / ("next" if lm_eval_path else "installed")
        done = _lm_eval(
            [
                "run",
                "--model",
                "hf-pic",
                "--model_args",
                f"pretrained={tiny_model_dir}",
                "--device",
                "cpu",
                "--tasks",
                tasks,
                "--metadata",
                json.dumps(meta),
                "--output_path",
                str(out),
            ],
            tmp_path,
            lm_eval_path,
            tmp_path / "cache",
        )
        assert done.returncode == 0, done.stderr[-3000:]
        outcomes.append(_outcome(out))
    assert outcomes[0] == outcomes[1]
    results = outcomes[0]["results"]
    if case == "perplexities":
        assert results["ppl_govreport"]["n_docs,none"] == 3 and results["longppl_govreport"]["n_tokens,none"] > 0
    else:  # the group's per-length curve (ours, added after lm-eval's aggregation) is there on both
        group = results["lch_ruler_niah_m"]
        assert {"len_1024,none", "len_2048,none", "len_1024_stderr,none"} <= set(group)
