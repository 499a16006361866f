"""Bad input, as a new user would give it, through `lch`: each case ends in exactly one line
`lch: error: <what is wrong ...>` on stderr, exit 2, no traceback, and no results file written."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main

BIN = Path(sys.executable).parent
REPORT = "The committee reviewed the program and its budget in detail over several sessions. " * 40


@pytest.fixture(scope="module")
def data(tmp_path_factory, tiny_model_dir) -> dict[str, Path]:
    tiny = tiny_model_dir
    root = tmp_path_factory.mktemp("bad-input")
    files = {
        "good": ("corpus.jsonl", "".join(json.dumps({"report": REPORT}) + "\n" for _ in range(2))),
        "not_jsonl": ("broken.jsonl", json.dumps({"report": REPORT}) + "\n{this is not json\n"),
        "no_field": ("fields.jsonl", json.dumps({"body": REPORT}) + "\n"),
        "empty_doc": ("empty.jsonl", json.dumps({"report": ""}) + "\n"),
        "csv": ("corpus.csv", "report\nhello\n"),
        "samples_bad": ("samples_longbench_write_1.jsonl", "not a samples file\n"),
        "samples_unjudged": ("samples_ppl_govreport_1.jsonl", json.dumps({"doc_id": 0, "ppl": [1.0, 2]}) + "\n"),
        "baseline_bad": ("baseline.json", "{not json"),
        "lbw": (
            "lbw.jsonl",
            json.dumps({"prompt": "Write a 3000-word report on rivers.", "type": "Report", "length": 3000}) + "\n",
        ),
        "blank": ("blank.jsonl", "".join(json.dumps({"report": t}) + "\n" for t in (" \n\t ", "   "))),
        "empty_results": (
            "runs-empty-results/m/results_2026-01-01T00-00-00.json",
            json.dumps({"results": {}, "config": {"model": "hf-pic", "model_args": {}}}),
        ),
    }
    out = {}
    for key, (name, text) in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
        out[key] = root / name
    import shutil

    for name, damage in (("model-cut-tokenizer", "tokenizer.json"), ("model-cut-weights", "model.safetensors")):
        shutil.copytree(tiny, root / name)
        size = (root / name / damage).stat().st_size
        with open(root / name / damage, "r+b") as f:
            f.truncate(size // 2)
        out[name] = root / name
    shutil.copytree(tiny, root / "model-no-tokenizer")
    (root / "model-no-tokenizer" / "tokenizer.json").unlink()
    out["model-no-tokenizer"] = root / "model-no-tokenizer"
    item = {
        "instruction": "Write an essay.",
        "response": "An essay.",
        "checklists": ["Is it an essay?"],
        "category": "argumentative_writing",
        "weights_file": "w.txt",
        "rescale": False,
        "judge": None,
    }
    (root / "samples_hellobench_htg_1.jsonl").write_text(json.dumps({"doc_id": 0, "quality": item}) + "\n")
    out["samples_judged"] = root / "samples_hellobench_htg_1.jsonl"
    (root / "runs-empty").mkdir()
    out["runs_empty"] = root / "runs-empty"
    out["root"] = root
    return out


@pytest.fixture(scope="module")
def not_a_judge():
    """A plain static-file HTTP server (GET /v1/models is a 404): what a wrong judge URL often points at."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(Path(__file__).parent))
    handler.log_message = lambda *args: None
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def _eval(model_args: str, tasks: str, metadata: dict | None = None, model: str = "hf-pic", out: Path | None = None):
    argv = ["eval", "--model", model, "--model_args", model_args, "--device", "cpu", "--tasks", tasks]
    if metadata is not None:
        argv += ["--metadata", json.dumps(metadata)]
    if out is not None:
        argv += ["--output_path", str(out)]
    return argv


