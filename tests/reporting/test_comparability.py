"""Comparisons check what they compare: the run record read back from results files, and every report that puts
runs side by side refusing runs not run alike (exit 3, one line) before any numeric verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.core.errors import EXIT_NOT_COMPARABLE, UsageError
from harness.core.results import RUN as KEY
from harness.core.run_record import FIELDS, RunRecord
from harness.reporting.comparability import (
    SAME_MODEL,
    SIDE_BY_SIDE,
    NotComparable,
    check_comparable,
    differences,
    parse_allow,
)

STAMP = "2026-01-01T00-00-00.000001"
SMOL = "LlamaForCausalLM (30 layers, hidden 576, vocab 49152)"
GEMMA = "Gemma3ForCausalLM (18 layers, hidden 640, vocab 262144)"


def _record(**fields: str) -> dict:
    base = {
        "engine": "hf-pic",
        "dtype": "float32",
        "device": "cpu",
        "max_length": "8192",
        "inference": "standard inference",
        "model": "sha256:" + "a" * 64,
        "architecture": SMOL,
        "libraries": "torch 2.13.0, transformers 5.24.0",
    }
    return {**base, **fields}


def _run(folder: Path, record: dict | None, ppl: float = 3.0, date: float = 1.0, pretrained: str = "m") -> Path:
    """A results file (and one samples file) as lm-eval writes them, with our run record under config.lch_run."""
    folder.mkdir(parents=True)
    config = {
        "model": (record or {}).get("engine", "hf"),
        "model_args": {"pretrained": pretrained},
        "batch_size": 1,
        "device": "cuda:0",
        "random_seed": 0,
        "numpy_seed": 1234,
        "torch_seed": 1234,
        "fewshot_seed": 1234,
    }
    if record is not None:
        config[KEY] = record
    results = {
        "results": {"ppl_task": {"alias": "ppl_task", "ppl,none": ppl}},
        "higher_is_better": {"ppl_task": {"ppl": False}},
        "config": config,
        "date": date,
        "chat_template": None,
        "chat_template_sha": None,
    }
    (folder / f"results_{STAMP}.json").write_text(json.dumps(results))
    response = {"token_ids": [1, 2, 3], "logprobs": [-1.0, -2.0], "offsets": None}
    row = {
        "doc_id": 0,
        "doc_hash": "d0",
        "resps": [[str(response)]],
        "filtered_resps": [str(response)],
        "metrics": ["ppl"],
        "ppl": [3.0, 2],
    }
    (folder / f"samples_ppl_task_{STAMP}.jsonl").write_text(json.dumps(row) + "\n")
    return folder


def test_the_record_reads_ours_and_lm_evals_fields_and_leaves_the_unrecorded_unknown(tmp_path):
    folder = _run(tmp_path / "a", _record(adapter="sha256:" + "b" * 64))
    data = json.loads(next(folder.glob("results_*.json")).read_text())
    record = RunRecord.from_results(data)
    assert record == RunRecord(
        engine="hf-pic",
        dtype="float32",
        device="cpu",
        max_length="8192",
        inference="standard inference",
        model="sha256:" + "a" * 64,
        architecture=SMOL,
        adapter="sha256:" + "b" * 64,
        libraries="torch 2.13.0, transformers 5.24.0",
        batch_size="1",
        seed="0/1234/1234/1234",
        chat_template="none",
    )
    # lm-eval's own model classes record none of ours: unknown, never a guess (lm-eval's --device is not read)
    bare = RunRecord.from_results({"config": {"model": "hf", "device": "cuda:0", "batch_size": "auto"}})
    assert bare == RunRecord(batch_size="auto")
    assert RunRecord.from_results({"config": RunRecord(dtype="bfloat16").as_info()}) == RunRecord(dtype="bfloat16")
    assert set(FIELDS) == set(RunRecord.__dataclass_fields__)  # every field described for --allow's help


def test_differences_name_each_field_with_its_values_and_runs():
    a, b = RunRecord(**_record()), RunRecord(**_record(engine="vllm-pic", dtype="bfloat16", libraries="vllm 0.32.0"))
    # engine and libraries may differ between two runs of one model: only the dtype is a difference
    assert differences({"A": a, "B": b}, SAME_MODEL) == ["dtype float32 (A) vs bfloat16 (B)"]
    assert differences({"A": a, "B": b}, SAME_MODEL, allow={"dtype"}) == []
    unknown = RunRecord(dtype=None)
    assert differences({"A": a, "old": unknown}, SAME_MODEL) == []  # an unrecorded field is not compared
    with pytest.raises(NotComparable) as err:
        check_comparable({"A": a, "B": b}, SAME_MODEL)
    assert str(err.value) == (
        "not comparable: dtype float32 (A) vs bfloat16 (B) (compare runs made alike, or pass "
        "--allow dtype to compare them anyway)"
    )
    assert err.value.exit_code == EXIT_NOT_COMPARABLE == 3
    # runs side by side: other models on purpose, but the same dtype
    other = RunRecord(**_record(model="sha256:" + "c" * 64, architecture=GEMMA, dtype="bfloat16"))
    assert differences({"x": a, "y": other}, SIDE_BY_SIDE) == ["dtype float32 (x) vs bfloat16 (y)"]
    assert parse_allow(["dtype,seed", "model"]) == {"dtype", "seed", "model"}
    with pytest.raises(UsageError, match=r"^--allow dtyp: not a field of the run record; did you mean dtype\?"):
        parse_allow(["dtyp"])


def test_lch_agree_refuses_runs_in_two_dtypes_before_any_verdict(tmp_path, capsys):
    hf = _run(tmp_path / "hf", _record())
    vllm = _run(tmp_path / "vllm", _record(engine="vllm-pic", dtype="bfloat16", libraries="vllm 0.32.0"))
    assert main(["agree", str(hf), str(vllm), "--tokenizer", "none"]) == 3
    err = capsys.readouterr().err.strip()
    assert err == (
        "lch: error: not comparable: dtype float32 (A) vs bfloat16 (B) (compare runs made alike, or pass "
        "--allow dtype to compare them anyway)"
    )
    # deliberately: the comparison runs, and the report says what differed
    assert main(["agree", str(hf), str(vllm), "--tokenizer", "none", "--allow", "dtype"]) == 0
    out = capsys.readouterr().out
    assert "- run with: dtype: A float32, B bfloat16 (allowed)" in out
    assert "- run with: engine: A hf-pic, B vllm-pic" in out
    assert "- both run with: dtype" not in out and "device cpu" in out


def test_lch_agree_refuses_two_models(tmp_path, capsys):
    a = _run(tmp_path / "a", _record())
    b = _run(tmp_path / "b", _record(model="sha256:" + "c" * 64))
    assert main(["agree", str(a), str(b), "--tokenizer", "none"]) == 3
    assert "not comparable: model sha256:aaaaaaaaaaaa (A) vs sha256:cccccccccccc (B)" in capsys.readouterr().err


def test_leaderboard_correlate_and_plot_refuse_runs_in_two_dtypes(tmp_path, capsys):
    _run(tmp_path / "runs" / "a", _record(), date=1.0)
    _run(
        tmp_path / "runs" / "b",
        _record(model="sha256:" + "c" * 64, architecture=GEMMA, dtype="bfloat16"),
        date=2.0,
        pretrained="g",
    )
    out = tmp_path / "board.csv"
    assert main(["leaderboard", str(tmp_path / "runs"), "-o", str(out)]) == 3
    assert "not comparable: dtype float32 (" in capsys.readouterr().err and not out.exists()
    assert main(["leaderboard", str(tmp_path / "runs"), "-o", str(out), "--allow", "dtype"]) == 0 and out.exists()
    assert (
        main(
            [
                "correlate",
                str(tmp_path / "runs"),
                "--matrix",
                "ppl_task/ppl",
                "ppl_task/ppl",
                "-o",
                str(tmp_path / "corr"),
            ]
        )
        == 3
    )
    assert main(["plot", "context", str(tmp_path / "runs"), "--task", "ppl_task", "-o", str(tmp_path / "p.png")]) == 3
    assert not (tmp_path / "corr").exists() and not (tmp_path / "p.png").exists()


def test_regress_refuses_a_baseline_of_another_configuration(tmp_path, capsys):
    baseline = tmp_path / "baseline.json"
    smol = _run(tmp_path / "smol", _record(), ppl=3.0)
    assert main(["regress", str(smol), "--baseline", str(baseline), "--update-baseline"]) == 0
    assert json.loads(baseline.read_text())["run"]["architecture"] == SMOL
    # a new checkpoint of the same model (other weights, same architecture and settings) is gated
    newer = _run(tmp_path / "newer", _record(model="sha256:" + "d" * 64), ppl=2.9)
    assert main(["regress", str(newer), "--baseline", str(baseline)]) == 0
    gemma = _run(tmp_path / "gemma", _record(model="sha256:" + "c" * 64, architecture=GEMMA), ppl=9.0)
    capsys.readouterr()
    junit = tmp_path / "junit.xml"
    assert main(["regress", str(gemma), "--baseline", str(baseline), "--junit", str(junit)]) == 3
    line = (
        f"not comparable: architecture {SMOL} (baseline) vs {GEMMA} (run) (compare runs made alike, or "
        "pass --allow-mismatch to compare them anyway)"
    )
    assert capsys.readouterr().err.strip() == f"lch: error: {line}"
    import xml.etree.ElementTree as ET

    assert ET.parse(junit).getroot().find("testcase/error").get("message") == line  # the CI reader sees why
    assert main(["regress", str(gemma), "--baseline", str(baseline), "--allow-mismatch"]) == 1  # ppl 9 vs 3


def test_task_options_are_compared_after_conversion():
    """RULER lengths written ["1k", "2k"] and [1024, 2048] are the same requests and the same metrics: comparable;
    a results file of an older lch that recorded lm-eval's max_seq_lengths default beside the lengths run compares
    by the lengths run; other lengths are still a difference."""
    from harness.reporting.comparability import comparable_configuration, configuration_differences

    spelled = {"lch_ruler_niah_single_1": {"lengths": ["1k", "2k"], "num_samples": 4}}
    counted = {"lch_ruler_niah_single_1": {"lengths": [1024, 2048], "max_seq_lengths": [4096], "num_samples": 4}}
    only_default_key = {"lch_ruler_niah_single_1": {"max_seq_lengths": ["1k", 2048], "num_samples": 4}}
    assert configuration_differences({"a": spelled, "b": counted, "c": only_default_key}) == []
    assert comparable_configuration(counted["lch_ruler_niah_single_1"]) == {"lengths": [1024, 2048], "num_samples": 4}
    other = {"lch_ruler_niah_single_1": {"lengths": [1024, 4096], "num_samples": 4}}
    assert configuration_differences({"a": spelled, "b": other}) == [
        "lch_ruler_niah_single_1: lengths [1024, 2048] (a) vs [1024, 4096] (b)"
    ]
    # an older results file recorded the HF dataset it did not read beside local data_files: the same documents
    older = {
        "ppl_govreport": {"data_files": "essays", "hf_dataset": "ccdv/govreport-summarization", "hf_split": "test"}
    }
    newer = {"ppl_govreport": {"data_files": "essays"}}
    assert configuration_differences({"old": older, "new": newer}) == []
    hub = {"ppl_govreport": {"hf_dataset": "ccdv/govreport-summarization", "hf_split": "test"}}
    assert configuration_differences({"hub": hub, "new": newer}) == [
        "ppl_govreport: data_files unset (hub) vs essays (new), hf_dataset ccdv/govreport-summarization (hub) vs unset "
        "(new), hf_split test (hub) vs unset (new)"
    ]


def _with_options(folder: Path, options: dict) -> None:
    """Give the run's task the lch_configuration its task class records."""
    path = next(folder.glob("results_*.json"))
    data = json.loads(path.read_text())
    data["configs"] = {"ppl_task": {"metadata": {"lch_configuration": options}}}
    path.write_text(json.dumps(data))


