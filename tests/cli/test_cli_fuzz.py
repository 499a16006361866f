"""A fuzzer of the `lch` command line: nothing a user types makes `lch` crash.

Design. Invocations are generated from `lch`'s own parser: :func:`commands` walks
``harness.cli.build_parser()``'s subparsers (``train``'s recipes too) and each one's actions (option strings,
nargs, choices, type); hypothesis draws, per action, valid-looking and invalid values of its type, its
choices and wrong ones, model args strings (``pretrained=...,pic=...,pic_ratio=...``), ``--metadata`` JSON with
keys of our tasks (``our_metadata_keys``) and values of every JSON type, and paths to generated inputs
(tests/cli/fuzz_inputs.py: empty, binary, truncated JSON / JSON Lines, valid JSON with wrong fields, a huge line,
copies of a tiny model folder with config.json / the safetensors / the tokenizer deleted or truncated, adapters
that are not adapters, paths that do not exist). ``lch eval`` takes lm-eval's flags, drawn from a list here.

Every invocation runs in-process through ``harness.cli.main(argv)``, stdout / stderr captured, in a fresh
temporary working folder, with ``$LCH_CACHE``, ``$HF_HOME`` and ``$LCH_MODELS`` in a temporary folder and
``HF_HUB_OFFLINE=1``; each run must: exit 0, 1, 2 or 130; on a non-zero exit, end stderr with exactly one
line ``lch: error: ...`` naming one of the arguments given (or a file under one), with no ``Traceback``;
and leave no file behind when it failed (the working folder's tree, the inputs' tree and every output path
given are compared before / after).

Heavy work never runs in the fast profile; it stops at a monkeypatched boundary after the argument checks:
``lch eval``: lm-eval's command line runs for real up to ``simple_evaluate`` (its task lookup included), which only
lets the door check the run (``harness.plugin.preflight.admit``: lm-eval's settings, our model args, tasks, metadata);
``lch train <recipe>``: ``Trainer.train`` returns at once (the model loads, the rows are read and checked,
the output is saved); ``lch train-compressor``: its training loop returns one loss; ``lch demo``: the demo
functions return at once; ``lch tiny-model``: returns the fuzzer's tiny model; always (both profiles):
``lch vllm-env`` never builds (its builder is replaced), ``lch models fetch`` never downloads (its sources
report "unavailable"), and no judge server answers (the URLs drawn point at closed ports or are not URLs).

Profiles: the suite runs the fast one (a few examples per command, seeded with ``derandomize=True``: about a
minute on a 2-core machine). ``LCH_FUZZ=long pytest tests/cli/test_cli_fuzz.py`` runs 200 examples per
command, and lm-eval for real (``--limit 1``) on valid-looking ``lch eval`` invocations.
``LCH_FUZZ_EXAMPLES=N`` sets the fast profile's examples per command. ``LCH_FUZZ_REPORT=FILE`` appends each failing
invocation to FILE (JSON Lines) instead of failing, to triage.

Every failure the fuzzer found is a regression case in tests/cli/fuzz_corpus.json (argv with ``{file:NAME}``
placeholders from fuzz_inputs.FILES, the exit code, a fragment of the error line), replayed by
:func:`test_corpus_case`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from harness.cli import build_parser, main
from tests.cli.fuzz_inputs import expand, make_inputs

LONG = os.environ.get("LCH_FUZZ") == "long"
settings.register_profile(
    "lch-fast",
    max_examples=int(os.environ.get("LCH_FUZZ_EXAMPLES", 6)),
    deadline=60_000,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
    print_blob=True,
)
settings.register_profile(
    "lch-long",
    max_examples=200,
    deadline=300_000,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
    print_blob=True,
)
PROFILE = settings.get_profile("lch-long" if LONG else "lch-fast")
# The fast profile stubs every heavy step, so an invocation that takes longer than this is stuck or doing work
# before its checks (a hang is a failure, not a slow test); lm-eval's and transformers' imports are cached by then.
TIME_BOUND_S = 30.0
CORPUS = Path(__file__).with_name("fuzz_corpus.json")
ALLOWED_EXITS = {0, 1, 2, 130}


# ------------------------------------------------------------------ the commands, from lch's own parser


def commands() -> dict[str, argparse.ArgumentParser]:
    """``"train pic-sft"`` -> its parser, for every subcommand of ``lch`` (nested ones included)."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(prefix: str, parser: argparse.ArgumentParser) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            found[prefix.strip()] = parser
        for action in subs:
            for name, child in action.choices.items():
                walk(f"{prefix} {name}", child)

    walk("", build_parser())
    return found