def _cases(tiny: str, d: dict[str, Path], not_a_judge: str) -> list[tuple[str, list[str], str]]:
    """(case id, argv, regex the error line must match after 'lch: error: ')."""
    from tests.judge_servers import free_port

    ppl = {"min_tokens": 10, "num_docs": 2}
    good = str(d["good"])
    nobody = f"http://127.0.0.1:{free_port()}/v1"
    return _vllm_cases(tiny, good) + [
        (
            "judge-not-openai",
            [
                "judge",
                str(d["samples_judged"]),
                "--judge-base-url",
                not_a_judge,
                "--judge-model",
                "m",
                "--judge-cache-dir",
                str(d["root"] / "jc1"),
            ],
            r"the judge server at http://127.0.0.1:\d+/v1 is not OpenAI-compatible \(GET /models answered HTTP 404\): "
            r"start an OpenAI-compatible server",
        ),
        (
            "judge-nobody-listening",
            [
                "judge",
                str(d["samples_judged"]),
                "--judge-base-url",
                nobody,
                "--judge-model",
                "m",
                "--judge-cache-dir",
                str(d["root"] / "jc2"),
            ],
            r"no judge server answers at http://127.0.0.1:\d+/v1 \(.*\): start an OpenAI-compatible server",
        ),
        # model args
        (
            "pic-unknown",
            _eval(f"pretrained={tiny},pic=bogus", "ppl_govreport", {"data_files": good, **ppl}),
            r"pic 'bogus' is unknown; allowed: none, naive, ntk, dynamic",
        ),
        (
            "pic-ratio-zero",
            _eval(f"pretrained={tiny},pic=naive,pic_ratio=0", "ppl_govreport", {"data_files": good, **ppl}),
            r"pic_ratio \(s_cr\) must be > 0, got 0",
        ),
        (
            "pic-ratio-negative",
            _eval(f"pretrained={tiny},pic=ntk,pic_ratio=-2", "ppl_govreport", {"data_files": good, **ppl}),
            r"pic_ratio \(s_rr\) must be > 0, got -2",
        ),
        (
            "pic-ratio-text",
            _eval(f"pretrained={tiny},pic=naive,pic_ratio=two", "ppl_govreport", {"data_files": good, **ppl}),
            r"pic_ratio must be a number",
        ),
        (
            "pic-layout",
            _eval(f"pretrained={tiny},pic=dynamic,pic_layout=spiral", "ppl_govreport", {"data_files": good, **ppl}),
            r"pic_layout 'spiral' is unknown",
        ),
        (
            "pic-impl",
            _eval(f"pretrained={tiny},pic=dynamic,pic_impl=fast", "ppl_govreport", {"data_files": good, **ppl}),
            r"pic_impl 'fast' is unknown",
        ),
        (
            "model-folder-missing",
            _eval("pretrained=/no/such/model", "ppl_govreport", {"data_files": good, **ppl}),
            r"pretrained=/no/such/model does not exist: give a model folder or a hub name",
        ),
        (
            "model-weights-cut-short",
            _eval(f"pretrained={d['model-cut-weights']}", "ppl_govreport", {"data_files": good}),
            r"model.safetensors is not a readable safetensors file \(.*\): the model folder .* is damaged",
        ),
        (
            "model-tokenizer-cut-short",
            _eval(f"pretrained={d['model-cut-tokenizer']}", "ppl_govreport", {"data_files": good}),
            r"tokenizer.json is cut short \(it does not end its JSON object\): the folder pretrained=.* is damaged",
        ),
        (
            "model-without-tokenizer",
            _eval(f"pretrained={d['model-no-tokenizer']}", "ppl_govreport", {"data_files": good}),
            r"pretrained=.*model-no-tokenizer has no tokenizer files \(tokenizer.json / .*\): give a complete model "
            r"folder, or tokenizer= a folder holding its tokenizer$",
        ),
        (
            "tokenizer-arg-without-tokenizer",
            _eval(f"pretrained={tiny},tokenizer={d['model-no-tokenizer']}", "ppl_govreport", {"data_files": good}),
            r"tokenizer=.*model-no-tokenizer has no tokenizer files",
        ),
        (
            "samples-not-json",
            _eval(f"pretrained={tiny}", "ppl_govreport", {"data_files": good}) + ["--samples", "x"],
            r"--samples 'x' is neither a JSON object \(Expecting value\) nor a file",
        ),
        (
            "lm-eval-refuses-a-flag",
            _eval(f"pretrained={tiny}", "ppl_govreport", {"data_files": good, **ppl}) + ["--fewshot_as_multiturn"],
            r"lm-eval refused the arguments: When `fewshot_as_multiturn` is True, `apply_chat_template` must be set; "
            r"check the flags",
        ),
        (
            "blank-documents",
            _eval(f"pretrained={tiny}", "ppl_govreport", {"data_files": str(d["blank"]), "min_tokens": 1}),
            r"none of the 2 documents could be scored: each is empty or only whitespace; give documents with text$",
        ),
        ("demo-essays-missing", ["demo", "--essays", "/no/essays"], r"--essays /no/essays is not a folder"),
        (
            "leaderboard-empty-results",
            ["leaderboard", str(d["empty_results"].parents[1]), "-o", str(d["root"] / "e.csv")],
            r"results_2026-01-01T00-00-00.json: its results hold no metric \(an empty 'results' object\)$",
        ),
        (
            "judge-timeout-zero",
            [
                "judge",
                str(d["samples_judged"]),
                "--judge-base-url",
                "http://x",
                "--judge-model",
                "m",
                "--judge-timeout",
                "0",
            ],
            r"judge timeout must be a number of seconds > 0, got 0.0$",
        ),
        (
            "compressor-checkpoint-missing",
            _eval(f"pretrained={tiny},checkpoint=/no/ckpt", "compress_lm", {"num_docs": 1}, model="compressor"),
            r"checkpoint=/no/ckpt does not exist",
        ),
        (
            "compressor-unknown-arg",
            _eval(f"pretrained={tiny},chunksize=8", "compress_lm", {"num_docs": 1}, model="compressor"),
            r"compressor: unknown model arg chunksize; did you mean chunk_size\?",
        ),
        (
            "hf-pic-typo-arg",
            _eval(f"pretrained={tiny},pic=naive,pic_ration=4", "ppl_govreport", {"data_files": good, **ppl}),
            r"hf-pic: unknown model arg pic_ration; did you mean pic_ratio\? \(other args go to transformers' "
            r"from_pretrained; give a known one\)$",
        ),
        (
            "hf-pic-unknown-pic-arg",
            _eval(f"pretrained={tiny},pic_window=4", "ppl_govreport", {"data_files": good, **ppl}),
            r"hf-pic: unknown model arg pic_window \(other args",
        ),
        # tasks and their metadata
        (
            "unknown-task",
            _eval(f"pretrained={tiny}", "ppl_govreprot", {"data_files": good}),
            r"Tasks not found: ppl_govreprot; did you mean ppl_govreport\? \(`lch eval --tasks list` lists every "
            r"task\)$",
        ),
        (
            "unknown-lm-eval-task",
            _eval(f"pretrained={tiny}", "hellaswagg", {"data_files": good}),
            r"Tasks not found: hellaswagg; did you mean hellaswag\? \(`lch eval --tasks list` lists every task\)$",
        ),
        (
            "metadata-typo",
            _eval(f"pretrained={tiny}", "ppl_govreport", {"data_files": good, "num_doc": 2}),
            r"--metadata key 'num_doc' is not read by any of these tasks; did you mean num_docs",
        ),
        (
            "data-missing",
            _eval(f"pretrained={tiny}", "ppl_govreport", {"data_files": "/no/such/corpus.jsonl"}),
            r"data_files=/no/such/corpus.jsonl does not exist",
        ),
        (
            "data-not-jsonl",
            _eval(f"pretrained={tiny}", "ppl_govreport", {"data_files": str(d["not_jsonl"]), **ppl}),
            r"broken.jsonl:2: not JSON Lines .*each line must be one JSON object",
        ),
        (
            "data-no-field",
            _eval(f"pretrained={tiny}", "ppl_govreport", {"data_files": str(d["no_field"]), **ppl}),
            r"fields.jsonl: row 0 has no field 'report'",
        ),
        (
            "data-csv",
            _eval(f"pretrained={tiny}", "ppl_govreport", {"data_files": str(d["csv"]), **ppl}),
            r"unsupported file type '.csv'",
        ),
        (
            "no-long-document",
            _eval(
                f"pretrained={tiny}", "ppl_govreport", {"data_files": good, "min_tokens": 10**6, "max_tokens": "none"}
            ),
            r"no document has 1000000 tokens or more: lower min_tokens",
        ),
        (
            "max-below-min",
            _eval(f"pretrained={tiny}", "ppl_govreport", {"data_files": good, "min_tokens": 10**6}),
            r"ppl_govreport: max_tokens 32767 is below min_tokens 1000000: no document could be both long enough and "
            r"cut "
            r"that short; give max_tokens >= min_tokens$",
        ),
        (
            "empty-document",
            _eval(f"pretrained={tiny}", "ppl_govreport", {"data_files": str(d["empty_doc"]), "min_tokens": 1}),
            r"none of the 1 documents could be scored",
        ),
        (
            "min-tokens-negative",
            _eval(f"pretrained={tiny}", "ppl_govreport", {"data_files": good, "min_tokens": -1}),
            r"ppl_govreport: --metadata min_tokens must be between 0 and 10000000, got -1$",
        ),
        (
            "longppl-no-long-document",
            _eval(
                f"pretrained={tiny}",
                "longppl_govreport",
                {"data_files": good, "evaluator": tiny, "min_tokens": 10**6, "max_tokens": 10**6},
            ),
            r"none of the 2 documents has 1000000 tokens or more",
        ),
        (
            "longppl-window-longer-than-documents",
            _eval(
                f"pretrained={tiny}",
                "longppl_govreport",
                {"data_files": good, "evaluator": tiny, "min_tokens": 10, "num_docs": 2},
            ),
            r"trunc_len \(K\) 4096 is at least as long as 2 of the 2 documents \(document 0: \d+ tokens\): no token of "
            r"them can be a key token",
        ),
        (
            "ruler-length-unparseable",
            _eval(f"pretrained={tiny}", "lch_ruler_niah_single_1", {"lengths": "long"}),
            r"length 'long' must be a token count \(4096\) or a k-label \(4k\)",
        ),
        (
            "ruler-length-too-short",
            _eval(f"pretrained={tiny}", "lch_ruler_niah_single_1", {"lengths": [100]}),
            r"RULER niah_single_1 at length 100: the answer budget alone takes 128 tokens",
        ),
        (
            "babilong-length",
            _eval(f"pretrained={tiny}", "lch_babilong_qa1", {"lengths": ["1500"]}),
            r"BABILong lengths are multiples of 1024 tokens",
        ),
        (
            "judge-policy",
            _eval(
                f"pretrained={tiny}",
                "longbench_write",
                {
                    "longbench_write_data": str(d["lbw"]),
                    "limit_docs": 1,
                    "max_gen_toks": 2,
                    "judge_base_url": "http://127.0.0.1:9/v1",
                    "judge_model": "m",
                    "judge_policy": "lenient",
                },
            ),
            r"judge_policy 'lenient' is unknown; allowed: drop, zero, rejudge",
        ),
        (
            "longbench-write-no-row",
            _eval(
                f"pretrained={tiny}",
                "longbench_write",
                {"longbench_write_data": str(d["lbw"]), "min_required_length": 5000},
            ),
            r"no row of the LongBench-Write data asks for more than 5000 words \(min_required_length\)",
        ),
        # models that do not serve a task's requests (refused before any model loads)
        (
            "hf-on-ppl",
            _eval(f"pretrained={tiny}", "ppl_govreport", {"data_files": good, **ppl}, model="hf"),
            r"ppl_govreport sends token_logprobs requests, which the hf model does not serve: use --model hf-pic or "
            r"--model vllm-pic",
        ),
        (
            "hf-pic-on-compressor-task",
            _eval(f"pretrained={tiny}", "lch_ruler_niah_single_1,compress_ae", {"num_docs": 1}),
            r"compress_ae sends compress_ae requests, which the hf-pic model does not serve: use --model compressor",
        ),
        (
            "compressor-on-group",
            _eval(f"pretrained={tiny}", "lsm_govreport", {"data_files": good}, model="compressor"),
            r"lsm_govreport sends lsm requests, which the compressor model does not serve",
        ),
        # judges
        (
            "judge-samples-missing",
            ["judge", "/no/samples.jsonl", "--judge-base-url", "http://x", "--judge-model", "m"],
            r"samples file /no/samples.jsonl does not exist",
        ),
        (
            "judge-samples-malformed",
            ["judge", str(d["samples_bad"]), "--judge-base-url", "http://x", "--judge-model", "m"],
            r"samples_longbench_write_1.jsonl:1: not an lm-eval samples file",
        ),
        (
            "judge-samples-unjudged",
            ["judge", str(d["samples_unjudged"]), "--judge-base-url", "http://x", "--judge-model", "m"],
            r"sample 0 has no judged item \('quality'\)",
        ),
        (
            "judge-missing-args",
            ["judge", str(d["samples_bad"])],
            r"lch judge: the following arguments are required: --judge-base-url, --judge-model",
        ),
        # models
        (
            "models-unknown",
            ["models", "fetch", "llama-70b"],
            r"unknown model 'llama-70b'; known: gemma3-270m, smollm2-135m",
        ),
        ("models-no-name", ["models", "fetch"], r"lch models fetch: give a model name"),
        # reporting
        (
            "leaderboard-no-runs",
            ["leaderboard", str(d["runs_empty"]), "-o", str(d["root"] / "lb.csv")],
            r"runs-empty: no results_\*.json found",
        ),
        (
            "leaderboard-missing-folder",
            ["leaderboard", "/no/runs", "-o", str(d["root"] / "lb2.csv")],
            r"/no/runs does not exist: give lm-eval output folders",
        ),
        (
            "regress-bad-baseline",
            ["regress", str(d["runs_empty"]), "--baseline", str(d["baseline_bad"])],
            r"runs-empty: no results_\*.json found",
        ),
        ("correlate-no-axes", ["correlate", str(d["runs_empty"])], r"runs-empty: no results_\*.json found"),
        (
            "gentable-no-samples",
            ["gentable", str(d["runs_empty"]), "--task", "longbench_write"],
            r"no results_\*.json under .*runs-empty \(run lm-eval with --log_samples\)",
        ),
        (
            "plot-kind",
            ["plot", "bars", str(d["runs_empty"]), "--task", "x"],
            r"lch plot: argument kind: invalid choice",
        ),
        (
            "agree-missing-run",
            ["agree", "/no/run-a", str(d["runs_empty"])],
            r"/no/run-a does not exist: give two lm-eval "
            r"output folders",
        ),
        (
            "agree-no-results",
            ["agree", str(d["runs_empty"]), str(d["runs_empty"])],
            r"runs-empty: no results_\*.json found",
        ),
        # training
        (
            "train-finetune-no-data",
            [
                "train-compressor",
                "--base",
                tiny,
                "--output",
                str(d["root"] / "ckpt"),
                "--stage",
                "finetune",
                "--steps",
                "1",
            ],
            r"fine-tuning needs --mrqa-data",
        ),
        (
            "train-base-missing",
            ["train-compressor", "--base", "/no/base", "--output", str(d["root"] / "ckpt2"), "--steps", "1"],
            r"model /no/base not found: give pretrained= a local model folder or a hub name",
        ),
        (
            "train-recipe-data-missing",
            [
                "train",
                "pic-sft",
                "--pic",
                "dynamic",
                "--model",
                tiny,
                "--data",
                "/no/data.jsonl",
                "--output",
                str(d["root"] / "v1"),
            ],
            r"/no/data.jsonl does not exist: give a .jsonl file of training rows",
        ),
        (
            "train-recipe-row-shape",
            ["train", "pic-sft", "--model", tiny, "--data", str(d["no_field"]), "--output", str(d["root"] / "v2")],
            r"fields.jsonl row 0: no 'messages' and no text field 'instruction' \(use --prompt-field",
        ),
        (
            "train-longrecipe-no-target",
            [
                "train",
                "longrecipe",
                "--model",
                tiny,
                "--data",
                good,
                "--text-field",
                "report",
                "--output",
                str(d["root"] / "v3"),
            ],
            r"longrecipe needs --target-length",
        ),
        (
            "train-pic-ratio",
            [
                "train",
                "pic-sft",
                "--pic",
                "naive",
                "--pic-ratio",
                "0",
                "--model",
                tiny,
                "--data",
                good,
                "--output",
                str(d["root"] / "v4"),
            ],
            r"--pic-ratio must be > 0, got 0.0",
        ),
        (
            "train-rope-base",
            ["train", "sft", "--rope-base", "-1", "--model", tiny, "--data", good, "--output", str(d["root"] / "v4b")],
            r"--rope-base must be > 0, got -1.0",
        ),
        (
            "train-merge-missing",
            ["train", "merge", "--base", tiny, "--tuned", "/no/adapter", "--output", str(d["root"] / "v5")],
            r"/no/adapter is not a checkpoint or adapter folder",
        ),
        (
            "keytokens-evaluator-missing",
            [
                "keytokens",
                "--evaluator",
                "/no/evaluator",
                "--data-files",
                good,
                "--text-field",
                "report",
                "--min-tokens",
                "10",
            ],
            r"evaluator=/no/evaluator does not exist: give the evaluator as a model folder or a hub name",
        ),
    ]


