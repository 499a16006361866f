"""The tiny models that committed numbers rest on are the same bytes on every machine (harness/models/tiny.py).

Training is not reproducible across CPUs: ATen's kernels take another ISA path (AVX-512, AVX2, scalar) on another
machine, and the random init and 300 AdamW steps come out otherwise. ``ATEN_CPU_CAPABILITY=default`` makes this
machine take the scalar path, so a process started with it stands for another machine: it must get the very model
the committed baseline (results/baselines/demo-vanilla.json) was made from.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.errors import MissingDataError
from harness.models import tiny
from harness.models.identity import model_identity

REPO = Path(__file__).resolve().parents[2]
BASELINE = REPO / "results" / "baselines" / "demo-vanilla.json"

_BUILD_BOTH = """
import json, sys, torch
from harness.models.identity import model_identity
from harness.models.tiny import build_tiny_model
model = build_tiny_model(train_steps=300, train_length=128)
evaluator = build_tiny_model(train_steps=300, train_length=256, seed=1)
print(json.dumps({"capability": torch.backends.cpu.get_cpu_capability(), "model": str(model),
                  "model_identity": model_identity(model), "evaluator": str(evaluator)}))
"""


def test_demo_models_on_another_isa_path_are_the_baselines(tmp_path):
    """Made in a fresh cache by a process on ATen's scalar path, the demo's model is the one whose content digest
    the committed baseline records (``run.model``), its evaluator the one the baseline names, and both are the
    shipped files byte for byte."""
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default", "LCH_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", _BUILD_BOTH], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    built = json.loads(proc.stdout.strip().splitlines()[-1])
    assert built["capability"].lower() == "default"
    baseline = json.loads(BASELINE.read_text(encoding="utf-8"))
    assert built["model_identity"] == baseline["run"]["model"]
    assert Path(built["evaluator"]).name == baseline["tasks"]["longppl_govreport"]["evaluator"]
    manifest = json.loads((tiny.SHIPPED_DIR / tiny.MANIFEST).read_text(encoding="utf-8"))
    for name, folder in (("demo-model", built["model"]), ("demo-evaluator", built["evaluator"])):
        files = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in Path(folder).iterdir()}
        assert files == manifest["models"][name]["files"]
    # and this process (the session cache, the machine's own ISA path) gets the same model
    assert model_identity(tiny.build_tiny_model(train_steps=300, train_length=128)) == baseline["run"]["model"]


def test_only_the_shipped_arguments_are_shipped():
    assert tiny.shipped_model({**tiny._DEFAULTS, "train_steps": 300, "train_length": 128})[0] == "demo-model"
    assert (
        tiny.shipped_model({**tiny._DEFAULTS, "train_steps": 300, "train_length": 256, "seed": 1})[0]
        == "demo-evaluator"
    )
    for other in (
        {},
        {"train_steps": 100},
        {"train_steps": 300, "train_length": 128, "max_positions": 4096},
        {"train_steps": 300, "train_length": 256},
    ):
        assert tiny.shipped_model({**tiny._DEFAULTS, **other}) is None


def test_an_install_without_the_shipped_files_is_refused_not_trained(tmp_path, monkeypatch):
    """A missing manifest or a damaged file is one line naming the file; nothing is trained in their place."""
    build = {**tiny._DEFAULTS, **tiny.SHIPPED["demo-model"]}
    monkeypatch.setattr(tiny, "_build", lambda *a, **k: pytest.fail("a shipped model must never be trained"))
    with pytest.raises(MissingDataError, match="manifest.json cannot be read"):
        tiny.shipped_model(build, root=tmp_path)
    name, digests = tiny.shipped_model(build)
    (tmp_path / name).mkdir()
    for file in digests:
        (tmp_path / name / file).write_bytes((tiny.SHIPPED_DIR / name / file).read_bytes())
    (tmp_path / name / "model.safetensors").write_bytes(b"not the weights")
    (tmp_path / "out").mkdir()
    with pytest.raises(MissingDataError, match="model.safetensors is damaged"):
        tiny._copy_shipped(tmp_path / "out", name, digests, root=tmp_path)


def test_the_package_data_carries_every_shipped_file():
    """pyproject's package-data for ``harness.models`` matches each file of the shipped folder (wheel installs)."""
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
        "package-data"
    ]["harness.models"]
    package = Path(tiny.__file__).parent
    shipped = [f.relative_to(package).as_posix() for f in tiny.SHIPPED_DIR.rglob("*") if f.is_file()]
    assert len(shipped) == 1 + 5 * len(tiny.SHIPPED)
    assert all(any(fnmatch.fnmatch(f, pattern) for pattern in patterns) for f in shipped), shipped
