"""vllm-pic under tensor and data parallelism against one rank, on a real vLLM (the ``vllm_env`` fixture, as in
``test_vllm_engine.py``). A module of its own, with no module-scoped fixture, so that the suite's scheduler
(``tests/conftest.py``) can run it beside ``test_vllm_engine.py``'s engine runs instead of after them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.engines.test_vllm_engine import run, write_corpus

pytestmark = pytest.mark.slow  # three vLLM runs (one rank, tensor / data parallel): the slow tier


def test_tensor_and_data_parallel_score_as_one_rank(vllm_env, tmp_path):
    """vllm-pic with ``tensor_parallel_size=2`` (one core per rank: VLLM_CPU_OMP_THREADS_BIND) and with
    lm-eval's ``data_parallel_size=2`` (two Ray replicas) against one rank, on a tiny trained Llama whose 4
    heads split over 2 ranks (SmolLM2's 9 do not) and whose head size (64) vLLM's CPU attention supports:
    `lch agree` finds the same generations and log-probabilities."""
    import os

    from harness.models.tiny import build_tiny_model

    model = build_tiny_model(hidden=256, heads=4, kv_heads=2, train_steps=100)
    docs = write_corpus(tmp_path)
    meta = {
        "data_files": str(docs),
        "text_field": "text",
        "min_tokens": 300,
        "max_tokens": 600,
        "num_docs": 2,
        "lengths": [1024],
        "num_samples": 2,
        "essays": "synthetic",
    }
    runs = {}
    for name, parallel in (("one", ""), ("tp2", ",tensor_parallel_size=2"), ("dp2", ",data_parallel_size=2")):
        env = vllm_env.environ()
        if name == "tp2" and "VLLM_CPU_OMP_THREADS_BIND" not in env:
            env["VLLM_CPU_OMP_THREADS_BIND"] = "|".join(str(r % (os.cpu_count() or 1)) for r in range(2))
        runs[name] = tmp_path / name
        run(
            vllm_env.command(
                "eval",
                "--model",
                "vllm-pic",
                "--model_args",
                f"pretrained={model},dtype=float32,enforce_eager=True,max_model_len=2048,pic=naive,"
                f"pic_ratio=2{parallel}",
                "--tasks",
                "ppl_govreport,lch_ruler_niah_single_1",
                "--metadata",
                json.dumps(meta),
                "--log_samples",
                "--output_path",
                str(runs[name]),
            ),
            env=env,
        )
    for name in ("tp2", "dp2"):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness.cli",
                "agree",
                str(runs["one"]),
                str(runs[name]),
                "--tokenizer",
                "none",
                "-o",
                str(tmp_path / name),
            ],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stdout[-3000:]
        tasks = {t["task"]: t for t in json.loads((tmp_path / f"{name}.json").read_text())["tasks"]}
        assert tasks["lch_ruler_niah_single_1"]["exact_match"] == 1.0
        assert tasks["ppl_govreport"]["max_logprob_diff"] < 1e-3 and tasks["ppl_govreport"]["n_paired"] == 2
    for name, key in (("tp2", "tensor_parallel_size"), ("dp2", "data_parallel_size")):
        assert json.loads(next(runs[name].rglob("results_*.json")).read_text())["config"]["model_args"][key] == 2
