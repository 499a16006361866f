"""Task options as typed dataclasses (harness/core/options.py): the parser's conversions and one-line errors,
the --metadata key table derived from the dataclasses, `lch eval` refusing a wrong-typed value before any
model loads, and defaults written once in the source tree."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.errors import UsageError
from harness.core.options import option, option_help, parse_options

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@dataclasses.dataclass(frozen=True)
class Sample:
    count: int = option(3, "a count")
    ratio: float = option(0.5, "a ratio", above=0)
    flag: bool = option(False, "a flag")
    name: str = option("x", "a name")
    limit: int | None = option(None, "an optional limit")
    lengths: tuple[int | str, ...] = option((4096,), "lengths")
    mode: str = option("a", "a mode", choices=("a", "b"))


def test_parser_converts_values_as_lm_eval_delivers_them():
    assert parse_options(Sample, None) == Sample()
    assert parse_options(Sample, {"unrelated": "kept out", "count": None}) == Sample()  # None: the default
    got = parse_options(
        Sample, {"count": "4", "ratio": "2", "flag": "true", "name": 7, "limit": "12", "lengths": "1k,2k", "mode": "b"}
    )
    assert got == Sample(count=4, ratio=2.0, flag=True, name="7", limit=12, lengths=("1k", "2k"), mode="b")
    assert isinstance(got.ratio, float)
    assert parse_options(Sample, {"flag": "False", "ratio": 1, "count": 8.0}) == Sample(flag=False, ratio=1.0, count=8)
    assert parse_options(Sample, {"flag": 1}).flag is True
    assert parse_options(Sample, {"lengths": [1024, "2048", "4k"]}).lengths == (1024, 2048, "4k")
    assert parse_options(Sample, {"lengths": 8192}).lengths == (8192,)
    assert parse_options(Sample, {"lengths": "[1024, 2048]"}).lengths == (1024, 2048)
    assert parse_options(Sample, {"limit": "none"}).limit is None
    assert parse_options(Sample, {"limit": "null", "count": ""}) == Sample()  # `count=`: not given
    assert parse_options(Sample, {"name": ""}).name == ""  # an empty string is a string
    assert parse_options(Sample, {"name": Path("/a/b")}).name == "/a/b"


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("ratio", "high", "t1: --metadata ratio must be a number (float), got 'high'"),
        ("ratio", "nan", "t1: --metadata ratio must be a number (float), got 'nan'"),
        ("ratio", 1e309, "t1: --metadata ratio must be a number (float), got inf"),
        ("ratio", "0", "t1: --metadata ratio must be > 0, got 0.0"),  # above=0: an exclusive bound
        ("count", "2.5", "t1: --metadata count must be an integer (int), got '2.5'"),
        ("count", True, "t1: --metadata count must be an integer (int), got True"),
        ("count", 2.5, "t1: --metadata count must be an integer (int), got 2.5"),
        ("flag", "maybe", "t1: --metadata flag must be true or false (bool), got 'maybe'"),
        ("flag", 2, "t1: --metadata flag must be true or false (bool), got 2"),
        ("name", ["a"], "t1: --metadata name must be a string (str), got ['a']"),
        ("limit", "many", "t1: --metadata limit must be an integer (int) or none, got 'many'"),
        (
            "lengths",
            [[1]],
            "t1: --metadata lengths must be a list (an integer (int) or a string (str) each; e.g. 1k,2k "
            "or [1024, 2048]), got [[1]]",
        ),
        ("mode", "c", "t1: --metadata mode 'c' is unknown; allowed: a, b"),
    ],
)
def test_parser_refuses_a_wrong_value_in_one_line(key, value, message):
    with pytest.raises(UsageError) as err:
        parse_options(Sample, {key: value}, task="t1")
    assert str(err.value) == message
    assert "\n" not in str(err.value)


def test_a_check_of_the_dataclass_names_the_task():
    from harness.tasks.logprob import LsmTaskOptions

    with pytest.raises(
        UsageError,
        match=r"^lsm_govreport: --metadata context_length must be between 2 and 10000000, "
        r"got 1$",
    ):
        parse_options(LsmTaskOptions, {"context_length": "1"}, task="lsm_govreport")
    with pytest.raises(
        UsageError, match=r"^lsm_govreport: --metadata estimator 'exact' is unknown; allowed: overlap, direct$"
    ):
        parse_options(LsmTaskOptions, {"estimator": "exact"}, task="lsm_govreport")


# the table kept by hand before it was derived: every key is still read
HAND_TABLE = """data_files text_field hf_dataset hf_name hf_split min_tokens max_tokens num_docs allow_fewer_docs
limit_docs synthetic_words seed add_special_tokens evaluator evaluator_id evaluator_dtype evaluator_device
length_tokenizer trunc_len sliding_window short_start alpha beta gamma key_spans_dir key_cache_dir context_length
n_samples estimator lengths num_samples ruler_task babilong_task chat_template essays source filler squad hotpotqa
icl_example prompts_file max_seq_lengths longbench_write_data hellobench_data variant weights_file rescale
max_gen_toks do_sample temperature judge_base_url judge_model judge_policy judge_concurrency judge_timeout
judge_max_attempts judge_cache_dir judge_temperature judge_max_tokens judge_prompt subset mrqa_data version
min_required_length pretrained tokenizer max_length max_model_len model
truncation effective_threshold judge_idle_timeout""".split()  # the last line: keys added after the table was derived


def test_the_key_table_is_the_fields_of_the_task_classes_options(monkeypatch):
    from harness.plugin import task_index as metadata
    from harness.plugin.discovery import tasks_path
    from harness.tasks.logprob import LongPPLOptions

    classes = metadata.task_option_classes(tasks_path())
    table = metadata.our_metadata_keys()
    assert table == metadata.metadata_keys(classes)
    assert set(table) == set(HAND_TABLE)
    assert table["alpha"] == option_help(LongPPLOptions)["alpha"] == "LSD threshold of key tokens"
    assert all(text for text in table.values())  # every key has its help

    # a new option is one field in one dataclass: the table and the check take it with no other edit
    @dataclasses.dataclass(frozen=True)
    class WithWindow(LongPPLOptions):
        window_note: int = option(3, "a test-local option")

    with pytest.raises(UsageError, match="--metadata key 'window_note' is not read by any of these tasks"):
        metadata.check_metadata({"window_note": 4}, ["longppl_govreport"], tasks_path())
    assert metadata.metadata_keys([*classes, WithWindow])["window_note"] == "a test-local option"
    monkeypatch.setattr(metadata, "task_option_classes", lambda tasks_dir: [*classes, WithWindow])
    metadata.check_metadata({"window_note": 4}, ["longppl_govreport"], tasks_path())
    assert parse_options(WithWindow, {"window_note": "4"}).window_note == 4


def test_every_task_of_ours_declares_its_options_and_parses_its_yaml():
    from harness.plugin.discovery import tasks_path
    from harness.plugin.task_index import check_task_options, task_folder

    folder = task_folder(tasks_path())
    assert all(getattr(entry.task_class, "OPTIONS", None) is not None for entry in folder.tasks.values())
    check_task_options({}, {}, [*folder.tasks, *folder.groups], tasks_path())
    with pytest.raises(
        UsageError, match=r"^mrqa_squad: --metadata limit_docs must be an integer \(int\) or none, got 'all'$"
    ):
        check_task_options({"limit_docs": "all"}, {}, ["mrqa"], tasks_path())  # a group: its members


def _wrong_alpha_argv(spelling: list[str]) -> list[str]:
    # a hub name that does not exist: any model load (or download) would fail differently
    return [
        "eval",
        "--model",
        "hf-pic",
        "--model_args",
        "pretrained=lch-test/no-such-model",
        "--device",
        "cpu",
        "--tasks",
        "longppl_govreport",
        "--metadata",
        *spelling,
    ]


def test_lch_eval_refuses_a_wrong_typed_value_before_lm_eval_runs(monkeypatch, capsys):
    """In process: the evaluation behind the door (model loading, tasks built) is replaced by a failure, which never
    comes."""
    from harness.cli import main
    from harness.plugin import preflight

    def ran(*args, **kwargs):
        raise AssertionError("lm-eval ran")

    monkeypatch.setattr(preflight, "finished", ran)
    for spelling in ([json.dumps({"alpha": "high"})], ["alpha=high"]):
        assert main(_wrong_alpha_argv(spelling)) == 2
        errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("lch: error: ")]
        assert errors == ["lch: error: longppl_govreport: --metadata alpha must be a number (float), got 'high'"]


def test_lch_eval_wrong_typed_value_real_process():
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [str(BIN / "lch"), *_wrong_alpha_argv([json.dumps({"alpha": "high"})])],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 2
    # lm-eval's own log lines of its run command come first (the door is inside it), then our one line
    lines = done.stderr.splitlines()
    assert lines[-1] == "lch: error: longppl_govreport: --metadata alpha must be a number (float), got 'high'"
    assert "Traceback" not in done.stderr and sum(line.startswith("lch: error:") for line in lines) == 1


# (key, literal of its default): each default is written in exactly one source file of the package
DEFAULTS = [
    ("context_length", "4096"),
    ("n_samples", "16"),
    ("trunc_len", "4096"),
    ("sliding_window", "1024"),
    ("alpha", "2.0"),
    ("beta", "-2.0"),
    ("min_tokens", "16384"),
    ("max_tokens", "32767"),
    ("num_docs", "50"),
    ("min_required_length", "2000"),
    ("(?:max_gen_toks|DEFAULT_MAX_GEN_TOKS)", "32768"),
]


def test_known_defaults_are_written_once():
    sources = [
        p
        for p in (ROOT / "harness").rglob("*")
        if p.is_file() and (p.suffix in (".py", ".yaml") or p.name.endswith("_yaml"))
    ]
    texts = {p: p.read_text(encoding="utf-8") for p in sources}
    for key, literal in DEFAULTS:
        # `key: 4096` (YAML), `"key": 4096` (a dict), `key: int = 4096`, `key: int = option(4096, ...`; 2000 or 2000.0
        pattern = re.compile(
            rf"\b{key}\b[\"']?\s*(?::[^=\n]*=|:|=)\s*(?:option\()?\s*{re.escape(literal)}(?:\.0)?(?![\d.])"
        )
        homes = [
            str(p.relative_to(ROOT))
            for p, text in texts.items()
            if pattern.search(text) and not (key == "alpha" and p.parent.name == "lch_ruler")
        ]  # RULER fwe's Zipf alpha is another alpha
        assert len(homes) == 1, (key, literal, homes)
    # the key-token settings' home: LongPPL's formulas (KeySettings)
    assert [str(p.relative_to(ROOT)) for p, t in texts.items() if "trunc_len: int = option(4096" in t] == [
        "harness/longppl/formulas.py"
    ]
