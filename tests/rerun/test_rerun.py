"""``lch rerun``: a run of ours made again from its results file. Reproduced on the same machine (every sample and
metric equal, exit 0); a recorded environment that differs named in one line before anything runs (exit 3) and run
anyway with ``--allow``; a model arg changed on purpose (``--set dtype=bfloat16``) listing what differs (exit 1); the
model found by its content elsewhere; a file without an invocation refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.cli import main

TASKS = ["ppl_govreport", "lch_ruler_niah_single_1"]


@pytest.fixture(scope="module")
def original(tiny_model_dir, tmp_path_factory) -> Path:
    """A run of a scoring task (3 documents) and a generating one (2 samples at 512 tokens), samples logged, saved
    as lm-eval's command line saves it."""
    from harness.data.synthetic import synthetic_reports
    from harness.plugin.in_process import evaluate, save_run, task_manager

    root = tmp_path_factory.mktemp("rerun")
    docs = root / "reports.jsonl"
    docs.write_text("".join(json.dumps({"report": t}) + "\n" for t in synthetic_reports(3, 150, seed=8)))
    meta = {
        "data_files": str(docs),
        "min_tokens": 1,
        "num_docs": 3,
        "lengths": [512],
        "num_samples": 2,
        "essays": "synthetic",
        "seed": 31,
    }
    results = evaluate(
        {"pretrained": str(tiny_model_dir), "dtype": "float32"},
        TASKS,
        task_manager(metadata={"pretrained": str(tiny_model_dir), **meta}, ours_only=True),
        device="cpu",
        batch_size=2,
        log_samples=True,
    )
    return save_run(results, root / "run")


def _copy(original: Path, folder: Path, edit=None) -> Path:
    """The original run's folder copied to ``folder`` (its results file edited by ``edit``); its results file."""
    shutil.copytree(original.parent, folder)
    path = folder / original.name
    if edit is not None:
        data = json.loads(path.read_text())
        edit(data)
        path.write_text(json.dumps(data))
    return path


def test_the_invocation_is_recorded_as_simple_evaluate_was_called(original, tiny_model_dir):
    data = json.loads(original.read_text())
    invocation = data["lch_invocation"]
    assert invocation["model"] == "hf-pic" and invocation["tasks"] == TASKS
    assert invocation["model_args"] == {"pretrained": str(tiny_model_dir), "dtype": "float32"}
    assert invocation["arguments"] == {"device": "cpu", "batch_size": 2}
    assert invocation["include_path"] == []  # our own task folder is not the user's
    assert "pretrained" not in invocation["metadata"] and invocation["metadata"]["seed"] == 31
    assert invocation["cwd"] == str(Path.cwd())


