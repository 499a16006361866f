"""One preflight finds every missing input of a run at once, before any model loads (harness.data.inputs)."""

from __future__ import annotations

import pytest

from harness.core.errors import MissingDataError, UsageError
from harness.data.documents import DocumentOptions, check_enough_documents
from harness.data.inputs import Input, missing_inputs
from harness.plugin.preflight import preflight

TASKS = [
    "longppl_govreport",
    "lch_ruler_niah_single_1",
    "lch_ruler_niah_single_2",
    "lch_ruler_qa_squad",
    "lch_babilong_qa1",
    "longbench_write",
]


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """No hub, empty Hugging Face caches, an empty download cache."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_DATASETS_CACHE", raising=False)
    return tmp_path


def test_every_missing_input_of_every_task_is_named_in_one_error(offline, tiny_model_dir):
    with pytest.raises(MissingDataError) as caught:
        preflight("hf-pic", {"pretrained": str(tiny_model_dir)}, TASKS, {})
    message = str(caught.value)
    # niah_single_1's haystack is noise (reads nothing); niah_single_2's essays are listed once for it
    expected = [
        "(1) longppl_govreport: hf_dataset=ccdv/govreport-summarization is not in the local Hugging Face cache and the "
        "hub is offline; download it to the HF cache, or pass data_files=<a .txt / .jsonl file or folder of long "
        "texts> (e.g. a folder of essays).",
        "(2) longppl_govreport: evaluator=Qwen/Qwen2-72B-Instruct is not in the local Hugging Face cache and the hub "
        "is offline; give a local model folder",
        "(3) lch_ruler_niah_single_2: essays=baber/paul_graham_essays is not in the local Hugging Face cache and the "
        "hub is offline; pass essays=<folder of .txt essays>, essays=lch-essays (the essays shipped with the package), "
        "or essays=synthetic",
        "(4) lch_ruler_qa_squad: squad=rajpurkar/squad_v2 is not in",
        "(5) lch_babilong_qa1: hf_dataset=RMT-team/babilong is not in",
        "or pass source=<folder of <length>/<task>.jsonl files>, or source=synthetic",
        "(6) longbench_write: longbench_write_data=https://raw.githubusercontent.com/THUDM/LongWriter/main/evaluation/"
        "longbench_write.jsonl is not downloaded and the internet is not reachable; fetch it and pass "
        "longbench_write_data=<its path>.",
    ]
    assert message.startswith("6 inputs are missing (nothing was loaded): (1) ")
    for part in expected:
        assert part in message
    assert "(7)" not in message and "\n" not in message


def test_local_files_and_synthetic_sources_are_not_missing(offline, tiny_model_dir, tmp_path):
    essays = tmp_path / "essays"
    essays.mkdir()
    (essays / "a.txt").write_text("An essay of a few words. " * 20, encoding="utf-8")
    data = tmp_path / "lbw.jsonl"
    data.write_text("", encoding="utf-8")
    metadata = {
        "data_files": str(essays),
        "evaluator": str(tiny_model_dir),
        "essays": str(essays),
        "squad": "synthetic",
        "source": "synthetic",
        "longbench_write_data": str(data),
        "min_tokens": 1,
        "max_tokens": 64,
        "num_docs": 1,
        "trunc_len": 8,
        "sliding_window": 4,
    }
    preflight("hf-pic", {"pretrained": str(tiny_model_dir)}, TASKS, metadata)  # nothing raised
    # the essays shipped with the package, by name, as RULER's haystack and BABILong's filler: nothing to find
    preflight(
        "hf-pic",
        {"pretrained": str(tiny_model_dir)},
        TASKS,
        {**metadata, "essays": "lch-essays", "filler": "lch-essays"},
    )
    # a named local path that is not there is missing whatever the hub
    with pytest.raises(
        MissingDataError,
        match=r"^an input is missing \(nothing was loaded\): \(1\) lch_ruler_niah_"
        r"single_2: essays=/nowhere does not exist; pass essays=",
    ):
        preflight("hf-pic", {"pretrained": str(tiny_model_dir)}, TASKS, {**metadata, "essays": "/nowhere"})


def test_hub_names_in_the_local_cache_are_found(offline):
    hub = offline / "hf" / "hub"
    (hub / "datasets--ccdv--govreport-summarization").mkdir(parents=True)
    (hub / "models--org--evaluator").mkdir(parents=True)
    (offline / "hf" / "datasets" / "RMT-team___babilong").mkdir(parents=True)
    inputs = {
        "t": [
            Input("hf_dataset", "ccdv/govreport-summarization", "hf_dataset", "x"),
            Input("evaluator", "org/evaluator", "hf_model", "x"),
            Input("hf_dataset", "RMT-team/babilong", "hf_dataset", "x"),
            Input("evaluator", "org/other", "hf_model", "y"),
        ]
    }
    assert missing_inputs(inputs, offline=True) == [
        "t: evaluator=org/other is not in the local Hugging Face cache and the hub is offline; y"
    ]
    # online, a hub name may be fetched: nothing is missing
    assert missing_inputs(inputs, offline=False) == []


def test_fewer_long_documents_than_asked_is_an_error_unless_allowed(caplog):
    options = DocumentOptions(data_files="x", min_tokens=100, max_tokens=200, num_docs=3)
    with pytest.raises(
        UsageError,
        match=r"^only 2 of the 3 documents asked for \(num_docs\) have 100 tokens or more: "
        r"give more long documents, lower min_tokens or num_docs, or pass "
        r"allow_fewer_docs=true to score those found$",
    ):
        check_enough_documents(2, options)
    check_enough_documents(3, options)  # enough: nothing said
    assert caplog.records == []
    allowed = DocumentOptions(data_files="x", min_tokens=100, max_tokens=200, num_docs=3, allow_fewer_docs=True)
    check_enough_documents(2, allowed)
    assert [r.getMessage() for r in caplog.records] == [
        "only 2 of the 3 documents asked for (num_docs) have 100 tokens or more: the scores rest on 2 "
        "(allow_fewer_docs)"
    ]


def test_too_few_long_documents_are_found_by_the_preflight(offline, tiny_model_dir, tmp_path):
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join('{"report": "%s"}\n' % ("word " * n) for n in (400, 3, 400)), encoding="utf-8")
    metadata = {"data_files": str(docs), "min_tokens": 100, "max_tokens": 300}
    with pytest.raises(
        UsageError,
        match=r"^ppl_govreport: only 2 of the 50 documents asked for \(num_docs\) have 100 "
        r"tokens or more: give more long documents",
    ):
        preflight("hf-pic", {"pretrained": str(tiny_model_dir)}, ["ppl_govreport"], metadata)
    preflight("hf-pic", {"pretrained": str(tiny_model_dir)}, ["ppl_govreport"], {**metadata, "num_docs": 2})
    # LongPPL: counted by the evaluator's tokenizer, and its window checked against the documents kept
    longppl = {**metadata, "num_docs": 2, "evaluator": str(tiny_model_dir), "trunc_len": 4096}
    with pytest.raises(
        UsageError,
        match=r"^longppl_govreport: trunc_len \(K\) 4096 is at least as long as 2 of the 2 "
        r"documents",
    ):
        preflight("hf-pic", {"pretrained": str(tiny_model_dir)}, ["longppl_govreport"], longppl)
