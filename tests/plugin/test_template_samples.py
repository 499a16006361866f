"""A raw run that declares the chat template (``chat_template: true``) fits the very samples of the run that applies
it (``--apply_chat_template``, where ``chat_template`` follows the run by default), so that ``lch template-effect``
compares the same documents: none refitted, every document paired by its hash. hf-pic on the tiny model with a chat
template, RULER and synthetic BABILong at 1k."""

from __future__ import annotations

import json

import pytest

from harness.cli import main
from tests.judge_servers import judge_model

TASKS = ["lch_ruler_niah_single_2", "lch_babilong_qa1"]


@pytest.fixture(scope="module")
def chat_model_dir(tiny_model_dir, tmp_path_factory):
    return judge_model(tiny_model_dir, tmp_path_factory.mktemp("chat") / "model")


def _run(model_dir, folder, apply_chat_template: bool, declared: dict) -> dict:
    from lm_eval import simple_evaluate

    from harness.plugin.in_process import save_run, task_manager

    metadata = {
        "pretrained": str(model_dir),
        "lengths": ["1k"],
        "num_samples": 2,
        "essays": "synthetic",
        "source": "synthetic",
        "seed": 7,
        **declared,
    }
    results = simple_evaluate(
        model="hf-pic",
        model_args={"pretrained": str(model_dir), "dtype": "float32"},
        tasks=TASKS,
        task_manager=task_manager(metadata=metadata, ours_only=True),
        device="cpu",
        batch_size=2,
        apply_chat_template=apply_chat_template,
        log_samples=True,
    )
    save_run(results, folder)
    return results


def test_the_declared_template_gives_the_chat_runs_samples(chat_model_dir, tmp_path, capsys):
    raw = _run(chat_model_dir, tmp_path / "raw", False, {"chat_template": True})
    chat = _run(chat_model_dir, tmp_path / "chat", True, {})  # chat_template not given: it follows the run
    for task in TASKS:
        assert chat["configs"][task]["metadata"]["chat_template"] is True
        hashes = {name: [s["doc_hash"] for s in run["samples"][task]] for name, run in (("raw", raw), ("chat", chat))}
        assert hashes["raw"] == hashes["chat"] and len(hashes["raw"]) == 2  # the very same documents
        assert chat["results"][task]["over_target,none"] == 0  # fitted with the template counted: each fits
    assert main(["template-effect", str(tmp_path / "raw"), str(tmp_path / "chat"), "-o", str(tmp_path / "effect")]) == 0
    report = json.loads((tmp_path / "effect.json").read_text())
    assert sorted(t["task"] for t in report["tasks"]) == sorted(TASKS)
    for task in report["tasks"]:
        assert task["refitted"] is False and task["n_input_mismatch"] == 0 and task["n_paired"] == 2
    assert "refitted" not in capsys.readouterr().out