COMMANDS = commands()

# ------------------------------------------------------------------ values

INTS = ["1", "2", "0", "-1", "3", "abc", "1.5", "", "99999999999999999999", "1e3"]
FLOATS = ["0.5", "1", "2.0", "0", "-1", "nan", "inf", "-inf", "x", "1e309", ""]
STRINGS = ["", "x", "-", "..", "none", "über", "a b", "--", "%s", "{", "0"]
PIC = ["naive", "ntk", "dynamic", "none", "bogus", ""]


def _file(inputs: dict[str, Path]) -> st.SearchStrategy[str]:
    return st.sampled_from(sorted(inputs)).map(lambda name: str(inputs[name]))


def _model(inputs: dict[str, Path]) -> st.SearchStrategy[str]:
    names = [n for n in inputs if n.startswith("model-")] + [
        "not-an-adapter",
        "missing",
        "empty-dir",
        "text.txt",
        "variant-wrong",
    ]
    return st.one_of(
        st.sampled_from(names).map(lambda n: str(inputs[n])),
        st.sampled_from(
            [
                "gpt2",
                "org/no-such-model",
                "./relative/model",
                "/abs/missing/model",
                "a" * 300,
                "bad name!",
                "smollm2-135m",
            ]
        ),
    )


def _model_args(inputs: dict[str, Path]) -> st.SearchStrategy[str]:
    part = st.one_of(
        _model(inputs).map(lambda p: f"pretrained={p}"),
        st.sampled_from(PIC).map(lambda p: f"pic={p}"),
        st.sampled_from(FLOATS).map(lambda r: f"pic_ratio={r}"),
        st.sampled_from(
            [
                "dtype=float32",
                "dtype=fp99",
                "max_length=64",
                "max_length=-3",
                "foo=1",
                "pretrained",
                "=",
                "pic_impl=paper",
                "pic_impl=x",
                "rope_base=-1",
                "l_ic=abc",
            ]
        ),
    )
    return st.lists(part, min_size=0, max_size=4).map(",".join)


def _metadata() -> st.SearchStrategy[str]:
    from harness.plugin.task_index import our_metadata_keys

    values = st.recursive(
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(-5, 10**6),
            st.floats(allow_nan=False, allow_infinity=False),
            st.text(max_size=6),
            st.sampled_from(["1k,2k", "4", "true", "none", "x"]),
        ),
        lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2),
        max_leaves=4,
    )
    keys = st.sampled_from(sorted(our_metadata_keys()) + ["not_a_key", ""])
    return st.one_of(
        st.dictionaries(keys, values, max_size=3).map(json.dumps),
        _domain_edges(),
        st.sampled_from(["{", "[1]", "null", '"x"', "{'a': 1}", "", "1"]),
    )


def domain_edges() -> dict[str, list]:
    """For every task option that declares a domain (harness.core.options: ``low`` / ``high`` / ``nonempty`` /
    ``choices``), the values at and just past its edges: the bounds, one past each, 0, -1, 1e12, an empty list and
    string, and a near-miss of each word."""
    import dataclasses

    from harness.plugin.discovery import tasks_path
    from harness.plugin.task_index import task_option_classes

    edges: dict[str, list] = {}
    for cls in task_option_classes(tasks_path()):
        for f in dataclasses.fields(cls):
            meta, values = f.metadata, []
            for bound, step in ((meta.get("low"), -1), (meta.get("high"), 1)):
                if bound is not None:
                    values += [bound, bound + step]
            if meta.get("nonempty"):
                values += [[], ""]
            if meta.get("choices"):
                values += [str(c)[:-1] for c in meta["choices"] if c][:2]
            if values:
                edges.setdefault(f.name, []).extend(values + [0, -1, 10**12])
    return edges


DOMAIN_EDGES = domain_edges()


