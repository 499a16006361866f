"""MRQA: the official jsonl format, the loader and a task run offline on the shared sample."""

import glob
import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.data.documents import MissingDataError
from harness.data.mrqa import load_mrqa, read_mrqa_jsonl
from harness.metrics.qa import em_f1
from tests.conftest import SHARED_DATA

SAMPLE = SHARED_DATA / "mrqa" / "NewsQA_sample.jsonl"


def test_official_format_with_header(tmp_path):
    path = tmp_path / "SQuAD-dev.jsonl"
    path.write_text(json.dumps({"header": {"dataset": "SQuAD", "split": "dev"}}) + "\n" + json.dumps(
        {"context": "Paris is in France.", "qas": [{"qid": "q1", "question": "Where is Paris?", "answers": ["France"]},
                                                   {"qid": "q2", "question": "What is in France?", "answers": ["Paris"]}]}) + "\n")
    rows = read_mrqa_jsonl(path, "SQuAD")
    assert rows == [
        {"id": "q1", "subset": "SQuAD", "context": "Paris is in France.", "question": "Where is Paris?", "answers": ["France"]},
        {"id": "q2", "subset": "SQuAD", "context": "Paris is in France.", "question": "What is in France?", "answers": ["Paris"]},
    ]
    ds = load_mrqa(subset="SQuAD", mrqa_data=str(tmp_path))["test"]  # a folder: <subset>*.jsonl
    assert len(ds) == 2 and ds[0]["context"] == "Paris is in France."
    with pytest.raises(MissingDataError, match="NewsQA"):
        load_mrqa(subset="NewsQA", mrqa_data=str(tmp_path))


@pytest.mark.skipif(not SAMPLE.exists(), reason="../shared/data not present")
def test_newsqa_task_offline(tiny_model_dir, tmp_path):
    rows = read_mrqa_jsonl(SAMPLE, "NewsQA")
    assert len(rows) >= 3 and all(r["answers"] and r["question"] and r["context"] for r in rows)
    subprocess.run([str(Path(sys.executable).parent / "lch"), "eval", "--model", "hf-pic", "--model_args",
                    f"pretrained={tiny_model_dir},dtype=float32,pic=naive,pic_ratio=2", "--device", "cpu",
                    "--tasks", "mrqa_newsqa", "--log_samples", "--output_path", str(tmp_path),
                    "--metadata", json.dumps({"mrqa_data": str(SAMPLE), "limit_docs": 4})],
                   check=True, capture_output=True)
    results = json.loads(Path(glob.glob(str(tmp_path / "**" / "results_*.json"), recursive=True)[0]).read_text())
    got = results["results"]["mrqa_newsqa"]
    samples = [json.loads(l) for l in Path(glob.glob(str(tmp_path / "**" / "samples_mrqa_newsqa_*.jsonl"),
                                                     recursive=True)[0]).read_text().splitlines()]
    assert len(samples) == 4
    scores = [em_f1(s["filtered_resps"][0].strip(), s["doc"]["answers"]) for s in samples]
    assert got["em,none"] == pytest.approx(sum(e for e, _ in scores) / 4)
    assert got["f1,none"] == pytest.approx(sum(f for _, f in scores) / 4)
    assert "rouge1,none" in got
    # length honesty: every prompt was counted in the model's tokens, none exceeded its 4096 positions
    assert got["over_length,none"] == 0 and got["prompt_tokens,none"] > 50
