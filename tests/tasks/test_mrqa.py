"""MRQA: the official jsonl format, the loader and a task run offline on the shared sample."""

import glob
import json
import re
import string
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from harness.data.documents import MissingDataError
from harness.tasks.mrqa.dataset import MrqaOptions, load_mrqa, read_mrqa_jsonl
from tests.conftest import SHARED_DATA

SAMPLE = SHARED_DATA / "mrqa" / "NewsQA_sample.jsonl"


def test_official_format_with_header(tmp_path):
    path = tmp_path / "SQuAD-dev.jsonl"
    path.write_text(
        json.dumps({"header": {"dataset": "SQuAD", "split": "dev"}})
        + "\n"
        + json.dumps(
            {
                "context": "Paris is in France.",
                "qas": [
                    {"qid": "q1", "question": "Where is Paris?", "answers": ["France"]},
                    {"qid": "q2", "question": "What is in France?", "answers": ["Paris"]},
                ],
            }
        )
        + "\n"
    )
    rows = read_mrqa_jsonl(path, "SQuAD")
    assert rows == [
        {
            "id": "q1",
            "subset": "SQuAD",
            "context": "Paris is in France.",
            "question": "Where is Paris?",
            "answers": ["France"],
        },
        {
            "id": "q2",
            "subset": "SQuAD",
            "context": "Paris is in France.",
            "question": "What is in France?",
            "answers": ["Paris"],
        },
    ]
    ds = load_mrqa(MrqaOptions(subset="SQuAD", mrqa_data=str(tmp_path)))["test"]  # a folder: <subset>*.jsonl
    assert len(ds) == 2 and ds[0]["context"] == "Paris is in France."
    with pytest.raises(MissingDataError, match="NewsQA"):
        load_mrqa(MrqaOptions(subset="NewsQA", mrqa_data=str(tmp_path)))


def squad_em_f1(prediction, golds):
    """The SQuAD v1.1 evaluation script, written out here: normalise (lower-case, drop punctuation, drop
    a/an/the, collapse whitespace), EM and bag-of-tokens F1, each the max over the gold answers, x 100."""

    def norm(text):
        text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
        return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())

    def f1(pred, gold):
        p, g = norm(pred).split(), norm(gold).split()
        same = sum((Counter(p) & Counter(g)).values())
        return 0.0 if same == 0 else 2 * (same / len(p)) * (same / len(g)) / (same / len(p) + same / len(g))

    return 100.0 * max(norm(prediction) == norm(g) for g in golds), 100.0 * max(f1(prediction, g) for g in golds)


def rouge1_by_hand(prediction, golds):
    """ROUGE-1 F1 as the rouge-score package defines it without stemming: lower-case, runs of characters
    other than [a-z0-9] separate tokens, clipped unigram overlap; max over the gold answers, x 100."""

    def tokens(text):
        return re.sub(r"[^a-z0-9]+", " ", text.lower()).split()

    def f(pred, gold):
        p, g = tokens(pred), tokens(gold)
        same = sum((Counter(p) & Counter(g)).values())
        return 0.0 if same == 0 else 2 * same / (len(p) + len(g))

    return 100.0 * max(f(prediction, g) for g in golds)


def test_hand_scorers_on_hand_cases():
    """The scorers above, on cases worked out by hand (so that the run below is checked against them)."""
    assert squad_em_f1("The Eiffel Tower!", ["eiffel tower"]) == (100.0, 100.0)
    # tokens: eiffel tower in paris (4) vs eiffel tower (2): P 1/2, R 1, F1 2/3
    assert squad_em_f1("Eiffel Tower in Paris", ["Paris, France", "Eiffel Tower"]) == pytest.approx((0.0, 200 / 3))
    # rouge-score keeps articles: "the eiffel tower" (3) vs "eiffel tower" (2): 2 * 2 / 5
    assert rouge1_by_hand("the Eiffel-Tower", ["eiffel tower"]) == pytest.approx(80.0)
    assert rouge1_by_hand("", ["x"]) == 0.0


