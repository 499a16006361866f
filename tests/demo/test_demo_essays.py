"""Where ``lch demo`` reads its essays: ``--essays`` / ``$LCH_ESSAYS`` / the folder beside a checkout / the essays
shipped with the package, in that order; and from a wheel installed away from any checkout, in an empty folder, the
shipped ones, which the demo's tasks read as they read any folder of essays.

The scratch environment holds the wheel alone; it sees the test environment's dependencies through a folder of links
that leaves out everything of lch-harness (the editable install's finder, metadata and ``.pth`` files), so that the
``harness`` it imports can only be the wheel's. The full demo from such an install is measured by hand
(benchmarks/results/demo_wall_time.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]
ESSAYS = CHECKOUT / "harness" / "data" / "lch_essays"
SOURCES = ("pyproject.toml", "build_pth.py", "lch_harness_lm_eval.py", "README.md", "harness")  # what the wheel reads


def _folder(path: Path) -> Path:
    path.mkdir()
    (path / "a.txt").write_text("An essay.", encoding="utf-8")
    return path


def test_essays_given_come_first_then_the_environments_then_beside_the_checkout_then_the_shipped(tmp_path, monkeypatch):
    from harness.demo.real import DemoCorpus, demo_corpus

    mine, theirs = _folder(tmp_path / "mine"), _folder(tmp_path / "theirs")
    monkeypatch.setenv("LCH_ESSAYS", str(theirs))
    assert demo_corpus(str(mine)) == DemoCorpus(mine, "mine", "--essays")
    assert demo_corpus(None) == DemoCorpus(theirs, "theirs", "$LCH_ESSAYS")
    assert demo_corpus("lch-essays") == DemoCorpus(ESSAYS, "lch-essays", "shipped with the package, named by --essays")
    monkeypatch.setenv("LCH_ESSAYS", "lch-essays")
    assert demo_corpus(None) == DemoCorpus(ESSAYS, "lch-essays", "shipped with the package, named by $LCH_ESSAYS")
    monkeypatch.delenv("LCH_ESSAYS")
    beside = CHECKOUT.parent / "shared" / "data" / "paul_graham_essays"
    assert demo_corpus(None) == (
        DemoCorpus(beside, "paul_graham_essays", "beside the checkout")
        if any(beside.glob("*.txt"))
        else DemoCorpus(ESSAYS, "lch-essays", "shipped with the package")
    )


def test_a_folder_asked_for_that_holds_no_essays_is_refused_not_replaced(tmp_path, monkeypatch):
    from harness.core.errors import MissingDataError
    from harness.demo.real import demo_corpus

    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("LCH_ESSAYS", str(_folder(tmp_path / "good")))
    with pytest.raises(
        MissingDataError,
        match=r"^--essays .*empty holds no \.txt file: give a folder of \.txt "
        r"essays, or lch-essays \(the essays shipped with the package\)$",
    ):
        demo_corpus(str(tmp_path / "empty"))
    monkeypatch.setenv("LCH_ESSAYS", str(tmp_path / "a.txt"))
    with pytest.raises(MissingDataError, match=r"^\$LCH_ESSAYS .*a\.txt is not a folder"):
        demo_corpus(None)


def _ours(name: str) -> bool:
    """An entry of the test environment's site-packages that belongs to the lch-harness install."""
    return name.startswith(("lch_harness", "__editable__")) or name == "harness" or name.endswith(".pth")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A virtual environment with the checkout's wheel installed (``--no-deps``) and the test environment's
    dependencies linked, never the checkout; returns its folder."""
    root = tmp_path_factory.mktemp("installed")
    src = root / "src"  # a copy: building in the checkout would leave build/ there, shared by parallel runs
    src.mkdir()
    for name in SOURCES:
        if (CHECKOUT / name).is_dir():
            shutil.copytree(CHECKOUT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(CHECKOUT / name, src / name)
    run = lambda *args: subprocess.run(args, check=True, capture_output=True, text=True, timeout=300)  # noqa: E731
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "-q",
        "-w",
        str(root / "dist"),
        str(src),
    )
    wheel = next((root / "dist").glob("lch_harness-*.whl"))
    env = root / "env"
    run(sys.executable, "-m", "venv", "--without-pip", str(env))
    run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        str(env / "bin" / "python"),
        "install",
        "--no-deps",
        "--no-index",
        "-q",
        str(wheel),
    )
    deps = env / "deps"  # inside the environment, as installed dependencies are (dill pickles by reference only
    deps.mkdir()  # classes of modules under sys.prefix or in a site-packages folder: datasets' fingerprints)
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not _ours(entry.name):
            (deps / entry.name).symlink_to(entry)
    site = next(env.glob("lib/python*/site-packages"))
    (site / "_deps.pth").write_text(f"{deps}\n", encoding="utf-8")  # before lch_harness_lm_eval.pth: sorted
    return env


def _scratch_env(env: Path) -> dict:
    variables = {k: v for k, v in os.environ.items() if k not in ("LCH_ESSAYS", "PYTHONPATH", "VIRTUAL_ENV")}
    return {**variables, "PATH": f"{env / 'bin'}{os.pathsep}{variables.get('PATH', '')}"}


PROBE = """
import importlib.metadata, json, sys
from pathlib import Path

