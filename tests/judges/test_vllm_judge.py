"""A real vLLM judge: SmolLM2-135M-Instruct served by vLLM's OpenAI-compatible server (the CPU vLLM
environment, ``vllm_env``) grades LongBench-Write samples end to end through ``lch judge``.

Expected values do not come from the server: every judge answer is checked against SmolLM2's greedy
answer to the same chat messages computed here with HF ``generate`` (fp32, the same token budget), and the
judgements file against the official parser run here on those answers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import SHARED_DATA
from tests.judge_servers import VllmServer

JUDGE_PROMPT = Path(os.environ.get("LCH_LONGBENCH_WRITE_PROMPT") or SHARED_DATA / "longbench_write" / "judge.txt")
# the slow tier: a real vLLM judge server (the judge stage against local servers: the default tier)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not JUDGE_PROMPT.is_file(),
        reason=f"needs the official LongBench-Write judge prompt ({JUDGE_PROMPT}, or LCH_LONGBENCH_WRITE_PROMPT)",
    ),
]
MAX_TOKENS = 96
LBW_ROWS = [
    {"prompt": "Write a 100-word note to a neighbour about a lost cat.", "type": "Community Forum", "length": 100},
    {
        "prompt": "Write a 120-word description of a river at dawn.",
        "type": "Literature and Creative Writing",
        "length": 120,
    },
]


@pytest.fixture(scope="module")
def vllm_server(vllm_env, smollm2_dir):
    with VllmServer(vllm_env, smollm2_dir) as server:
        yield server.base_url


def samples_file(folder: Path, model: Path) -> Path:
    """LongBench-Write samples of SmolLM2 (hf-pic, 48 new tokens, chat template), logged by lm-eval."""
    data = folder / "lbw.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in LBW_ROWS))
    meta = {
        "longbench_write_data": str(data),
        "min_required_length": 0,
        "max_gen_toks": 48,
        "judge_prompt": str(JUDGE_PROMPT),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "eval",
            "--model",
            "hf-pic",
            "--model_args",
            f"pretrained={model},dtype=float32",
            "--device",
            "cpu",
            "--tasks",
            "longbench_write",
            "--metadata",
            json.dumps(meta),
            "--apply_chat_template",
            "--log_samples",
            "--output_path",
            str(folder / "run"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return next((folder / "run").rglob("samples_longbench_write_*.jsonl"))


def test_vllm_server_judges_longbench_write_samples(vllm_server, smollm2_dir, smollm2, tmp_path):
    from harness.judges.client import JudgeCache, JudgeSettings, request_body, request_key
    from harness.judges.parsing import parse_longbench_write_judgement
    from harness.judges.prompts import load_longbench_write_prompt, longbench_write_messages

    samples, cache = samples_file(tmp_path, smollm2_dir), tmp_path / "judge-cache"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "judge",
            str(samples),
            "--judge-base-url",
            vllm_server,
            "--judge-model",
            str(smollm2_dir),
            "--judge-cache-dir",
            str(cache),
            "--concurrency",
            "2",
            "--max-tokens",
            str(MAX_TOKENS),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["n_total"] == 2 and summary["judge_model"] == str(smollm2_dir)
    rows = [json.loads(line) for line in Path(summary["judgements"]).read_text().splitlines()]
    assert [r["doc_id"] for r in rows] == [0, 1]

    model, tokenizer = smollm2
    template = load_longbench_write_prompt(str(JUDGE_PROMPT))
    settings = JudgeSettings(base_url=vllm_server, model=str(smollm2_dir), max_tokens=MAX_TOKENS).resolved()
    logged = [json.loads(line)["quality"] for line in samples.read_text().splitlines()]
    assert [item["instruction"] for item in logged] == [r["prompt"] for r in LBW_ROWS]
    for row, item in zip(rows, logged):
        messages = longbench_write_messages(template, item["instruction"], item["response"])
        answer = JudgeCache(cache).get(request_key(request_body(settings, messages)))
        assert answer is not None and answer["model"] == str(smollm2_dir)
        assert answer["fingerprint"].startswith("vllm-")  # the server that answered is vLLM
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
        with torch.no_grad():
            out = model.generate(**ids, max_new_tokens=MAX_TOKENS, do_sample=False)
        expected = tokenizer.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)
        assert answer["text"] == expected
        assert row["parsed"] == parse_longbench_write_judgement(expected) and row["judge"] == str(smollm2_dir)
    assert summary["n_valid"] == sum(r["parsed"] is not None for r in rows)