def _vllm_cases(tiny: str, good: str) -> list[tuple[str, list[str], str]]:
    """vllm-pic where vLLM is not installed (the project's CPU venv); the vLLM environment's own bad input is in
    tests/engines/test_vllm_engine.py."""
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        return []
    return [
        (
            "vllm-pic-without-vllm",
            _eval(f"pretrained={tiny},pic=ntk,pic_ratio=2", "ppl_govreport", {"data_files": good}, model="vllm-pic"),
            r"vllm-pic needs vLLM, which is not installed here: .* build the CPU vLLM environment once with "
            r"`lch vllm-env`",
        )
    ]


def test_bad_input_table(tiny_model_dir, data, not_a_judge, tmp_path, capsys):
    cases = _cases(str(tiny_model_dir), data, not_a_judge)
    assert len(cases) >= 25
    failures = []
    for case, argv, pattern in cases:
        out = tmp_path / case
        if argv[0] == "eval":
            argv = argv + ["--output_path", str(out)]
        code = main(argv)
        err = capsys.readouterr().err
        errors = [line for line in err.splitlines() if line.startswith("lch: error: ")]
        problems = []
        if code != 2:
            problems.append(f"exit {code}")
        if len(errors) != 1:
            problems.append(f"{len(errors)} error lines")
        elif not re.search(pattern, errors[0][len("lch: error: ") :]):
            problems.append(f"message {errors[0]!r} does not match {pattern!r}")
        if "Traceback" in err:
            problems.append("a traceback")
        if list(out.rglob("results_*.json")) + list(out.rglob("samples_*.jsonl")):
            problems.append("a results file was written")
        if problems:
            failures.append(f"{case}: {', '.join(problems)}\n{err[-800:]}")
    assert not failures, "\n\n".join(failures)


