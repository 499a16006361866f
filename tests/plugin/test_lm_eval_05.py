"""Plain ``lm_eval`` on lm-eval's 0.5 line: the source of its ``next0.5`` branch (``../shared/lm-eval-0.5/``,
0.5.0.dev2) first on ``PYTHONPATH``, our package as installed. That line builds requests in a task class per output
type, gives its ``Instance`` a required ``task_name``, scores through registered scorers, makes
``TaskManager.task_index`` private and drops functions of its metric registry; our tasks run on it and give the numbers
the same runs give on the installed 0.4.13.

What "the same numbers" means: the 0.5 line names a task inside a group ``<group>::<task>`` wherever 0.4.13 names it
``<task>`` (the results, ``n-samples``, ``versions``, ``higher_is_better``, ``group_subtasks``, and so our keys too);
with each such name read as 0.4.13's, lm-eval's ``results`` (every metric, its stderr, ``alias``, ``name`` and
``sample_len``), ``groups``, ``group_subtasks``, ``n-samples``, ``higher_is_better``, ``versions`` and ``n-shot`` are
equal, and so is every key of ours at the top level (cautions, absent metrics, effective lengths, group weighting, the
documents each score rests on) and in each task's metadata (configuration, metric roles and pooling, support). Left
out: each task's configuration as lm-eval dumps it (its own layout per release), our cost record (times) and lm-eval's
dates, durations and hashes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from harness.core import results as keys
from tests.conftest import SHARED_DATA

TARBALL = SHARED_DATA.parent / "lm-eval-0.5" / "lm-eval-0.5.0.dev2.tar.gz"
pytestmark = pytest.mark.skipif(not TARBALL.is_file(), reason=f"needs {TARBALL}")

LM_EVAL_KEYS = ("results", "groups", "group_subtasks", "n-samples", "higher_is_better", "versions", "n-shot")
OUR_KEYS = (keys.ABSENT, keys.CAUTIONS, keys.EFFECTIVE_LENGTH, keys.GROUP_WEIGHTING, keys.SCORED)
OUR_METADATA = (keys.CONFIGURATION, keys.METRIC_ROLES, keys.METRIC_POOLING, keys.SUPPORT)


@pytest.fixture(scope="module")
def lm_eval_05(tmp_path_factory) -> Path:
    """The branch's source unpacked; the folder to put first on ``PYTHONPATH``."""
    root = tmp_path_factory.mktemp("lm-eval-0.5")
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


def _hf_pic_run(
    model: Path, tasks: str, tmp_path: Path, lm_eval_path: Path | None, *flags: str
) -> subprocess.CompletedProcess:
    """``lm_eval run`` of hf-pic on ``model`` (the CPU) over ``tasks`` with ``flags``, 0.5 first on the path or not."""
    return _lm_eval(
        [
            "run",
            "--model",
            "hf-pic",
            "--model_args",
            f"pretrained={model}",
            "--device",
            "cpu",
            "--tasks",
            tasks,
            *flags,
        ],
        tmp_path,
        lm_eval_path,
        tmp_path / "cache",
    )