@pytest.mark.skipif(not SAMPLE.exists(), reason="../shared/data not present")
def test_newsqa_task_offline(tiny_model_dir, tmp_path):
    rows = read_mrqa_jsonl(SAMPLE, "NewsQA")
    records = [json.loads(l) for l in SAMPLE.read_text(encoding="utf-8").splitlines() if l.strip()]
    expected = [
        {
            "id": qa["qid"],
            "subset": "NewsQA",
            "context": r["context"],
            "question": qa["question"],
            "answers": qa["answers"],
        }
        for r in records
        if "header" not in r
        for qa in r["qas"]
    ]
    assert rows == expected and len(rows) == 17  # 3 contexts, 17 questions
    # The tiny model never finds the NewsQA answers (all scores would be 0 = 0); one extra gold answer in
    # its own register ("... million dollars in fiscal year ...", from the reports it was trained on)
    # gives partial overlaps, so the comparison below is between non-trivial numbers.
    extra = "million dollars in the fiscal year"
    data = tmp_path / "NewsQA-with-extra-answer.jsonl"
    data.write_text(
        "".join(
            json.dumps(
                r if "header" in r else {**r, "qas": [{**qa, "answers": qa["answers"] + [extra]} for qa in r["qas"]]}
            )
            + "\n"
            for r in records
        ),
        encoding="utf-8",
    )
    subprocess.run(
        [
            str(Path(sys.executable).parent / "lch"),
            "eval",
            "--model",
            "hf-pic",
            "--model_args",
            f"pretrained={tiny_model_dir},dtype=float32,pic=naive,pic_ratio=2",
            "--device",
            "cpu",
            "--tasks",
            "mrqa_newsqa",
            "--log_samples",
            "--output_path",
            str(tmp_path),
            "--metadata",
            json.dumps({"mrqa_data": str(data), "limit_docs": 4}),
        ],
        check=True,
        capture_output=True,
    )
    results = json.loads(Path(glob.glob(str(tmp_path / "**" / "results_*.json"), recursive=True)[0]).read_text())
    got = results["results"]["mrqa_newsqa"]
    samples = [
        json.loads(l)
        for l in Path(glob.glob(str(tmp_path / "**" / "samples_mrqa_newsqa_*.jsonl"), recursive=True)[0])
        .read_text()
        .splitlines()
    ]
    assert len(samples) == 4
    assert sorted((s["doc"]["id"], s["doc"]["question"], s["doc"]["answers"]) for s in samples) == sorted(
        (r["id"], r["question"], r["answers"] + [extra]) for r in rows[:4]
    )
    # every logged answer re-scored here, with the scorers above
    scores = [squad_em_f1(s["filtered_resps"][0].strip(), s["doc"]["answers"]) for s in samples]
    rouge = [rouge1_by_hand(s["filtered_resps"][0].strip(), s["doc"]["answers"]) for s in samples]
    assert got["em,none"] == pytest.approx(sum(e for e, _ in scores) / 4)
    assert got["f1,none"] == pytest.approx(sum(f for _, f in scores) / 4)
    assert got["rouge1,none"] == pytest.approx(sum(rouge) / 4)
    assert any(f > 0 for _, f in scores), [s["filtered_resps"][0] for s in samples]  # the check has teeth
    # length honesty: the prompt lm-eval sent (the template context / question / "Answer:") counted in the
    # model's tokens (BOS included, as the tokenizer adds it); with 32 generated tokens none passes 4096
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    prompts = [f"{s['doc']['context']}\n\nQuestion: {s['doc']['question']}\nAnswer:" for s in samples]
    assert [s["arguments"]["gen_args_0"]["arg_0"] for s in samples] == prompts
    counts = [len(tok(p)["input_ids"]) for p in prompts]
    assert got["prompt_tokens,none"] == pytest.approx(sum(counts) / 4)
    assert got["over_length,none"] == sum(n + 32 > 4096 for n in counts) == 0
