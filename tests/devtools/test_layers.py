"""The package's one-way layers (pyproject.toml's import-linter contracts, harness/devtools/layers.py's contract type):
``lint-imports`` keeps them on the tree, breaks them on the import cycles a design review once found, and
docs/ARCHITECTURE.md states the same rules."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.devtools.layers import cycles, declared_layer, layer_of, parse_rule, source_file

ROOT = Path(__file__).resolve().parents[2]
LINT = [
    sys.executable,
    "-c",
    "import sys; from importlinter.cli import lint_imports_command as c; sys.exit(c())",
    "--no-cache",
]


def _tomllib():
    return pytest.importorskip("tomllib")  # Python >= 3.11


def _contracts() -> list[dict]:
    return _tomllib().loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]


def _rules() -> list[str]:
    (contract,) = [c for c in _contracts() if c["type"] == "declared_layers"]
    return contract["layers"]


def _lint(root: Path, *contracts: str) -> tuple[int, list[str]]:
    """``lint-imports`` on the ``harness`` package under ``root`` with this checkout's ``contracts`` (by id; default:
    the layers contract, the others expecting every folder of the package): its exit code and the lines of its broken
    contracts."""
    env = {**os.environ, "COLUMNS": "1000", "PYTHONPATH": str(root)}  # one problem a line; root's harness first
    chosen = [arg for contract in (contracts or ("layers",)) for arg in ("--contract", contract)]
    done = subprocess.run(
        LINT + ["--config", str(ROOT / "pyproject.toml"), *chosen], capture_output=True, text=True, cwd=root, env=env
    )
    text = done.stdout + done.stderr
    broken = text.partition("Broken contracts")[2]
    return done.returncode, [
        line.strip() for line in broken.splitlines() if line.strip() and not set(line.strip()) <= {"-"}
    ]


def _tree(root: Path, files: dict[str, str]) -> Path:
    """``root`` holding ``files`` (path -> text) and the contract type, so that ``lint-imports`` finds both."""
    for name, text in {"harness/__init__.py": "", "harness/devtools/__init__.py": "", **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    shutil.copy(ROOT / "harness/devtools/layers.py", root / "harness/devtools/layers.py")
    return root


def _ours(lines: list[str]) -> list[str]:
    """The problems the layers contract names (its heading line left out)."""
    return [line for line in lines if line.startswith(("harness.", "import circle"))]


def test_the_tree_keeps_every_contract():
    code, broken = _lint(ROOT, "layers", "floors", "folders")
    assert code == 0 and broken == [], broken
    assert {c["type"] for c in _contracts()} == {"declared_layers", "layers", "acyclic_siblings"}


def test_the_review_findings_would_fail(tmp_path):
    """Each import the design review listed breaks the layers contract."""
    files = {
        "harness/lsm/__init__.py": 'LAYER = "pure"\n',
        "harness/lsm/formulas.py": "import torch\nfrom harness.models.scoring import X\n",  # pure metrics run models
        "harness/models/__init__.py": "",
        "harness/models/scoring.py": "X = 1\n",
        "harness/models/hf_pic.py": "import lm_eval\nfrom harness.lsm import formulas\n",  # ... the model imports them
        "harness/longppl/__init__.py": 'LAYER = "pure"\n',
        "harness/longppl/corpus.py": 'LAYER = "data"\nfrom harness.longppl import keytokens\n',  # a loader running it
        "harness/longppl/keytokens.py": 'LAYER = "models"\n',
        "harness/reporting/__init__.py": "",
        "harness/reporting/generation_table.py": "from harness.judges import stage\n",  # reporting reaching the judge
        "harness/judges/__init__.py": "",
        "harness/judges/stage.py": "from harness.tasks import base\n",
        "harness/tasks/__init__.py": "",
        "harness/tasks/base.py": "",  # the judge stage inside lm-eval
        "harness/metrics/__init__.py": "",
        "harness/metrics/generation.py": "import pathlib\n\ndef w(p):\n    return pathlib.Path(p).read_text()\n",
    }
    code, broken = _lint(_tree(tmp_path, files))
    assert code == 1
    assert _ours(broken) == [
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
    files = {
        "harness/metrics/__init__.py": "",
        "harness/models/__init__.py": "",
        "harness/models/scoring.py": "def hidden_states():\n    pass\n",
        "harness/metrics/bad.py": "def f():\n    from harness.models.scoring import hidden_states\n    return 1\n",
        "harness/metrics/rel.py": "from ..models import scoring\n",
        "harness/metrics/io.py": "def g(p):\n    return open(p).read()\n",
    }
    code, broken = _lint(_tree(tmp_path, files))
    assert code == 1 and _ours(broken) == [
        "harness.metrics.bad (pure) imports harness.models.scoring (models)",
        "harness.metrics.io (pure) calls open(): the pure layer does no I/O",
        "harness.metrics.rel (pure) imports harness.models.scoring (models)",
    ]


def test_layer_of_takes_the_nearest_declaration_or_folder():
    folders = {folder: name for name, packages, _ in map(parse_rule, _rules()) for folder in packages}
    modules = [
        "harness",
        "harness.core.cache",
        "harness.devtools.layers",
        "harness.judges.client",
        "harness.tasks.mrqa.utils",
        "harness.tasks.mrqa.dataset",
        "harness.pic.hf.hooks",
        "harness.pic.positions",
    ]
    packages = {".".join(m.split(".")[:end]) for m in modules for end in range(1, len(m.split(".")) + 1)}
    declared = {m: name for m in packages if (name := declared_layer(source_file(m))) is not None}
    layer = {m: layer_of(m, folders, declared) for m in modules}
    assert layer == {
        "harness": "app",
        "harness.core.cache": "base",
        "harness.devtools.layers": "app",
        "harness.judges.client": "judging",
        "harness.tasks.mrqa.utils": "lmeval",  # its folder's
        "harness.tasks.mrqa.dataset": "data",  # declared in the module
        "harness.pic.hf.hooks": "models",  # declared in its package (pic/hf/__init__.py)
        "harness.pic.positions": "pure",
    }
    assert layer_of("numpy", folders, declared) is None


def test_a_module_declares_its_layer_where_it_lives(tmp_path):
    """A module of a concept folder takes the layer it (or its package) declares; one that declares none is
    refused, named, with what to write; a declaration overrides its folder's layer."""
    files = {
        "harness/models/__init__.py": "",
        "harness/tasks/__init__.py": "",
        "harness/tasks/t/__init__.py": "",
        "harness/models/scoring.py": "X = 1\n",
        "harness/concept/__init__.py": '"""A concept."""\n\nLAYER = "pure"\n',
        "harness/concept/math.py": "from harness.models.scoring import X\n",  # inherits pure
        "harness/concept/run.py": 'from harness.models.scoring import X\n\nLAYER = "models"\n',
        "harness/tasks/t/dataset.py": 'LAYER = "data"\nfrom harness.tasks.t import utils\n',
        "harness/tasks/t/utils.py": "",
        "harness/stray/__init__.py": "",
        "harness/stray/thing.py": "",
    }
    code, broken = _lint(_tree(tmp_path, files))
    assert code == 1 and _ours(broken) == [
        "harness.concept.math (pure) imports harness.models.scoring (models)",
        'harness.stray has no layer: declare LAYER = "<layer>" in it or in its package\'s __init__.py',
        'harness.stray.thing has no layer: declare LAYER = "<layer>" in it or in its package\'s __init__.py',
        "harness.tasks.t.dataset (data) imports harness.tasks.t.utils (lmeval)",
    ]


