"""lm-eval's own settings on a run of ours are checked like our options, by the door on the values lm-eval's parser made
(harness/plugin/preflight.py: check_settings): a value outside its domain is one ``lch: error:`` line naming the flag,
the value and what is allowed, exit 2, before any model loads, through ``lch eval``, plain ``lm_eval`` and
``lm_eval.simple_evaluate`` (naming the parameter there); good values still run."""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cli import main
from harness.core.errors import UsageError

BIN = Path(sys.executable).parent
BOUND_S = 10.0  # in-process, lm-eval and torch imported by an earlier case: every check runs before a model loads
PROCESS_BOUND_S = 60.0  # a fresh `lm_eval` process: the interpreter, lm-eval's and torch's imports on 2 busy cores


class ModelLoaded(Exception):
    """Raised where the model would load: a case that reaches it was not refused before loading."""


@pytest.fixture
def no_model_load(monkeypatch):
    from harness.engines.hf_pic import HFPicLM

    def refuse(self, *args, **kwargs):
        raise ModelLoaded("the model was loaded")

    monkeypatch.setattr(HFPicLM, "__init__", refuse)


@pytest.fixture(scope="module")
def tiny(_isolated_cache) -> Path:
    """An untrained tiny model (built in a second): what these runs compute does not matter, only how far they get."""
    from harness.models.tiny import build_tiny_model

    return build_tiny_model(max_positions=4096)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("flags") / "corpus.jsonl"
    report = "The committee reviewed the program and its budget in detail over several sessions. " * 10
    path.write_text("".join(json.dumps({"report": report}) + "\n" for _ in range(3)), encoding="utf-8")
    return path


def _argv(tiny: Path, corpus: Path, *flags: str) -> list[str]:
    metadata = {"data_files": str(corpus), "min_tokens": 0, "num_docs": 2}
    return [
        "eval",
        "--model",
        "hf-pic",
        "--model_args",
        f"pretrained={tiny},dtype=float32",
        "--device",
        "cpu",
        "--tasks",
        "ppl_govreport",
        "--metadata",
        json.dumps(metadata),
        *flags,
    ]


def _samples_file(tmp_path: Path) -> str:
    path = tmp_path / "samples.json"
    path.write_text(json.dumps({"ppl_govreprot": [0]}), encoding="utf-8")
    return str(path)


LIMIT = "give a whole number of documents per task \\(1 or more\\) or a share of each task's documents in \\(0, 1\\)"
SEED = "give an integer from 0 to 4294967295"
# (id, the flags, the error line after "lch: error: " as a regex); each value is one lm-eval 0.4.13 took and then
# failed on (a traceback, exit 70) or ran without meaning (see harness/plugin/preflight.py: DOMAINS)
BAD = [
    ("limit-negative", ["--limit", "-3"], rf"^--limit -3: not allowed; {LIMIT}$"),
    ("limit-zero", ["--limit", "0"], rf"^--limit 0: not allowed; {LIMIT}$"),
    ("limit-fraction-above-1", ["--limit", "1.5"], rf"^--limit 1.5: not allowed; {LIMIT}$"),
    ("limit-nan", ["--limit", "nan"], rf"^--limit nan: not allowed; {LIMIT}$"),
    ("limit-inf", ["--limit", "inf"], rf"^--limit inf: not allowed; {LIMIT}$"),
    ("num-fewshot-negative", ["--num_fewshot", "-1"], r"^--num_fewshot -1: not allowed; give an integer >= 0"),
    (
        "batch-size-zero",
        ["--batch_size", "0"],
        r"^--batch_size '0': not allowed; give an integer >= 1, auto, or "
        r"auto:N \(N > 0",
    ),
    ("batch-size-negative", ["--batch_size", "-2"], r"^--batch_size '-2': not allowed; give an integer >= 1"),
    ("batch-size-auto-word", ["--batch_size", "auto:x"], r"^--batch_size 'auto:x': not allowed; give an integer"),
    ("batch-size-auto-zero", ["--batch_size", "auto:0"], r"^--batch_size 'auto:0': not allowed; give an integer"),
    ("batch-size-word", ["--batch_size", "x"], r"^--batch_size 'x': not allowed; give an integer >= 1, auto"),
    ("max-batch-size-zero", ["--max_batch_size", "0"], r"^--max_batch_size 0: not allowed; give an integer >= 1"),
    ("seed-negative", ["--seed", "-1"], rf"^--seed -1 \(its 1st value, Python's random seed\): not allowed; {SEED}"),
    (
        "seed-too-large",
        ["--seed", "0,4294967296,0,0"],
        rf"^--seed 4294967296 \(its 2nd value, numpy's seed\): not "
        rf"allowed; {SEED}",
    ),
    (
        "gen-kwargs-temperature",
        ["--gen_kwargs", "temperature=-1"],
        r"^--gen_kwargs temperature=-1: not allowed; "
        r"give a number >= 0$",
    ),
    (
        "gen-kwargs-top-p",
        ["--gen_kwargs", "top_p=0"],
        r"^--gen_kwargs top_p=0: not allowed; give a number in "
        r"\(0, 1\]$",
    ),
    (
        "gen-kwargs-max-gen-toks",
        ["--gen_kwargs", "max_gen_toks=0"],
        r"^--gen_kwargs max_gen_toks=0: not allowed; "
        r"give an integer >= 1",
    ),
    (
        "samples-negative-index",
        ["--samples", '{"ppl_govreport": [-1]}'],
        r"^--samples ppl_govreport=\[-1\]: not allowed; give a non-empty list of document indices, integers >= 0$",
    ),
    ("samples-empty-list", ["--samples", '{"ppl_govreport": []}'], r"^--samples ppl_govreport=\[\]: not allowed"),
    ("samples-not-a-list", ["--samples", '{"ppl_govreport": 3}'], r"^--samples ppl_govreport=3: not allowed"),
    (
        "samples-unknown-task",
        ["--samples", '{"nosuch": [0]}'],
        r"^--samples names nosuch, which this run does not evaluate "
        r"\(lm-eval would ignore it and run every document\); "
        r"give indices of its tasks: ppl_govreport$",
    ),
    ("samples-file-unknown-task", ["--samples", "{samples_file}"], r"^--samples names ppl_govreprot, which this run"),
    (
        "use-cache-under-a-file",
        ["--use_cache", "{corpus}/cache"],
        r"^--use_cache '.*corpus.jsonl/cache': not allowed \(.*corpus.jsonl is a file, so nothing can be written under "
        r"it\); give a path in a folder you can write",
    ),
    (
        "verbosity-unknown",
        ["--verbosity", "bogus"],
        r"^--verbosity 'BOGUS': not allowed; give DEBUG, INFO, WARNING, "
        r"ERROR or CRITICAL$",
    ),
    ("device-unknown", ["--device", "gpu9"], r"^--device 'gpu9': not allowed; give a torch device"),
]