def _domain_edges() -> st.SearchStrategy[str]:
    """``--metadata`` with one or two options at the edges of their domains (:func:`domain_edges`)."""
    pairs = st.sampled_from(sorted(DOMAIN_EDGES)).flatmap(
        lambda key: st.tuples(st.just(key), st.sampled_from(DOMAIN_EDGES[key]))
    )
    return st.lists(pairs, min_size=1, max_size=2).map(lambda items: json.dumps(dict(items)))


def _judge_url() -> st.SearchStrategy[str]:
    from tests.judge_servers import free_port

    return st.sampled_from([f"http://127.0.0.1:{free_port()}/v1", "not a url", "ftp://x", "", "http://", "localhost"])


def _value(action: argparse.Action, inputs: dict[str, Path], cwd: Path) -> st.SearchStrategy[str]:
    """One value of ``action``: by its choices, its type, else by what its name says it is."""
    name = action.dest
    if action.choices:
        return st.sampled_from([str(c) for c in action.choices] + ["bogus", ""])
    if action.type is int:
        return st.sampled_from(INTS)
    if action.type is float:
        return st.sampled_from(FLOATS)
    if name in ("output", "junit", "cache_dir", "judge_cache_dir", "root"):
        return st.sampled_from(
            [
                "out",
                "out/sub/file.csv",
                "out.csv",
                str(inputs["text.txt"]),
                str(inputs["empty-dir"]),
                "",
                str(cwd / "o"),
            ]
        )
    if name in ("model", "base", "evaluator", "tuned", "init", "tokenizer", "length_tokenizer"):
        return _model(inputs)
    if name == "judge_base_url":
        return _judge_url()
    if name in ("task", "sort", "x", "y", "matrix", "hf_dataset"):
        return st.sampled_from(
            ["longbench_write", "hellobench_htg", "lch_ruler", "ppl_govreport/word_perplexity,none", "x", ""]
        )
    return st.one_of(_file(inputs), st.sampled_from(STRINGS))


@st.composite
def invocation(draw, command: str, inputs: dict[str, Path], cwd: Path) -> list[str]:
    """argv of one ``lch <command>`` invocation drawn from the command's parser."""
    if command == "eval":
        return ["eval"] + draw(_eval_args(inputs, cwd))
    parser = COMMANDS[command]
    argv = command.split()
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if not action.option_strings:  # positional
            argv += draw(_values(action, inputs, cwd))
            continue
        if not draw(st.booleans() if not action.required else st.sampled_from([True, True, True, False])):
            continue
        argv.append(draw(st.sampled_from(action.option_strings)))
        if action.nargs != 0:
            argv += draw(_values(action, inputs, cwd))
    if draw(st.integers(0, 9)) == 0:
        argv.insert(draw(st.integers(1, len(argv))), draw(st.sampled_from(["--bogus", "-x", "extra", "--help"])))
    return argv


def _values(action: argparse.Action, inputs: dict[str, Path], cwd: Path) -> st.SearchStrategy[list[str]]:
    one = _value(action, inputs, cwd)
    if action.nargs in (None, "?") or action.nargs == 1:
        return st.lists(one, min_size=0 if action.nargs == "?" else 1, max_size=1)
    if isinstance(action.nargs, int):
        return st.lists(one, min_size=action.nargs, max_size=action.nargs) | st.lists(one, max_size=3)
    return st.lists(one, min_size=1 if action.nargs == "+" else 0, max_size=3)


