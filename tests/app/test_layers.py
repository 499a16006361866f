"""The package's one-way layers (harness/devtools/layers.py): the tree obeys them, the checker catches the
import cycles a design review once found, and docs/ARCHITECTURE.md states the same rules."""

import subprocess
import sys
from pathlib import Path

import pytest

from harness.devtools.layers import FOLDER_CIRCLES, check, cycles, folder_problems, layer_of, rules, violations

ROOT = Path(__file__).resolve().parents[2]


def test_the_tree_has_no_layer_violations():
    graph, problems = check(ROOT)
    assert problems == []
    assert "harness.engines.hf_pic" in graph and "harness.judges.stage" in graph and "harness.tasks.mrqa.utils" in graph
    # lm-eval is imported by the lm-eval glue only
    importers = {m for m, targets in graph.items() if "lm_eval" in targets}
    assert importers and all(layer_of(m).name == "lmeval" for m in importers), importers


def test_the_review_findings_would_fail():
    """Each import the design review listed is a violation of the rules."""
    before = {
        "harness.lsm.formulas": {"torch", "harness.models.scoring"},  # pure metrics running models ...
        "harness.models.hf_pic": {"harness.lsm.formulas", "lm_eval"},  # ... and the model importing them back
        "harness.longppl.corpus": {"harness.longppl.keytokens"},  # a loader running the evaluator
        "harness.reporting.generation_table": {"harness.judges.stage"},  # reporting reaching the judge
        "harness.judges.stage": {"harness.tasks.base"},  # the judge stage inside lm-eval
        "harness.metrics.generation": {"pathlib"},  # a pure module reading weight files
    }
    declared = {"harness.lsm.formulas": "pure", "harness.longppl.corpus": "data", "harness.longppl.keytokens": "models"}
    problems = violations(before, {"harness.metrics.generation": {"read_text"}}, declared)
    assert problems == [
        "harness.judges.stage (judging) imports harness.tasks.base (lmeval)",
        "harness.longppl.corpus (data) imports harness.longppl.keytokens (models)",
        "harness.lsm.formulas (pure) imports harness.models.scoring (models)",
        "harness.metrics.generation (pure) imports pathlib, which the pure layer may not",
        "harness.metrics.generation (pure) calls read_text(): the pure layer does no I/O",
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


def test_layer_of_takes_the_nearest_declaration_or_folder():
    assert layer_of("harness").name == "app"
    assert layer_of("harness.core.cache").name == "base"
    assert layer_of("harness.devtools.layers").name == "app"
    assert layer_of("harness.judges.client").name == "judging"
    assert layer_of("harness.tasks.mrqa.utils").name == "lmeval"  # its folder's
    assert layer_of("harness.tasks.mrqa.dataset").name == "data"  # declared in the module
    assert layer_of("harness.pic.hf.hooks").name == "models"  # declared in its package (pic/hf/__init__.py)
    assert layer_of("harness.pic.positions").name == "pure"
    assert layer_of("numpy") is None


def _tree(root: Path, files: dict[str, str]) -> Path:
    """``root`` holding ``files`` (path -> text)."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_a_module_declares_its_layer_where_it_lives(tmp_path):
    """A module of a concept folder takes the layer it (or its package) declares; one that declares none is
    refused, named, with what to write; a declaration overrides its folder's layer."""
    files = {
        "harness/__init__.py": "", "harness/models/__init__.py": "", "harness/tasks/__init__.py": "",
        "harness/tasks/t/__init__.py": "", "harness/models/scoring.py": "X = 1\n",
        "harness/concept/__init__.py": '"""A concept."""\n\nLAYER = "pure"\n',
        "harness/concept/math.py": "from harness.models.scoring import X\n",  # inherits pure
        "harness/concept/run.py": 'from harness.models.scoring import X\n\nLAYER = "models"\n',
        "harness/tasks/t/dataset.py": 'LAYER = "data"\nfrom harness.tasks.t import utils\n',
        "harness/tasks/t/utils.py": "", "harness/stray/thing.py": "",
    }
    _, problems = check(_tree(tmp_path, files))
    assert problems == [
        "harness.concept.math (pure) imports harness.models.scoring (models)",
        "harness.stray.thing has no layer: declare LAYER = \"<layer>\" in it or in its package's __init__.py",
        "harness.tasks.t.dataset (data) imports harness.tasks.t (lmeval)",
        "harness.tasks.t.dataset (data) imports harness.tasks.t.utils (lmeval)",
    ]


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
    assert "harness.judges" in found and "harness.pic.hf" in found
    assert found <= shipped, sorted(found - shipped)


def test_import_circles_are_found_and_typing_only_imports_are_not_dependencies(tmp_path):
    """Three modules importing each other in a ring (one of them lazily) are one circle; a module that only imports
    into the ring is not in it; an import under ``if TYPE_CHECKING:`` is no edge."""
    assert cycles({"a": {"b"}, "b": {"c", "torch"}, "c": {"a"}, "d": {"a"}, "e": {"e2"}, "e2": set()}) == [["a", "b", "c"]]
    assert cycles({"x": {"y"}, "y": {"x"}, "p": {"q"}, "q": {"p"}}) == [["p", "q"], ["x", "y"]]
    folder = tmp_path / "harness" / "metrics"
    folder.mkdir(parents=True)
    (tmp_path / "harness" / "__init__.py").write_text("")
    (folder / "__init__.py").write_text("")
    (folder / "one.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from harness.metrics.two import T\n")
    (folder / "two.py").write_text("from harness.metrics.one import TYPE_CHECKING\nT = 1\n")
    graph, problems = check(tmp_path)
    assert "harness.metrics.two" not in graph["harness.metrics.one"] and problems == []
    (folder / "one.py").write_text("def f():\n    from harness.metrics.two import T\n    return T\n")
    assert check(tmp_path)[1] == ["import circle: harness.metrics.one <-> harness.metrics.two"]


def test_floors_import_no_concept_and_folder_circles_are_declared():
    """The three floor imports that made the floors and pic / longppl one circle of folders before (metrics' LongPPL
    threshold, scoring's mask positions, the variant file under data) are refused; a new circle between concept
    folders is refused until declared; the declared one stands in the tree and is said in ARCHITECTURE.md."""
    before = {
        "harness.metrics.support": {"harness.longppl.formulas"},
        "harness.models.scoring": {"harness.pic.positions", "harness.models.head"},
        "harness.data.variants": {"harness.pic.inference", "harness.core.errors"},
        "harness.longppl.formulas": {"harness.metrics.support"},
        "harness.pic.positions": {"harness.core.errors"},
        "harness.pic.inference": {"harness.core.options"},
        "harness.lsm.estimator": {"harness.judges.client"},
        "harness.judges.client": {"harness.lsm.formulas"},
        "harness.lsm.formulas": set(),
        "harness.models.head": set(), "harness.core.errors": set(), "harness.core.options": set(),
    }
    assert folder_problems(before) == [
        "harness.data.variants (floor data) imports harness.pic.inference (folder pic): a floor imports no concept",
        "harness.metrics.support (floor metrics) imports harness.longppl.formulas (folder longppl): a floor imports no "
        "concept",
        "harness.models.scoring (floor models) imports harness.pic.positions (folder pic): a floor imports no concept",
        "folder circle: judges <-> lsm (break it, or declare it in FOLDER_CIRCLES with why)",
        "folder circle: longppl <-> metrics (break it, or declare it in FOLDER_CIRCLES with why)",
    ]
    graph, problems = check(ROOT)
    assert problems == []
    doc = " ".join((ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8").split())
    for group in FOLDER_CIRCLES:
        assert " <-> ".join(sorted(group)) in doc


def test_a_declaration_that_repeats_the_inherited_layer_is_refused(tmp_path):
    """A module says its layer only where it differs from its package's or folder's: a repeated one is named."""
    files = {"harness/__init__.py": "", "harness/concept/__init__.py": 'LAYER = "pure"\n',
             "harness/concept/math.py": 'LAYER = "pure"\n', "harness/concept/run.py": 'LAYER = "models"\n',
             "harness/metrics/__init__.py": "", "harness/metrics/again.py": 'LAYER = "pure"\n'}
    _, problems = check(_tree(tmp_path, files))
    assert problems == [
        "harness.concept.math declares LAYER = 'pure', the layer it has without it: remove the line",
        "harness.metrics.again declares LAYER = 'pure', the layer it has without it: remove the line",
    ]