def test_real_process_gives_one_line_and_debug_gives_the_traceback(data):
    """Through the installed `lch` executable: stderr is the one line; --debug adds the traceback."""
    args = [str(BIN / "lch"), "judge", str(data["samples_bad"]), "--judge-base-url", "http://x", "--judge-model", "m"]
    done = subprocess.run(args, capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"lch: error: {data['samples_bad']}:1: not an lm-eval samples file "
        "(Expecting value); each line must be one JSON object"
    ]
    debug = subprocess.run(args + ["--debug"], capture_output=True, text=True)
    assert debug.returncode == 2 and "Traceback" in debug.stderr and "DataFormatError" in debug.stderr


def test_argparse_errors_name_the_command_once(capsys):
    """A leftover argument is reported by the top-level parser: one "lch:" prefix, not "lch: error: lch: ..."."""
    assert main(["demo", "-o", "out"]) == 2
    assert capsys.readouterr().err.splitlines() == ["lch: error: unrecognized arguments: -o out; see `lch --help`"]
    assert main(["demo", "--model", "nope"]) == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith("lch: error: lch demo: argument --model: invalid choice")


def test_an_internal_error_keeps_its_traceback(monkeypatch, capsys):
    """A bug is not dressed up as a user error: traceback and exit 70."""
    from harness.cli import reports

    def broken(args):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(reports, "run_leaderboard", broken)
    assert main(["leaderboard", "x", "-o", "y.csv"]) == 70
    err = capsys.readouterr().err
    assert "lch: internal error" in err and "Traceback" in err and "ZeroDivisionError: a bug" in err