def _eval_args(inputs: dict[str, Path], cwd: Path) -> st.SearchStrategy[list[str]]:
    """lm-eval's flags as ``lch eval`` passes them on (its parser is lm-eval's, not ours)."""
    tasks = st.lists(
        st.sampled_from(
            [
                "ppl_govreport",
                "longppl_govreport",
                "lsm_govreport",
                "lch_ruler_niah_single_1",
                "longbench_write",
                "hellobench_htg",
                "no_such_task",
                "list",
                "",
            ]
        ),
        min_size=1,
        max_size=2,
    ).map(",".join)
    flags = {
        "--model": st.sampled_from(["hf-pic", "hf-pic", "compressor", "vllm-pic", "hf", "bogus"]),
        "--model_args": _model_args(inputs),
        "--tasks": tasks,
        "--metadata": _metadata(),
        "--limit": st.sampled_from(["1", "0", "-1", "x", "0.5"]),
        "--output_path": st.sampled_from(["out", str(inputs["text.txt"]), str(cwd / "o/r.json")]),
        "--device": st.sampled_from(["cpu", "cpu", "gpu9", ""]),
        "--batch_size": st.sampled_from(["1", "auto", "x", "0"]),
        "--include_path": _file(inputs),
        "--use_cache": st.sampled_from(["cache/x", str(inputs["missing-dir/x.jsonl"])]),
    }
    chosen = st.lists(st.sampled_from(sorted(flags)), unique=True, max_size=6)

    @st.composite
    def build(draw) -> list[str]:
        names = draw(chosen)
        if draw(st.booleans()):
            names = ["--model", "--model_args", "--tasks"] + [
                n for n in names if n not in ("--model", "--model_args", "--tasks")
            ]
        argv: list[str] = []
        for name in names:
            argv += [name, draw(flags[name])]
        return argv

    return build()


# ------------------------------------------------------------------ running and checking one invocation


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:  # a name too long for the file system
        return False