def test_a_run_of_relative_paths_and_a_users_group_is_rerun_from_another_folder(
    tiny_model_dir, tmp_path, monkeypatch, capsys
):
    """The demo's shape: a group YAML of the user's under a relative ``--include_path`` and a relative data file;
    the rerun, started elsewhere, runs in the folder the run was made in."""
    from harness.data.synthetic import synthetic_reports
    from harness.plugin.in_process import evaluate, save_run, task_manager

    made = tmp_path / "project"
    (made / "mytasks").mkdir(parents=True)
    (made / "mytasks" / "my_group.yaml").write_text("group: my_group\ntask:\n  - ppl_govreport\n")
    (made / "reports.jsonl").write_text(
        "".join(json.dumps({"report": t}) + "\n" for t in synthetic_reports(2, 80, seed=2))
    )
    monkeypatch.chdir(made)
    meta = {"data_files": "reports.jsonl", "min_tokens": 1, "num_docs": 2}
    results = evaluate(
        {"pretrained": str(tiny_model_dir)},
        ["my_group"],
        task_manager(["mytasks"], {"pretrained": str(tiny_model_dir), **meta}, ours_only=True),
        device="cpu",
        log_samples=True,
    )
    path = save_run(results, made / "runs" / "one")
    assert json.loads(path.read_text())["lch_invocation"]["include_path"] == [str(made / "mytasks")]
    monkeypatch.chdir(tmp_path)
    assert main(["rerun", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("reproduced: 2 of 2 samples identical")


def test_a_rerun_here_reproduces_every_sample_and_metric(original, tmp_path, capsys):
    run = _copy(original, tmp_path / "run")
    assert main(["rerun", str(run)]) == 0
    out = capsys.readouterr().out.splitlines()
    metrics = json.loads(run.read_text())["results"]
    counted = sum(
        1
        for task in TASKS
        for key, value in metrics[task].items()
        if isinstance(value, (int, float))
        and not isinstance(value, bool)
        and "_stderr" not in key
        and not key.startswith("sample_len")
    )
    assert out[0] == f"reproduced: 5 of 5 samples identical, every metric equal ({counted})"
    assert (tmp_path / "run-rerun").is_dir() and out[2].startswith(f"rerun:    {tmp_path / 'run-rerun'}")


def test_another_library_version_is_named_before_running_and_allowed_on_request(original, tmp_path, capsys):
    def older_torch(data):
        record = data["config"]["lch_run"]
        record["libraries"] = record["libraries"].replace("torch ", "torch 0.0.1+was-", 1)

    run = _copy(original, tmp_path / "run", older_torch)
    recorded = json.loads(run.read_text())["config"]["lch_run"]["libraries"]
    assert main(["rerun", str(run)]) == 3
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"lch: error: this rerun would not run as {run.name} was: libraries {recorded} -> ")
    assert err.endswith("; pass --allow libraries to run it anyway") and not (tmp_path / "run-rerun").exists()
    assert main(["rerun", str(run), "--allow", "libraries"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("reproduced: 5 of 5 samples identical")
    assert any(line.startswith(f"- run with: libraries {recorded} -> ") for line in out)


def test_a_changed_dtype_lists_the_samples_and_metrics_that_differ(original, tmp_path, capsys):
    run = _copy(original, tmp_path / "run")
    assert main(["rerun", str(run), "--set", "dtype=bfloat16", "-o", str(tmp_path / "bf16")]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("differs: ") and "- asked: dtype float32 -> bfloat16" in out
    assert "- run with: dtype float32 -> bfloat16" in out
    assert any(line.startswith("- metric ppl_govreport/") for line in out)  # scores of another precision
    rerun_record = json.loads(next((tmp_path / "bf16").glob("results_*.json")).read_text())["config"]["lch_run"]
    assert rerun_record["dtype"] == "bfloat16"


def test_the_model_is_found_by_its_content_and_a_missing_one_is_one_line(original, tiny_model_dir, tmp_path, capsys):
    def moved(data):
        data["lch_invocation"]["model_args"]["pretrained"] = str(tmp_path / "gone")

    run = _copy(original, tmp_path / "run", moved)
    assert main(["rerun", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"lch: error: the model of {run.name} (sha256:") and err.endswith(
        f"is not at {tmp_path / 'gone'} nor in the model cache: give --model-dir FOLDER holding it"
    )
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(tiny_model_dir, elsewhere)
    assert main(["rerun", str(run), "--model-dir", str(elsewhere)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("reproduced: 5 of 5 samples identical")
    assert (
        f"- the model ({json.loads(run.read_text())['config']['lch_run']['model']}) is not at {tmp_path / 'gone'}: "
        f"found at {elsewhere}" in out
    )


def test_a_results_file_without_an_invocation_is_refused(original, tmp_path, capsys):
    run = _copy(original, tmp_path / "run", lambda data: data.pop("lch_invocation"))
    assert main(["rerun", str(run)]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"lch: error: {run} records no invocation (a run of another harness, or of lch before it recorded them): "
        "rerun it by hand with lch eval"
    )
    assert main(["rerun", str(run), "--allow", "seed"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "lch: error: lch rerun --allow seed: a rerun checks model, libraries, device, dtype only"
    )
