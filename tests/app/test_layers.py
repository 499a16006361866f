"""The package's one-way layers (harness/devtools/layers.py): the tree obeys them, the checker catches the
import cycles a design review once found, and docs/ARCHITECTURE.md states the same rules."""

import subprocess
import sys
from pathlib import Path

import pytest

from harness.devtools.layers import check, layer_of, rules, violations

ROOT = Path(__file__).resolve().parents[2]


def test_the_tree_has_no_layer_violations():
    graph, problems = check(ROOT)
    assert problems == []
    assert "harness.lmeval.hf_pic" in graph and "harness.judges.stage" in graph and "harness.tasks.mrqa.utils" in graph
    # lm-eval is imported by the lm-eval glue only
    importers = {m for m, targets in graph.items() if "lm_eval" in targets}
    assert importers and all(layer_of(m).name == "lmeval" for m in importers), importers


def test_the_review_findings_would_fail():
    """Each import the design review listed is a violation of the rules."""
    before = {
        "harness.metrics.lsm": {"torch", "harness.models.scoring"},  # pure metrics running models ...
        "harness.models.hf_pic": {"harness.metrics.lsm", "lm_eval"},  # ... and the model importing them back
        "harness.data.longppl_corpus": {"harness.models.keytokens"},  # a loader running the evaluator
        "harness.reporting.generation_table": {"harness.judges.stage"},  # reporting reaching the judge
        "harness.judges.stage": {"harness.tasks.classes.base"},  # the judge stage inside lm-eval
        "harness.metrics.generation": {"pathlib"},  # a pure module reading weight files
    }
    problems = violations(before, {"harness.metrics.generation": {"read_text"}})
    assert problems == [
        "harness.data.longppl_corpus (data) imports harness.models.keytokens (models)",
        "harness.judges.stage (judging) imports harness.tasks.classes.base (lmeval)",
        "harness.metrics.generation (pure) imports pathlib, which the pure layer may not",
        "harness.metrics.generation (pure) calls read_text(): the pure layer does no I/O",
        "harness.metrics.lsm (pure) imports harness.models.scoring (models)",
        "harness.models.hf_pic (models) imports lm_eval, which the models layer may not",
        "harness.reporting.generation_table (reporting) imports harness.judges.stage (judging)",
    ]


def test_lazy_and_relative_imports_count(tmp_path):
    """A function-level import and a relative import in source files are both found."""
    for folder in ("harness/metrics", "harness/models", "harness/tasks", "harness/judges"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "harness/__init__.py").write_text("")
    (tmp_path / "harness/models/scoring.py").write_text("def hidden_states():\n    pass\n")
    (tmp_path / "harness/metrics/bad.py").write_text(
        "def f():\n    from harness.models.scoring import hidden_states\n    return hidden_states\n")
    (tmp_path / "harness/metrics/rel.py").write_text("from ..models import scoring\n")
    (tmp_path / "harness/metrics/io.py").write_text("def g(p):\n    return open(p).read()\n")
    _, problems = check(tmp_path)
    assert problems == [
        "harness.metrics.bad (pure) imports harness.models.scoring (models)",
        "harness.metrics.io (pure) calls open(): the pure layer does no I/O",
        "harness.metrics.rel (pure) imports harness.models (models)",
        "harness.metrics.rel (pure) imports harness.models.scoring (models)",
    ]


def test_layer_of_takes_the_longest_package():
    assert layer_of("harness").name == "app"
    assert layer_of("harness.cache").name == "base"
    assert layer_of("harness.devtools.layers").name == "app"
    assert layer_of("harness.judges.client").name == "judging"
    assert layer_of("harness.tasks.mrqa.utils").name == "lmeval"
    assert layer_of("numpy") is None


def test_architecture_states_the_rules_and_the_command_prints_them():
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    for line in rules():
        assert line in doc, line
    done = subprocess.run([sys.executable, "-m", "harness.devtools.layers"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert all(line in done.stdout for line in rules()) and "no violations" in done.stdout


def test_every_package_is_shipped():
    """pyproject.toml finds packages by pattern: every folder with an ``__init__.py`` under harness/ must match
    it, or it would be left out of the wheel."""
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    from setuptools import find_packages

    include = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]["find"]["include"]
    shipped = set(find_packages(where=str(ROOT), include=include))
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "harness").rglob("__init__.py")}
    assert "harness.judges" in found and "harness.tasks.classes" in found
    assert found <= shipped, sorted(found - shipped)
