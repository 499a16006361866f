"""Document loaders, synthetic data and the pooled perplexity."""

import json
import math

import pytest

from harness.data.documents import DocumentOptions, MissingDataError, load_documents, select_long
from harness.data.govreport import load_govreport
from harness.data.prompt_tokens import ModelKeys
from harness.data.synthetic import synthetic_reports
from harness.metrics.pooling import nll_sum, pooled_perplexity


def test_pooled_perplexity_is_token_weighted():
    # doc A: 2 tokens with log p = ln(1/2) each; doc B: 1 token with log p = ln(1/8)
    a = nll_sum([math.log(0.5), math.log(0.5)])
    b = nll_sum([math.log(0.125)])
    assert a == pytest.approx((2 * math.log(2), 2))
    # exp((2 ln2 + 3 ln2) / 3) = 2^(5/3), not the mean of per-doc PPLs (2 and 8)
    assert pooled_perplexity([a, b]) == pytest.approx(2 ** (5 / 3))
    assert math.isnan(pooled_perplexity([(0.0, 0)]))


def test_local_files(tmp_path):
    (tmp_path / "a.jsonl").write_text(json.dumps({"report": "one"}) + "\n" + json.dumps({"report": "two"}) + "\n")
    (tmp_path / "b.json").write_text(json.dumps([{"report": "three"}]))
    (tmp_path / "c.txt").write_text("four")
    assert [d["text"] for d in load_documents(str(tmp_path), text_field="report")] == ["one", "two", "three", "four"]
    assert load_documents(str(tmp_path / "c.txt"))[0] == {"doc_id": 0, "text": "four"}
    with pytest.raises(ValueError, match="no field 'text'"):
        load_documents(str(tmp_path / "a.jsonl"))


def test_missing_data_is_one_clear_line(tmp_path):
    with pytest.raises(MissingDataError) as err:
        load_documents(str(tmp_path / "nope.jsonl"))
    assert "\n" not in str(err.value) and "nope.jsonl" in str(err.value)
    with pytest.raises(MissingDataError, match="data_files"):  # HF offline in tests: no download happens
        load_documents(hf_dataset="lch-test/definitely-not-cached", text_field="report")


def test_select_long_and_govreport_selection(tmp_path, tiny_model_dir):
    docs = [{"doc_id": i, "text": "x " * n} for i, n in enumerate([5, 50, 20, 60, 70])]
    chosen = select_long(docs, lambda t: len(t.split()), min_tokens=30, max_docs=2)
    assert [d["doc_id"] for d in chosen] == [1, 3]
    path = tmp_path / "r.jsonl"
    texts = synthetic_reports(3, 80, seed=2)
    path.write_text("".join(json.dumps({"report": t}) + "\n" for t in [texts[0], "Short.", texts[1], texts[2]]))
    ds = load_govreport(
        DocumentOptions(data_files=str(path), min_tokens=20, num_docs=2), ModelKeys(pretrained=str(tiny_model_dir))
    )["test"]
    assert ds["text"] == [texts[0], texts[1]]
    ds = load_govreport(DocumentOptions(data_files=str(path), min_tokens=20, num_docs=3), ModelKeys())[
        "test"
    ]  # no tokenizer
    assert len(ds) == 3


def test_synthetic_reports_are_deterministic():
    assert synthetic_reports(2, 100, seed=4) == synthetic_reports(2, 100, seed=4)
    assert synthetic_reports(1, 100, seed=4) != synthetic_reports(1, 100, seed=5)
    assert len(synthetic_reports(1, 300)[0].split()) >= 300