def test_every_report_refuses_runs_with_and_without_a_chat_template_and_other_task_options(tmp_path, capsys):
    # two models, one run through its chat template (the digest our models record), one without
    _run(tmp_path / "runs" / "a", _record(chat_template="none"), date=1.0)
    _run(
        tmp_path / "runs" / "b", _record(model="sha256:" + "c" * 64, chat_template="ab" * 32), date=2.0, pretrained="g"
    )
    commands = [
        ["leaderboard", str(tmp_path / "runs"), "-o", str(tmp_path / "board.csv")],
        ["correlate", str(tmp_path / "runs"), "--matrix", "ppl_task/ppl", "ppl_task/ppl", "-o", str(tmp_path / "corr")],
        ["plot", "context", str(tmp_path / "runs"), "--task", "ppl_task", "-o", str(tmp_path / "p.png")],
    ]
    for command in commands:
        assert main(command) == 3
        assert f"not comparable: chat_template none ({tmp_path / 'runs' / 'a'}" in capsys.readouterr().err
    # the same template, but the task run on other documents: refused naming the option, unless allowed
    for name, files in (("a", "essays"), ("b", "govreport.jsonl")):
        record = _record(chat_template="none", **({"model": "sha256:" + "c" * 64} if name == "b" else {}))
        folder = tmp_path / "runs2" / name
        _run(folder, record, date=1.0 if name == "a" else 2.0, pretrained=name)
        _with_options(folder, {"data_files": files, "num_docs": 2, "max_seq_lengths": [1024]})
    board = ["leaderboard", str(tmp_path / "runs2"), "-o", str(tmp_path / "board2.csv")]
    assert main(board) == 3
    err = capsys.readouterr().err
    assert "not comparable: task configuration ppl_task: data_files essays (" in err and "--allow task_options" in err
    assert not (tmp_path / "board2.csv").exists()
    assert main(board + ["--allow", "task_options"]) == 0 and (tmp_path / "board2.csv").exists()
    # equivalent spellings of the lengths are one configuration
    _with_options(tmp_path / "runs2" / "b", {"data_files": "essays", "num_docs": 2, "lengths": ["1k"]})
    assert main(board) == 0


def test_the_chat_template_field_is_known_only_inside_a_run():
    from lm_eval.utils import hash_string

    from harness.core.run_record import asking_chat_template, chat_template_field

    template = lambda asked: "{{ messages }}" if asked else None  # noqa: E731
    assert chat_template_field(template) is None  # outside simple_evaluate: not known
    with asking_chat_template(False):
        assert chat_template_field(template) == "none"
    with asking_chat_template(None):
        assert chat_template_field(template) == "none"
    with asking_chat_template(True):  # lm-eval's chat_template_sha of the same text
        assert (
            chat_template_field(template)
            == hash_string("{{ messages }}")
            == ("f24189f08c85a1eb19a737306c3a13e85462ee33d964f28108d64a2485fa2171")
        )
    assert chat_template_field(template) is None