def test_architecture_states_the_rules():
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    for line in _rules():
        assert line in doc, line
    (floors,) = [c for c in _contracts() if c["type"] == "layers"]
    assert {f"`{name.strip()}`" for name in floors["layers"][-1].split(":")} == {
        "`core`",
        "`metrics`",
        "`data`",
        "`models`",
    }
    assert "The shared floors (`core`, `metrics`, `data`, `models`) import no other folder" in " ".join(doc.split())


def test_every_package_is_shipped():
    """pyproject.toml finds packages by pattern: every folder with an ``__init__.py`` under harness/ must match
    it, or it would be left out of the wheel."""
    from setuptools import find_packages

    include = _tomllib().loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"][
        "find"
    ]["include"]
    shipped = set(find_packages(where=str(ROOT), include=include))
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "harness").rglob("__init__.py")}
    assert "harness.judges" in found and "harness.pic.hf" in found
    assert found <= shipped, sorted(found - shipped)


def test_import_circles_are_found_and_typing_only_imports_are_not_dependencies(tmp_path):
    """Three modules importing each other in a ring (one of them lazily) are one circle; a module that only imports
    into the ring is not in it; an import under ``if TYPE_CHECKING:`` is no edge."""
    assert cycles({"a": {"b"}, "b": {"c", "torch"}, "c": {"a"}, "d": {"a"}, "e": {"e2"}, "e2": set()}) == [
        ["a", "b", "c"]
    ]
    assert cycles({"x": {"y"}, "y": {"x"}, "p": {"q"}, "q": {"p"}}) == [["p", "q"], ["x", "y"]]
    files = {
        "harness/metrics/__init__.py": "",
        "harness/metrics/one.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from harness.metrics.two import T\n",
        "harness/metrics/two.py": "from harness.metrics.one import TYPE_CHECKING\nT = 1\n",
    }
    assert _lint(_tree(tmp_path, files)) == (0, [])
    (tmp_path / "harness/metrics/one.py").write_text("def f():\n    from harness.metrics.two import T\n    return T\n")
    code, broken = _lint(tmp_path)
    assert code == 1 and _ours(broken) == ["import circle: harness.metrics.one <-> harness.metrics.two"]