def test_the_line_is_the_lm_eval_imported_and_breaks_what_0_4_13_plugins_lean_on(lm_eval_05, tmp_path):
    code = (
        "import dataclasses, json, lm_eval, lm_eval.api.task as t, lm_eval.api.metrics as m\n"
        "import lm_eval.api.registry as r\nfrom lm_eval.api.instance import Instance\n"
        "from lm_eval.tasks import TaskManager\n"
        "print(json.dumps({'file': lm_eval.__file__,\n"
        "  'packages': [hasattr(t, '__path__'), hasattr(m, '__path__')],\n"
        "  'required': [f.name for f in dataclasses.fields(Instance) if f.default is dataclasses.MISSING\n"
        "               and f.default_factory is dataclasses.MISSING],\n"
        "  'registry': [hasattr(r, n) for n in ('get_metric', 'get_metric_aggregation', 'is_higher_better')],\n"
        "  'task_index': hasattr(TaskManager, 'task_index')}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(lm_eval_05)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout)
    assert Path(found.pop("file")).is_relative_to(lm_eval_05)
    assert found == {
        "packages": [True, True],
        "required": ["request_type", "doc", "arguments", "task_name", "doc_id"],
        "registry": [False, False, False],
        "task_index": False,
    }


def test_lm_eval_ls_tasks_lists_ours_once(lm_eval_05, tmp_path):
    done = _lm_eval(["ls", "tasks"], tmp_path, lm_eval_05, tmp_path / "cache")
    assert done.returncode == 0, done.stderr[-3000:]
    names = [line.split("|")[1].strip() for line in done.stdout.splitlines() if line.startswith("|")]
    for ours in ("ppl_govreport", "longppl_govreport", "lch_ruler", "lch_ruler_niah_m", "lch_babilong", "mrqa"):
        assert names.count(ours) == 1, ours


def _as_0_4_13(data: dict) -> dict:
    """``data`` (a results file) with the 0.5 line's ``<group>::<task>`` names read as 0.4.13 writes them, ``<task>``;
    the parts the module docstring compares."""
    text = json.dumps(data)
    for qualified in sorted((name for name in data.get("results") or {} if "::" in name), key=len, reverse=True):
        text = text.replace(qualified, qualified.rpartition("::")[2])  # keys, lists, and the sentences naming it
    data = json.loads(text)
    out = {key: data.get(key) for key in (*LM_EVAL_KEYS, *OUR_KEYS)}
    out["metadata"] = {
        task: {key: (config.get("metadata") or {}).get(key) for key in OUR_METADATA}
        for task, config in (data.get("configs") or {}).items()
    }
    return out


def _outcome(out: Path) -> dict:
    (path,) = out.rglob("results_*.json")
    return json.loads(path.read_text())


@pytest.mark.parametrize("case", ["perplexities", "ruler_group"])
def test_plain_lm_eval_runs_give_the_numbers_they_give_on_0_4_13(case, lm_eval_05, tiny_model_dir, tmp_path):
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
        meta = {"lengths": [768, 1024], "num_samples": 1, "essays": "synthetic"}
    runs = []
    for lm_eval_path in (lm_eval_05, None):
        out = tmp_path / ("0.5" if lm_eval_path else "installed")
        done = _hf_pic_run(
            tiny_model_dir,
            tasks,
            tmp_path,
            lm_eval_path,
            "--metadata",
            json.dumps(meta),
            "--output_path",
            str(out),
            "--log_samples",
        )
        assert done.returncode == 0, done.stderr[-3000:]
        # our metrics looked up in no registry of lm-eval's, and none bootstrapped (the 0.5 line's scorer would)
        assert "not found in registry" not in done.stderr and "Bootstrapping" not in done.stdout + done.stderr
        runs.append(_outcome(out))
    on_05, installed = runs
    assert _as_0_4_13(on_05) == _as_0_4_13(installed)
    results = installed["results"]
    if case == "perplexities":
        assert results["ppl_govreport"]["n_docs,none"] == 3 and results["longppl_govreport"]["n_tokens,none"] > 0
        assert results["ppl_govreport"]["ppl_stderr,none"] == "N/A"  # 0.4.13 gives our aggregations none
    else:  # the 0.5 line does name the group's tasks otherwise; the group's per-length curve (ours) is on both
        assert sorted(on_05["group_subtasks"]["lch_ruler_niah_m"]) == sorted(
            f"lch_ruler_niah_m::{task}" for task in installed["group_subtasks"]["lch_ruler_niah_m"]
        )
        group = results["lch_ruler_niah_m"]
        assert {"len_768,none", "len_1024,none", "len_768_stderr,none"} <= set(group)
        assert set(installed[keys.EFFECTIVE_LENGTH]) >= {"lch_ruler_niah_m"}


def test_a_task_name_of_nobody_in_a_run_of_ours_is_one_line_on_the_0_5_line(lm_eval_05, tiny_model_dir, tmp_path):
    """The 0.5 line matches no task name up front (0.4.13's "Tasks not found"): its task manager refuses the name as it
    loads it, which a run of ours turns into the same line."""
    done = _hf_pic_run(tiny_model_dir, "ppl_govrepot", tmp_path, lm_eval_05)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.stderr.splitlines()[-1] == (
        "lch: error: Tasks not found: ppl_govrepot; did you mean ppl_govreport? "
        "(`lch eval --tasks list` lists every task)"
    )


def test_predict_only_logs_our_tasks_predictions_on_both_lines(lm_eval_05, tiny_model_dir, tmp_path):
    """``--predict_only``: lm-eval's ``bypass`` metric (999) for a scoring and a generating task of ours, the samples
    logged, the same predictions on the 0.5 line and on 0.4.13 (both used to end in a traceback: neither line's
    bypass knows our request types)."""
    from harness.data.synthetic import synthetic_reports

    corpus = tmp_path / "reports.jsonl"
    corpus.write_text("".join(json.dumps({"report": t}) + "\n" for t in synthetic_reports(2, 300, seed=1)))
    meta = {
        "data_files": str(corpus),
        "min_tokens": 1,
        "num_docs": 2,
        "lengths": [768],
        "num_samples": 1,
        "essays": "synthetic",
    }
    predictions = []
    for lm_eval_path in (lm_eval_05, None):
        out = tmp_path / ("0.5" if lm_eval_path else "installed")
        done = _hf_pic_run(
            tiny_model_dir,
            "ppl_govreport,lch_ruler_niah_single_1",
            tmp_path,
            lm_eval_path,
            "--metadata",
            json.dumps(meta),
            "--output_path",
            str(out),
            "--predict_only",
            "--log_samples",
        )
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
        results = _as_0_4_13(_outcome(out))["results"]
        assert {task: results[task]["bypass,none"] for task in results} == {
            "ppl_govreport": 999,
            "lch_ruler_niah_single_1": 999,
        }
        samples = {
            path.name.split("_20")[0]: [json.loads(line) for line in path.read_text().splitlines()]
            for path in out.rglob("samples_*.jsonl")
        }
        assert [len(samples[name]) for name in sorted(samples)] == [1, 2], sorted(samples)
        predictions.append({name: [_leaves(row["filtered_resps"]) for row in rows] for name, rows in samples.items()})
    on_05, installed = predictions  # the 0.5 line nests a sample's responses one list deeper
    assert {name.rpartition("::")[2]: rows for name, rows in on_05.items()} == installed


def _leaves(value: object) -> list:
    return [leaf for item in value for leaf in _leaves(item)] if isinstance(value, list) else [value]