import harness, lch_harness_lm_eval
from harness.demo.real import GROUP, prepare_demo
from harness.longppl.corpus import corpus_documents
from harness.plugin.in_process import task_manager
from harness.tasks.logprob import LongPPLTask

setup = prepare_demo(output="results/demo")  # what `lch demo` resolves, with no --essays and no $LCH_ESSAYS
_, options = LongPPLTask.read_options(setup.metadata, "longppl_govreport")  # the LongPPL task's own parse
loaded = task_manager([str(setup.group_dir)], setup.metadata, ours_only=True).load([GROUP])  # as each cell's run does
print(json.dumps({
    "harness": harness.__file__, "plugin": lch_harness_lm_eval.__file__, "sys_path": sys.path,
    "dists": [str(d._path) for d in importlib.metadata.distributions() if d.metadata["Name"] == "lch-harness"],
    "corpus": vars(setup.corpus) | {"folder": str(setup.corpus.folder)},
    "metadata": {k: setup.metadata[k] for k in ("essays", "filler", "data_files")},
    "longppl": [{"text": d["text"], "n_tokens": d["n_tokens"]} for d in corpus_documents(options)],
    "samples": {name: list(task.eval_docs) for name, task in loaded["tasks"].items()},
}))
"""


def test_the_demo_from_a_wheel_away_from_any_checkout_reads_the_essays_the_wheel_ships(
    installed, tmp_path, smollm2_dir
):
    from transformers import AutoTokenizer

    from harness.data.haystacks import split_sentences

    empty = tmp_path / "empty"
    empty.mkdir()
    done = subprocess.run(
        [str(installed / "bin" / "python"), "-c", PROBE],
        cwd=empty,
        env=_scratch_env(installed),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])

    # the package is the wheel's, and nothing of the checkout is importable
    site = next(installed.glob("lib/python*/site-packages"))
    assert Path(found["harness"]).parent == site / "harness" and Path(found["plugin"]).parent == site
    assert found["dists"] == [str(next(site.glob("lch_harness-*.dist-info")))]
    assert not [p for p in found["sys_path"] if p and Path(p).is_relative_to(CHECKOUT)]

    # the essays beside the checkout exist on this machine, yet the install reads its own
    folder = site / "harness" / "data" / "lch_essays"
    assert found["corpus"] == {"folder": str(folder), "name": "lch-essays", "chosen": "shipped with the package"}
    assert found["metadata"] == {"essays": str(folder), "filler": str(folder), "data_files": str(folder)}
    names = sorted(p.name for p in ESSAYS.glob("*.txt"))
    assert sorted(p.name for p in folder.glob("*.txt")) == names
    texts = {name: (ESSAYS / name).read_text(encoding="utf-8") for name in names}
    assert all((folder / name).read_text(encoding="utf-8") == texts[name] for name in names)

    # PPL / LongPPL: the first 4 essays by name, each cut to its first 2048 SmolLM2 tokens (cut here independently)
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    expected = []
    for name in names[:4]:
        encoded = tokenizer(texts[name], return_offsets_mapping=True, add_special_tokens=False)
        assert len(encoded["input_ids"]) > 2048
        expected.append({"text": texts[name][: encoded["offset_mapping"][2047][1]], "n_tokens": 2048})
    assert found["longppl"] == expected

    # RULER and BABILong at 1k and 2k: one sample each, fitted to the length, the haystack / filler the essays' prose
    samples = found["samples"]
    assert sorted(samples) == ["lch_babilong_qa1", "lch_ruler_niah_single_1", "lch_ruler_niah_single_2"]
    assert {t: [s["prompt_budget"] for s in rows] for t, rows in samples.items()} == {t: [1024, 2048] for t in samples}
    corpus = [s for name in names for s in split_sentences(texts[name])]
    for sample in samples["lch_ruler_niah_single_2"]:
        start, end = sample["context_span"]
        context = split_sentences(sample["input"][start:end])
        # the essay haystack: the corpus's sentences in order from its first, the needle among them
        needle = [s for s in context if sample["outputs"][0] in s]
        haystack = [s for s in context if s not in needle]
        assert len(needle) == 1 and len(haystack) > 20 and haystack == corpus[: len(haystack)]
        assert sample["prompt_tokens"] + sample["max_gen_toks"] <= sample["length"]
    sentences = set(corpus)
    for sample in samples["lch_babilong_qa1"]:
        start, end = sample["context_span"]
        filler = [s for s in split_sentences(sample["prompt"][start:end]) if s in sentences]
        assert len(" ".join(filler)) > 0.8 * (end - start)  # the facts aside, the context is the essays' sentences


def test_the_installed_lch_demo_refuses_a_missing_essays_folder_in_one_line(installed, tmp_path):
    done = subprocess.run(
        ["lch", "demo", "--essays", str(tmp_path / "nowhere")],
        cwd=tmp_path,
        env=_scratch_env(installed),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"lch: error: --essays {tmp_path / 'nowhere'} is not a folder: give a folder of "
        ".txt essays, or lch-essays (the essays shipped with the package)"
    )