def _tree(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")} if folder.exists() else set()


def run_checked(argv: list[str], inputs_root: Path, work: Path) -> tuple[int, str, list[str]]:
    """Run ``lch argv`` in-process in ``work``; (exit code, stderr, problems found)."""
    before_inputs, before_work = _tree(inputs_root), _tree(work)
    given = [Path(a) if os.path.isabs(a) else work / a for a in argv if a and not a.startswith("-")]
    existed = {p: _exists(p) for p in given}
    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    os.chdir(work)
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
    finally:
        os.chdir(old)
    seconds = time.perf_counter() - start
    stderr = err.getvalue()
    problems = []
    if not LONG and seconds > TIME_BOUND_S:
        problems.append(f"took {seconds:.0f} s (bound {TIME_BOUND_S:.0f} s: every heavy step is stubbed)")
    if code not in ALLOWED_EXITS:
        problems.append(f"exit {code}")
    if "Traceback" in stderr:
        problems.append("a traceback")
    if code != 0:
        lines = [line for line in stderr.splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("lch: error:")]
        if code != 130 and (len(errors) != 1 or not lines or lines[-1] != errors[0]):
            problems.append(f"{len(errors)} error lines / stderr does not end with one")
        elif code != 130 and not _names_an_argument(errors[0], argv):
            problems.append(f"the error line names no argument: {errors[0]!r}")
        created = sorted((_tree(inputs_root) - before_inputs) | (_tree(work) - before_work))
        created += [str(p) for p, was in existed.items() if not was and _exists(p)]
        created = [c for c in created if c not in _kept_reports(argv, work, code)]
        if created:
            problems.append(f"a failed run left files behind: {created[:5]}")
    return code, stderr, problems


def _kept_reports(argv: list[str], work: Path, code: int) -> set[str]:
    """What a failed command leaves on purpose: ``lch regress``'s JUnit report at exit 2 / 3 says why the gate could
    not compare (harness/cli/reports.py), so that a CI reader sees the reason."""
    if not argv or argv[0] != "regress" or code not in (2, 3) or "--junit" not in argv[:-1]:
        return set()
    path = Path(argv[argv.index("--junit") + 1])
    path = path if path.is_absolute() else work / path
    made = [path, *(parent for parent in path.parents if parent.is_relative_to(work) and parent != work)]  # its folders
    return {str(p) for p in made} | {str(p.relative_to(work)) for p in made if p.is_relative_to(work)}


def _names_an_argument(line: str, argv: list[str]) -> bool:
    """The error line mentions an argument given: an option (with or without dashes), a value, a file's name,
    a JSON key of a value, or the command itself."""
    text = line.lower()[len("lch: error:") :]
    words: set[str] = set()
    for arg in argv:
        words.add(arg)
        words.add(arg.lstrip("-"))
        words.add(arg.lstrip("-").replace("-", "_"))
        words.add(Path(arg).name)
        for part in re.split(r"[,=]", arg):
            words.add(part)
            words.add(Path(part).name)
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            words.update(map(str, json.loads(arg)))
    parser = COMMANDS.get(" ".join(argv[:2])) or COMMANDS.get(argv[0])
    if parser is not None:  # a default the user left (e.g. keytokens' HF dataset) is theirs too
        words.update(str(a.default) for a in parser._actions if isinstance(a.default, str))
    if "" in argv and text.lstrip().startswith(".:"):  # an empty path is the working folder
        return True
    if any(len(w) == 1 and re.search(rf"(^|\s){re.escape(w)}(\s|[:;,]|$)", text) for w in words):
        return True
    return any(len(w) >= 2 and w.lower() in text for w in words)


@pytest.fixture(scope="module")
def fuzz_env(tmp_path_factory):
    """Inputs written once, caches in a temporary folder, the hub offline, heavy work stubbed (module docstring)."""
    from transformers.trainer_utils import TrainOutput

    import harness.compressor.train as compressor
    import harness.engines.vllm_pic.env as vllm_env
    import harness.models.tiny as tiny_mod
    from harness.models import fetch as fetching

    mp = pytest.MonkeyPatch()
    root = tmp_path_factory.mktemp("fuzz")
    for var, sub in (("LCH_CACHE", "cache"), ("HF_HOME", "hf"), ("LCH_MODELS", "models"), ("LCH_VLLM_ENV", "vllm")):
        mp.setenv(var, str(root / sub))
    mp.setenv("HF_HUB_OFFLINE", "1")
    tiny = tiny_mod.build_tiny_model(max_positions=4096)  # untrained: built in a second
    inputs = make_inputs(root / "inputs", tiny)

    def offline(*args, **kwargs):
        raise fetching._SourceUnavailable("no network in the fuzzer")

    mp.setattr(fetching, "_from_hub", offline)
    mp.setattr(fetching, "_from_pypi", offline)

    def no_build(root_arg=None, log=print):
        from harness.core.errors import UsageError

        raise UsageError("lch vllm-env: not built in the fuzzer")

    mp.setattr(vllm_env, "ensure_vllm_env", no_build)
    mp.setattr(tiny_mod, "build_tiny_model", lambda *a, **k: tiny)
    if not LONG:
        import lm_eval.evaluator
        from transformers import Trainer

        import harness.demo.real as real
        import harness.demo.tiny as demo_tiny
        from harness.plugin.preflight import admit

        mp.setattr(lm_eval.evaluator, "simple_evaluate", lambda **arguments: admit(arguments) and None)
        mp.setattr(Trainer, "train", lambda self, *a, **k: TrainOutput(0, 0.0, {}))
        mp.setattr(compressor, "train", lambda *a, **k: [0.0])
        mp.setattr(demo_tiny, "run_demo", lambda *a, **k: [])
        mp.setattr(real, "run_real_demo", lambda *a, **k: None)
    yield {"root": root, "inputs": inputs, "inputs_root": root / "inputs"}
    mp.undo()


def _report_or_fail(argv: list[str], code: int, stderr: str, problems: list[str]) -> None:
    if not problems:
        return
    report = os.environ.get("LCH_FUZZ_REPORT")
    if report:
        with open(report, "a", encoding="utf-8") as f:
            f.write(json.dumps({"argv": argv, "exit": code, "problems": problems, "stderr": stderr[-1500:]}) + "\n")
        return
    pytest.fail(f"lch {' '.join(argv)}: {'; '.join(problems)}\n{stderr[-2000:]}")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_fuzz_command(command, fuzz_env):
    """Invocations of ``lch <command>`` drawn from its parser: exit 0/1/2/130, one error line, nothing left."""
    inputs = fuzz_env["inputs"]

    @PROFILE
    @given(data=st.data())
    def check(data):
        with tempfile.TemporaryDirectory(dir=fuzz_env["root"]) as folder:
            work = Path(folder)
            argv = data.draw(invocation(command, inputs, work), label="argv")
            if LONG and command == "eval" and "--limit" not in argv:
                argv += ["--limit", "1"]
            _report_or_fail(argv, *run_checked(argv, fuzz_env["inputs_root"], work))

    check()


FOLDER_VALUES = ("file", "under-file", "empty", "unwritable")


def _folder_value(kind: str, inputs: dict[str, Path], root: Path) -> str:
    if kind == "file":
        return str(inputs["text.txt"])
    if kind == "under-file":
        return str(inputs["text.txt"] / "cache")
    if kind == "empty":
        return ""
    folder = root / "read-only"
    folder.mkdir(exist_ok=True)
    folder.chmod(0o500)
    return str(folder / "cache")


@pytest.mark.parametrize("variable", ["LCH_CACHE", "LCH_MODELS", "LCH_VLLM_ENV"])
def test_fuzz_folder_variables(variable, fuzz_env, monkeypatch):
    """Every command with a folder variable that names a file, a path under a file, nothing, or a folder that
    cannot be written: exit 2 with one line naming the variable, within the time bound, nothing left behind. (As
    root every folder is writable: the unwritable case is then skipped.)"""
    inputs = fuzz_env["inputs"]

    @PROFILE
    @given(data=st.data())
    def check(data):
        kind = data.draw(st.sampled_from(FOLDER_VALUES), label="kind")
        if kind == "unwritable" and os.geteuid() == 0:
            return
        command = data.draw(st.sampled_from(sorted(c for c in COMMANDS if c)), label="command")
        with tempfile.TemporaryDirectory(dir=fuzz_env["root"]) as folder:
            work = Path(folder)
            argv = data.draw(invocation(command, inputs, work), label="argv")
            if "--help" in argv:
                return
            with monkeypatch.context() as mp:
                mp.setenv(variable, _folder_value(kind, inputs, fuzz_env["root"]))
                code, stderr, problems = run_checked(argv, fuzz_env["inputs_root"], work)
            problems = [p for p in problems if not p.startswith("the error line names no argument")]
            lines = [line for line in stderr.splitlines() if line.startswith("lch: error:")]
            if code != 2 or not lines or f"${variable}" not in lines[-1]:
                problems.append(f"exit {code}, not one line naming ${variable}")
            _report_or_fail([f"{variable}={kind}", *argv], code, stderr, problems)

    check()


def test_every_command_is_fuzzed():
    """The walk finds every command of `lch`'s help, and train's recipes."""
    assert {"eval", "judge", "train pic-sft", "train merge", "models", "vllm-env", "demo", "agree"} <= set(COMMANDS)


def _corpus() -> list[dict]:
    return json.loads(CORPUS.read_text(encoding="utf-8")) if CORPUS.exists() else []


@pytest.mark.parametrize("case", _corpus(), ids=lambda c: c["id"])
def test_corpus_case(case, fuzz_env, tmp_path):
    """Every failure the fuzzer ever found, replayed: the expected exit code and error line, nothing left."""
    argv = [expand(a, fuzz_env["inputs"], tmp_path) for a in case["argv"]]
    code, stderr, problems = run_checked(argv, fuzz_env["inputs_root"], tmp_path)
    assert not problems, f"{problems}\n{stderr[-2000:]}"
    assert code == case["exit"], stderr[-2000:]
    if case.get("error"):
        line = [x for x in stderr.splitlines() if x.startswith("lch: error:")][-1]
        assert expand(case["error"], fuzz_env["inputs"], tmp_path) in line


def test_a_translated_error_names_only_what_the_user_gave():
    """An offline hub error whose text quotes a docs URL: the message names the model given, never the URL."""
    from harness.plugin.translate import given_models, translate

    argv = ["eval", "--model", "hf-pic", "--model_args", "pretrained=org/my-model,pic=naive", "--tasks", "x"]
    assert given_models(argv) == ["org/my-model"]
    text = (
        "We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them in the cached "
        "files. Check your internet connection or see how to run the library in offline mode at "
        "'https://huggingface.co/docs/transformers/installation#offline-mode'."
    )
    message = str(translate(OSError(text), given_models(argv)))
    assert "org/my-model" in message and "https://" not in message and "offline-mode" not in message
    assert "https://" not in str(translate(OSError(text), []))
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        try:
            raise LocalEntryNotFoundError("see 'https://huggingface.co/docs/x' for 'other/name'")
        except LocalEntryNotFoundError as inner:
            raise OSError("wrapped") from inner
    except OSError as err:
        message = str(translate(err, ["org/my-model"]))
    assert "org/my-model" in message and "other/name" not in message and "https://" not in message
