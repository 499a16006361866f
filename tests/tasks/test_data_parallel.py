"""Every task family of ours under lm-eval's data parallelism (``accelerate launch --num_processes 2 -m lm_eval``, the
usual way to use several GPUs with HF models; here 2 CPU processes): the results equal the single-process run's.

lm-eval gathers every metric key of the first process from every process, so a key that exists on one process only (a
per-length score, a depth cell, a score every sample of which one process skipped) either ends the run (``KeyError``)
or is lost. Our tasks report every metric they declare on every document (None where it is not the document's;
harness/tasks/base.py), so each process holds the same keys whatever documents it drew. One run of each family at
once: token log-probabilities (PPL), RULER and BABILong at two lengths (depth cells, and the longer length skipped by
the truncation policy so that a score and a length rest on some documents only), MRQA, and long-form generation judged
by a local judge server (when the published judge prompt is in ../shared/data; the other families run without it)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.data.synthetic import synthetic_reports
from tests.conftest import SHARED_DATA
from tests.judge_servers import CannedJudge, free_port

BIN = Path(sys.executable).parent
JUDGE_PROMPT = SHARED_DATA / "longbench_write" / "judge.txt"  # the published prompt, loaded at run time
# long-form generation needs the published judge prompt (loaded at run time): left out where it is not on the machine
TASKS = [
    "ppl_govreport",
    "lch_ruler_niah_single_1",
    "lch_babilong_qa1",
    "mrqa_squad",
    *(["longbench_write"] if JUDGE_PROMPT.is_file() else []),
]
DIMENSIONS = {
    "Relevance": 4,
    "Accuracy": 3,
    "Coherence": 4,
    "Clarity": 2,
    "Breadth and Depth": 4,
    "Reading Experience": 3,
}


def _inputs(folder: Path) -> dict:
    docs, mrqa, lbw = folder / "reports.jsonl", folder / "SQuAD.jsonl", folder / "lbw.jsonl"
    docs.write_text("".join(json.dumps({"report": t}) + "\n" for t in synthetic_reports(5, 150, seed=5)))
    records = [{"header": {"dataset": "SQuAD"}}] + [
        {"context": t, "qas": [{"qid": f"q{i}", "question": f"What does report {i} count?", "answers": ["budgets"]}]}
        for i, t in enumerate(synthetic_reports(5, 120, seed=6))
    ]
    mrqa.write_text("".join(json.dumps(r) + "\n" for r in records))
    lbw.write_text(
        "".join(
            json.dumps({"prompt": f"Write a short note about river {i}.", "type": "Community Forum", "length": 20})
            + "\n"
            for i in range(5)
        )
    )
    meta = {
        "data_files": str(docs),
        "min_tokens": 0,
        "max_tokens": 160,
        "num_docs": 5,
        "lengths": ["1k", "2k"],
        "num_samples": 3,
        "essays": "synthetic",
        "source": "synthetic",
        "truncation": "skip",
        "mrqa_data": str(mrqa),
        "limit_docs": 5,
    }
    if "longbench_write" in TASKS:
        meta.update(
            {
                "longbench_write_data": str(lbw),
                "min_required_length": 0,
                "max_gen_toks": 8,
                "judge_prompt": str(JUDGE_PROMPT),
                "judge_model": "m",
                "judge_cache_dir": str(folder / "judge-cache"),
            }
        )
    return meta


def _results(folder: Path) -> dict:
    return json.loads(next(folder.rglob("results_*.json")).read_text())


def test_every_task_family_under_two_data_parallel_processes_equals_one_process(tiny_model_dir, tmp_path):
    with CannedJudge(dimensions=DIMENSIONS) as judge:
        meta = {**_inputs(tmp_path), **({"judge_base_url": judge.base_url} if "longbench_write" in TASKS else {})}
        # 1536 tokens: the 2k RULER / BABILong samples do not fit and are skipped (truncation skip); the 1k ones are
        # scored, so `score` and `len_1k` rest on some documents only
        common = [
            "--model",
            "hf-pic",
            "--model_args",
            f"pretrained={tiny_model_dir},dtype=float32,max_length=1536",
            "--device",
            "cpu",
            "--tasks",
            ",".join(TASKS),
            "--metadata",
            json.dumps(meta),
            "--log_samples",
        ]
        env = {**os.environ, "ACCELERATE_USE_CPU": "true"}
        runs = {
            "single": [str(BIN / "lch"), "eval"],
            "dp": [
                str(BIN / "accelerate"),
                "launch",
                "--multi_gpu",
                "--num_processes",
                "2",
                "--main_process_port",
                str(free_port()),
                "-m",
                "harness.cli",
                "eval",
            ],
        }
        for name, command in runs.items():
            done = subprocess.run(
                [*command, *common, "--output_path", str(tmp_path / name)],
                capture_output=True,
                text=True,
                timeout=900,
                env=env,
            )
            assert done.returncode == 0, (name, done.stdout[-2000:] + done.stderr[-4000:])
    single, dp = _results(tmp_path / "single"), _results(tmp_path / "dp")
    for task in TASKS:
        one, two = single["results"][task], dp["results"][task]
        assert sorted(one) == sorted(two), task  # the same metrics, none lost or added
        for key, value in one.items():
            if isinstance(value, float) and math.isfinite(value):
                assert two[key] == pytest.approx(value, rel=1e-6, abs=1e-9), (task, key)
            elif key not in ("alias", "name"):
                assert two[key] == value, (task, key)
    ruler, babilong = dp["results"]["lch_ruler_niah_single_1"], dp["results"]["lch_babilong_qa1"]
    assert ruler["n_skipped_len_2048,none"] == babilong["n_skipped_len_2k,none"] == 3  # the 2k samples skipped
    assert ruler["n_len_1024,none"] == babilong["n_len_1k,none"] == 3 and "len_2048,none" not in ruler
    assert any(key.startswith("depth_") for key in ruler)  # depth cells, each drawn by some documents only
    if "longbench_write" in TASKS:
        assert math.isfinite(dp["results"]["longbench_write"]["quality,none"])  # judged on every generation
    assert dp["results"]["ppl_govreport"]["n_docs,none"] == 5
    for task in TASKS:  # every document logged once, each with the metrics it was scored on
        rows = [
            json.loads(line)
            for line in next((tmp_path / "dp").rglob(f"samples_{task}_*.jsonl")).read_text().splitlines()
        ]
        assert sorted(r["doc_id"] for r in rows) == list(range(len(rows))), task
        assert all(None not in (r.get(m) for m in r["metrics"]) for r in rows), task