def test_floors_import_no_concept_and_folders_no_circle(tmp_path):
    """The three floor imports that made the floors and pic / longppl one circle of folders before (metrics' LongPPL
    threshold, scoring's mask positions, the variant file under data) break the floors contract; a circle between
    concept folders breaks the folders contract; a new folder not in the floors contract breaks it too."""
    files = {
        "harness/metrics/__init__.py": "",
        "harness/metrics/support.py": "from harness.longppl import formulas\n",
        "harness/models/__init__.py": "",
        "harness/models/head.py": "",
        "harness/models/scoring.py": "from harness.pic import positions\nfrom harness.models import head\n",
        "harness/data/__init__.py": "",
        "harness/data/variants.py": "from harness.pic import inference\n",
        "harness/core/__init__.py": "",
        "harness/core/errors.py": "",
        "harness/core/options.py": "",
        "harness/longppl/__init__.py": 'LAYER = "pure"\n',
        "harness/longppl/formulas.py": "",
        "harness/pic/__init__.py": 'LAYER = "pure"\n',
        "harness/pic/positions.py": "from harness.core import errors\n",
        "harness/pic/inference.py": "from harness.core import options\n",
        "harness/lsm/__init__.py": 'LAYER = "pure"\n',
        "harness/lsm/formulas.py": "",
        "harness/lsm/estimator.py": 'LAYER = "judging"\nfrom harness.judges import client\n',
        "harness/judges/__init__.py": "",
        "harness/judges/client.py": "from harness.lsm import formulas\n",
        "harness/stray/__init__.py": "",
    }
    (floors,) = [c for c in _contracts() if c["id"] == "floors"]
    for folder in (name.strip() for layer in floors["layers"] for name in layer.split(":")):
        files.setdefault(f"harness/{folder}/__init__.py", "")
    code, broken = _lint(_tree(tmp_path, files), "floors", "folders")
    text = "\n".join(broken)
    assert code == 1
    for floor, concept in [
        ("harness.data.variants", "harness.pic.inference"),
        ("harness.metrics.support", "harness.longppl.formulas"),
        ("harness.models.scoring", "harness.pic.positions"),
    ]:
        assert f"{floor} -> {concept}" in text, text
    assert "No cycles are allowed in harness." in text and (".judges -> .lsm" in text or ".lsm -> .judges" in text)
    assert "harness.stray" in text  # a folder the floors contract does not name


def test_a_declaration_that_repeats_the_inherited_layer_is_refused(tmp_path):
    """A module says its layer only where it differs from its package's or folder's: a repeated one is named."""
    files = {
        "harness/concept/__init__.py": 'LAYER = "pure"\n',
        "harness/concept/math.py": 'LAYER = "pure"\n',
        "harness/concept/run.py": 'LAYER = "models"\n',
        "harness/metrics/__init__.py": "",
        "harness/metrics/again.py": 'LAYER = "pure"\n',
    }
    code, broken = _lint(_tree(tmp_path, files))
    assert code == 1 and _ours(broken) == [
        "harness.concept.math declares LAYER = 'pure', the layer it has without it: remove the line",
        "harness.metrics.again declares LAYER = 'pure', the layer it has without it: remove the line",
    ]