@pytest.mark.parametrize("flags,pattern", [pytest.param(f, p, id=i) for i, f, p in BAD])
def test_a_bad_flag_value_is_one_line_before_the_model_loads(
    flags, pattern, tiny, corpus, tmp_path, no_model_load, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    flags = [f.replace("{samples_file}", _samples_file(tmp_path)).replace("{corpus}", str(corpus)) for f in flags]
    main(_argv(tiny, corpus, "--limit", "-1"))  # lm-eval's command line and torch imported (not timed)
    capsys.readouterr()
    start = time.perf_counter()
    code = main(_argv(tiny, corpus, *flags))
    seconds = time.perf_counter() - start
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("lch: error:")]
    assert code == 2 and "Traceback" not in err, err[-2000:]
    assert len(errors) == 1 and err.strip().splitlines()[-1] == errors[0], err[-2000:]
    assert re.search(pattern, errors[0][len("lch: error: ") :]), errors[0]
    assert flags[0] in errors[0]  # the flag is named
    assert seconds < BOUND_S, f"refused after {seconds:.1f} s"


def test_plain_lm_eval_refuses_a_negative_limit_in_one_line(tiny, corpus, tmp_path):
    """The user's report: `--limit -3` ended in exit 70 and islice's traceback; plain `lm_eval` now says it in one
    line, exit 2, before the model loads (no results written)."""
    out = tmp_path / "out"
    start = time.perf_counter()
    done = subprocess.run(
        [str(BIN / "lm_eval"), *_argv(tiny, corpus, "--limit", "-3")[1:], "--output_path", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    seconds = time.perf_counter() - start
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert [line for line in lines if line.startswith("lch: error:")] == [lines[-1]]
    assert re.search(rf"^lch: error: --limit -3: not allowed; {LIMIT}$", lines[-1]), lines[-1]
    assert not out.exists()
    assert seconds < PROCESS_BOUND_S, f"refused after {seconds:.1f} s"


# good values of every checked flag, a few runs' worth (each run costs lm-eval's index of its 14,000 task YAMLs)
SHARE = [
    "--limit",
    "0.5",
    "--batch_size",
    "auto:2",
    "--max_batch_size",
    "8",
    "--num_fewshot",
    "0",
    "--seed",
    "0,None,8,52",
    "--gen_kwargs",
    "temperature=0,top_p=1,max_gen_toks=16",
    "--verbosity",
    "info",
    "--use_cache",
    "cache/run",
]
COUNT = ["--limit", "2", "--batch_size", "4", "--seed", "4294967295"]


@pytest.mark.parametrize("flags,documents", [(SHARE, 1), (COUNT, 2)], ids=["limit-0.5", "limit-2"])
def test_a_share_and_a_count_of_documents_still_run(flags, documents, tiny, corpus, tmp_path, capsys, monkeypatch):
    """`--limit 0.5` (half of the 2 documents) and `--limit 2`, each with good values of other checked flags, run for
    real and score that many documents."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    assert main(_argv(tiny, corpus, *flags, "--output_path", str(out))) == 0, capsys.readouterr().err[-2000:]
    (results,) = out.rglob("results_*.json")
    data = json.loads(results.read_text(encoding="utf-8"))
    assert data["n-samples"]["ppl_govreport"]["effective"] == documents


@pytest.mark.parametrize(
    "flags",
    [
        ["--samples", '{"ppl_govreport": [0, 1]}', "--batch_size", "auto"],
        ["--limit", "1", "--batch_size", "1", "--seed", "7"],
    ],
    ids=["samples", "limit-1"],
)
def test_good_values_reach_the_model(flags, tiny, corpus, tmp_path, no_model_load, capsys, monkeypatch):
    """Values inside every domain pass every check: the run gets as far as loading the model (stubbed here)."""
    monkeypatch.chdir(tmp_path)
    code = main(_argv(tiny, corpus, *flags))
    err = capsys.readouterr().err
    assert code == 70 and "ModelLoaded: the model was loaded" in err, err[-2000:]


def test_python_callers_of_simple_evaluate_get_the_parameter_named(tiny, corpus, no_model_load):
    """`lm_eval.simple_evaluate` with our tasks: the same checks, naming the parameter (a Python caller types no
    flag), before the model loads; `bootstrap_iters` has no flag and is checked there only."""
    import lm_eval

    from harness.plugin.activation import activate

    activate()
    common = {
        "model": "hf-pic",
        "model_args": {"pretrained": str(tiny)},
        "tasks": ["ppl_govreport"],
        "metadata": {"data_files": str(corpus), "min_tokens": 0, "num_docs": 2},
        "device": "cpu",
    }
    for given, message in [
        ({"limit": -3}, rf"^limit=-3: not allowed; {LIMIT}$"),
        (
            {"bootstrap_iters": -1},
            r"^bootstrap_iters=-1: not allowed; give an integer >= 0 \(0: no "
            r"standard errors\)$",
        ),
        ({"numpy_random_seed": -1}, rf"^numpy_random_seed=-1: not allowed; {SEED}"),
        ({"verbosity": "loud"}, r"^verbosity='loud': not allowed; give DEBUG, INFO"),
        ({"samples": {"ppl_govreport": [0], "other": [1]}}, r"^samples names other, which this "),
        ({"log_samples": "no"}, r"^log_samples='no': not allowed; give True or False$"),
    ]:
        with pytest.raises(UsageError, match=message):
            lm_eval.simple_evaluate(**common, **given)
    with pytest.raises(ModelLoaded):  # nothing refused: on to the model
        lm_eval.simple_evaluate(**common, limit=0.5, bootstrap_iters=0, random_seed=None, verbosity="INFO")


def test_an_index_beyond_the_documents_is_one_line():
    """Only lm-eval knows how many documents a task has once it built them (after the model loaded): its assertion
    becomes the one line."""
    from harness.plugin.translate import translate

    err = AssertionError(
        "Elements of --samples should be in the interval [0,k-1] where k is the number of total "
        "examples. In this case, k=2."
    )
    assert str(translate(err)) == (
        "--samples gives a document index beyond a task's 2 documents; give indices from 0 to 1"
    )


def test_the_settings_checked_are_lm_evals_own_parameters_and_flags():
    """Every setting the door checks is a parameter of lm-eval's `simple_evaluate`, and the flag a refusal names is one
    of its `run` command's: a rename in lm-eval fails here, not silently in a user's run. The switches (True / False)
    are read from lm-eval's own signature."""
    import argparse

    from lm_eval._cli.harness import HarnessCLI
    from lm_eval.evaluator import simple_evaluate

    from harness.plugin.preflight import DOMAINS, FLAG_OF, _switches, refused

    parameters = set(inspect.signature(inspect.unwrap(simple_evaluate)).parameters)
    assert {*DOMAINS, "gen_kwargs", "samples"} <= parameters
    parser = HarnessCLI()._parser
    run = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["run"]
    options = {option for action in run._actions for option in action.option_strings}
    flags = {
        refused(name, 0, "").on_command_line.split()[0]
        for name in [*DOMAINS, "gen_kwargs", "samples"]
        if name != "bootstrap_iters"
    }  # the one setting no flag of lm-eval's sets
    assert flags <= options and {flag for flag, _ in FLAG_OF.values()} == {"--seed"}
    assert {"log_samples", "write_out", "predict_only", "check_integrity"} <= _switches()
    assert "apply_chat_template" not in _switches()  # True, False or a template's name
