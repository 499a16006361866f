"""BABILong prompts, loaders (local official columns, HF failure message, offline generator) and the
lch_babilong tasks in lm-eval with per-length scores."""

from __future__ import annotations

import glob
import json
import math
from pathlib import Path

import pytest

from harness.core.options import parse_options
from harness.data.documents import MissingDataError
from harness.tasks.lch_babilong import dataset as babilong
from harness.tasks.lch_babilong.scoring import TASK_LABELS, compare_answers
from tests.tasks.test_ruler import run_lch_eval


def _dataset(metadata: dict) -> dict:
    """A BABILong dataset of task metadata, as the task's ``custom_dataset`` gets it (options parsed once)."""
    return babilong.babilong_dataset(parse_options(babilong.BabilongOptions, metadata))


def test_prompt_has_the_official_structure(tmp_path):
    prompt = babilong.format_prompt("qa2", "Mary went to the garden. Mary took the milk.", "Where is the milk?")
    head, rest = prompt.split("\n\n<context>\n")
    assert head.startswith(babilong.PROMPTS["qa2"]["instruction"])
    assert "<example>" in head and "</example>" in head and head.endswith(babilong.PROMPTS["qa2"]["post_prompt"])
    assert rest == "Mary went to the garden. Mary took the milk.\n</context>\n\nQuestion: Where is the milk?"
    official = tmp_path / "prompts.json"
    official.write_text(json.dumps({"qa2": {"instruction": "INSTR", "examples": "EX", "post_prompt": "POST"}}))
    loaded = babilong.format_prompt("qa2", "ctx", "q?", str(official))
    assert loaded == "INSTR\n\nEX\n\nPOST\n\n<context>\nctx\n</context>\n\nQuestion: q?"
    assert "<example>" not in babilong.format_prompt("qa7", "ctx", "q?")  # no generator, no invented examples


def test_local_folder_and_missing_hf(tmp_path, monkeypatch):
    (tmp_path / "4k").mkdir()
    rows = [{"input": "Daniel went to the office.", "question": "Where is Daniel?", "target": "office", "extra": 1}]
    (tmp_path / "4k" / "qa1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ds = _dataset({"babilong_task": "qa1", "lengths": ["4k"], "source": str(tmp_path)})["test"]
    assert ds[0]["target"] == "office" and ds[0]["length"] == "4k" and ds[0]["prompt"].endswith("Where is Daniel?")
    with pytest.raises(MissingDataError, match="8k/qa1"):
        _dataset({"babilong_task": "qa1", "lengths": ["8k"], "source": str(tmp_path)})

    import datasets

    def offline(*args, **kwargs):
        raise ConnectionError("offline")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(MissingDataError, match="RMT-team/babilong"):
        _dataset({"babilong_task": "qa1", "lengths": ["4k"]})


@pytest.mark.parametrize("task", ["qa1", "qa2", "qa3", "qa4", "qa5"])
def test_synthetic_samples_fit_and_are_answerable(task, tiny_model_dir):
    from harness.data.prompt_tokens import PromptCounter, load_tokenizer

    meta = {
        "babilong_task": task,
        "lengths": ["0k", "2k"],
        "source": "synthetic",
        "num_samples": 2,
        "pretrained": str(tiny_model_dir),
    }
    rows = list(_dataset(meta)["test"])
    assert [r["length"] for r in rows] == ["0k", "0k", "2k", "2k"]
    count = PromptCounter(load_tokenizer(str(tiny_model_dir)))
    for row in rows:
        assert row["target"] in TASK_LABELS[task]
        assert compare_answers(row["target"], f"The answer is {row['target']}.", row["question"], task)
        if row["length"] == "2k":
            tokens = count(row["prompt"])
            assert tokens + babilong.BUDGET <= 2048 and tokens > 2048 * 0.8
    # the same story at both lengths (seeded by sample index), only the filler differs: at 0k the input
    # is the story itself; at 2k its facts appear in order, between filler sentences
    from harness.tasks.lch_babilong.babi import babi_story

    for i in (0, 1):
        facts, question, answer = babi_story(task, i)
        assert rows[i]["input"] == " ".join(facts)
        assert (
            (rows[i]["question"], rows[i]["target"])
            == (rows[i + 2]["question"], rows[i + 2]["target"])
            == (question, answer)
        )
        at = -1
        for fact in facts:
            at = rows[i + 2]["input"].index(fact, at + 1)
    assert len(rows[2]["input"]) > len(rows[0]["input"])


def test_lch_babilong_per_length_scores(tiny_model_dir, tmp_path):
    data = tmp_path / "data"
    for length, filler in (("1k", ""), ("2k", "The sun was low over the fields. " * 20)):
        (data / length).mkdir(parents=True)
        rows = [
            {"input": f"{filler}Mary went to the {place}.", "question": "Where is Mary?", "target": place}
            for place in ("garden", "kitchen", "office")
        ]
        (data / length / "qa1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = run_lch_eval(
        tmp_path / "out",
        f"pretrained={tiny_model_dir}",
        "lch_babilong_qa1",
        {"lengths": ["1k", "2k"], "source": str(data)},
    )
    got = out["results"]["lch_babilong_qa1"]
    samples = [
        json.loads(l)
        for f in glob.glob(str(tmp_path / "out" / "**" / "samples_*.jsonl"), recursive=True)
        for l in Path(f).read_text().splitlines()
    ]
    assert len(samples) == 6
    for length in ("1k", "2k"):
        mine = [
            100.0 * compare_answers(s["doc"]["target"], s["filtered_resps"][0], s["doc"]["question"], "qa1")
            for s in samples
            if s["doc"]["length"] == length
        ]
        assert got[f"len_{length},none"] == pytest.approx(sum(mine) / 3)
        assert got[f"n_len_{length},none"] == sum(s["doc"]["length"] == length for s in samples) == 3
        # its standard error, by hand: the sample standard deviation over sqrt(n) (an interval for plots and gates)
        spread = math.sqrt(sum((v - sum(mine) / 3) ** 2 for v in mine) / 2) / math.sqrt(3)
        assert got[f"len_{length}_stderr,none"] == pytest.approx(spread)
    # each score says what it rests on: 6 samples in all, 3 per length, each fewer than the stated minimum of 25
    why = "a mean of per-sample scores out of 100 over n samples has a standard error of up to 50/sqrt(n) points"
    assert out["lch_cautions"] == {
        "lch_babilong_qa1": [
            f"lch_babilong_qa1: score rests on 6 samples, len_1k on 3, len_2k on 3; fewer than 25 each: {why}"
        ]
    }
    # length honesty, counted by hand: the prompt lm-eval sent is the document's prompt, in the model's
    # tokens (the tokenizer adds its BOS, as lm-eval's HF model does); none reaches 4096 - 20 tokens
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert all(s["arguments"]["gen_args_0"]["arg_0"] == s["doc"]["prompt"] for s in samples)
    counts = [len(tok(s["doc"]["prompt"])["input_ids"]) for s in samples]
    assert got["prompt_tokens,none"] == pytest.approx(sum(counts) / len(counts))
    assert got["over_length,none"] == sum(n + babilong.BUDGET > 4096 for n in counts) == 0