def test_debug_shows_the_traceback_of_an_error_inside_lm_evals_run_too(tiny_model_dir, capsys, monkeypatch):
    """`lch eval ... --debug` keeps the traceback of an error raised inside lm-eval's command line (where the one-line
    translation of a run of ours lives), as LCH_DEBUG=1 does; without it, one line."""
    monkeypatch.delenv("LCH_DEBUG", raising=False)
    argv = ["eval", "--model", "hf-pic", "--model_args", f"pretrained={tiny_model_dir}", "--tasks", "ppl_govreprot"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("lch: error: Tasks not found")
    assert main([*argv, "--debug"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "ValueError: Tasks not found: ppl_govreprot" in err
    import os

    assert "LCH_DEBUG" not in os.environ  # restored after the command


@pytest.mark.parametrize("case", ["model-without-tokenizer", "samples-not-json", "blank-documents"])
def test_plain_lm_eval_gives_the_same_one_line_for_bad_input_of_our_runs(
    case, tiny_model_dir, data, not_a_judge, tmp_path
):
    """The bad-input table's cases through plain `lm_eval` (the activation of lch_harness_lm_eval.py): the same
    line, exit 2, no traceback, nothing written."""
    ((argv, pattern),) = [
        (argv, pattern) for name, argv, pattern in _cases(str(tiny_model_dir), data, not_a_judge) if name == case
    ]
    out = tmp_path / "out"
    done = subprocess.run(
        [str(BIN / "lm_eval"), *argv[1:], "--output_path", str(out)], capture_output=True, text=True, timeout=300
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert lines[-1].startswith("lch: error: ") and re.search(pattern, lines[-1][len("lch: error: ") :]), lines[-1]
    assert not out.exists()
