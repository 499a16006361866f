"""``lch sweep`` on a two-node Ray cluster made here (CPU only; each node's ``memory`` resource stands for its device
memory): a grid of the two shipped tiny models x two PIC variants x two tasks gives what the same cells give run one
by one with ``lch eval``, lands only where its planned memory fits, runs nothing the second time, survives a killed
worker and a killed cell, refuses a cell no node fits before anything runs, reports a bad cell with its one line,
and gathers a checkpoint series into a per-step table and a gate. Every cluster is started and stopped here."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.models.tiny import SHIPPED, build_tiny_model

GIB = 1 << 30
TIMEOUT = 400  # one sweep's bound here: a handful of tiny cells one after another on one core


def _ray_processes() -> list[int]:
    import psutil

    names = ("raylet", "gcs_server", "ray::")
    return [
        p.pid
        for p in psutil.process_iter(["name", "cmdline"])
        if any(n in " ".join(p.info["cmdline"] or [p.info["name"] or ""]) for n in names)
    ]


def _start_cluster(nodes: list[dict]):
    pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    head, *rest = nodes
    cluster = Cluster(initialize_head=True, head_node_args={**head, "include_dashboard": False})
    for node in rest:
        cluster.add_node(**node)
    cluster.wait_for_nodes()
    return cluster


@pytest.fixture(scope="module")
def cluster():
    """A head too small for any cell (0.4 GiB) and a worker that fits them (3 GiB), one CPU each."""
    before = set(_ray_processes())
    made = _start_cluster([{"num_cpus": 1, "memory": int(0.4 * GIB)}, {"num_cpus": 1, "memory": 3 * GIB}])
    worker = next(n for n in made.list_all_nodes() if n is not made.head_node)
    yield made, worker.node_id[:8]
    made.shutdown()
    deadline = time.time() + 30
    while set(_ray_processes()) - before and time.time() < deadline:
        time.sleep(0.5)
    assert not set(_ray_processes()) - before, "the cluster left Ray processes behind"


@pytest.fixture(scope="module")
def grid(tmp_path_factory) -> Path:
    """The grid's folder: a small corpus and the sweep file (2 tiny models x 2 variants x 2 tasks)."""
    from harness.data.synthetic import synthetic_reports

    root = tmp_path_factory.mktemp("sweep")
    (root / "reports.jsonl").write_text(
        "".join(json.dumps({"report": t}) + "\n" for t in synthetic_reports(2, 300, seed=3))
    )
    models = [str(build_tiny_model(**args)) for args in SHIPPED.values()]
    spec = {
        "engine": "hf-pic",
        "models": models,
        "model_args": {"device": "cpu", "dtype": "float32"},
        "variants": {"vanilla": {"pic": "none"}, "ntk4": {"pic": "ntk", "pic_ratio": 4}},
        "tasks": ["ppl_govreport", "lch_ruler_niah_single_1"],
        "lengths": [512],
        "metadata": {
            "data_files": "reports.jsonl",
            "min_tokens": 64,
            "max_tokens": 200,
            "num_docs": 2,
            "num_samples": 1,
            "essays": "synthetic",
        },
    }
    (root / "sweep.yaml").write_text(json.dumps(spec))
    return root


def _lch(args: list[str], cwd: Path, **popen) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
        **popen,
    )


def _cells(out: Path) -> dict[str, dict]:
    return {
        json.loads((f / "cell.json").read_text())["label"]: json.loads((f / "cell.json").read_text())
        for f in (out / "cells").iterdir()
        if (f / "cell.json").is_file()
    }


def _results(folder: Path) -> dict:
    (path,) = folder.rglob("results_*.json")
    return json.loads(path.read_text())["results"]


def test_the_grid_equals_its_cells_run_one_by_one_and_lands_where_it_fits(cluster, grid):
    made, worker = cluster
    done = _lch(["sweep", "sweep.yaml", "--address", made.address, "--output", "out"], grid)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "4 done, 0 skipped (already done), 0 failed" in done.stdout
    cells = _cells(grid / "out")
    assert sorted(cells) == sorted(
        f"{Path(m).name} {v}"
        for m in json.loads((grid / "sweep.yaml").read_text())["models"]
        for v in ("vanilla", "ntk4")
    )
    assert {c["node"] for c in cells.values()} == {worker}  # the head's 0.4 GiB fits no cell's plan
    by_hand = grid / "by_hand"
    for label, cell in cells.items():
        out = by_hand / label.replace(" ", "_")
        ran = _lch(["eval", *cell["argv"], "--output_path", str(out)], grid)
        assert ran.returncode == 0, ran.stderr[-3000:]
        swept = next(
            f
            for f in (grid / "out" / "cells").iterdir()
            if (f / "cell.json").is_file() and json.loads((f / "cell.json").read_text())["label"] == label
        )
        assert _results(swept) == _results(out), label
    boards = []
    for runs in (grid / "out" / "cells", by_hand):
        board = grid / f"board-{runs.name}.csv"
        made_board = _lch(["leaderboard", str(runs), "-o", str(board), "--all"], grid)
        assert made_board.returncode == 0, made_board.stderr[-2000:]
        rows = list(csv.DictReader(board.open()))
        boards.append(sorted(json.dumps({k: v for k, v in row.items() if k != "date"}, sort_keys=True) for row in rows))
    assert boards[0] == boards[1]


def test_running_the_sweep_again_runs_nothing(cluster, grid):
    made, _ = cluster
    before = {p: p.stat().st_mtime_ns for p in (grid / "out" / "cells").rglob("*") if p.is_file()}
    again = _lch(["sweep", "sweep.yaml", "--address", made.address, "--output", "out"], grid)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "0 done, 4 skipped (already done), 0 failed" in again.stdout
    assert {p: p.stat().st_mtime_ns for p in (grid / "out" / "cells").rglob("*") if p.is_file()} == before
    for log in (grid / "out" / "logs").iterdir():
        assert log.read_text().count("=== attempt ") == 1, log.name


def test_a_killed_worker_and_a_killed_cell_are_run_again_and_land_once(cluster, grid):
    """The first cell's Ray worker and the second cell's ``lch eval`` are killed mid-run (SIGKILL)."""
    import psutil

    made, _ = cluster
    spec = json.loads((grid / "sweep.yaml").read_text())
    spec["models"] = spec["models"][:1]
    (grid / "kill.yaml").write_text(json.dumps(spec))
    out = grid / "killed"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    sweep = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "sweep", "kill.yaml", "--address", made.address, "--output", str(out)],
        cwd=grid,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    killed: dict[str, str] = {}  # cell folder -> what was killed
    deadline = time.time() + TIMEOUT
    while len(killed) < 2 and sweep.poll() is None and time.time() < deadline:
        for proc in psutil.process_iter(["cmdline"]):
            cmd = proc.info["cmdline"] or []
            if "harness.cli" not in cmd or "eval" not in cmd or not any(str(out) in a for a in cmd):
                continue
            folder = (
                next(a for a in cmd if str(out) in a).split("/cells/")[1].split("/")[0].split(".attempt")[0].lstrip(".")
            )
            if folder in killed or proc.create_time() > time.time() - 2:  # let it get going first
                continue
            victim = proc.parent() if not killed else proc
            killed[folder] = "worker" if not killed else "cell"
            victim.send_signal(signal.SIGKILL)
            break
        time.sleep(0.2)
    stdout, stderr = sweep.communicate(timeout=TIMEOUT)
    assert sweep.returncode == 0, stderr[-3000:]
    assert sorted(killed.values()) == ["cell", "worker"], killed
    assert "2 done, 0 skipped (already done), 0 failed" in stdout
    for folder in (out / "cells").iterdir():
        assert not folder.name.startswith("."), f"a killed attempt's folder was left: {folder.name}"
        assert len(list(folder.rglob("results_*.json"))) == 1
        record = json.loads((folder / "cell.json").read_text())
        assert record["attempt"] == (2 if folder.name.split(".attempt")[0] in killed else 1), folder.name
    assert _results(next(f for f in (out / "cells").iterdir() if "vanilla" in f.name)) == _results(
        next(
            f
            for f in (grid / "out" / "cells").iterdir()
            if "vanilla" in f.name and spec["models"][0].split("/")[-1] in f.name
        )
    )


def test_a_cell_no_node_fits_is_refused_before_any_cell_runs(grid):
    before = set(_ray_processes())
    small = _start_cluster([{"num_cpus": 1, "memory": int(0.3 * GIB)}])
    try:
        refused = _lch(["sweep", "sweep.yaml", "--address", small.address, "--output", "refused"], grid)
    finally:
        small.shutdown()
    assert refused.returncode == 2
    (line,) = [line for line in refused.stderr.splitlines() if line.startswith("lch: error:")]
    assert line.startswith("lch: error: cell '") and "of memory (its plan's peak); the largest node (" in line
    assert "has 307 MiB" in line
    assert not (grid / "refused" / "cells").exists()
    deadline = time.time() + 30
    while set(_ray_processes()) - before and time.time() < deadline:
        time.sleep(0.5)
    assert not set(_ray_processes()) - before


def test_a_bad_cell_fails_with_its_one_line_and_the_others_complete(cluster, grid):
    made, _ = cluster
    spec = json.loads((grid / "sweep.yaml").read_text())
    spec["models"] = spec["models"][:1]
    spec["variants"] = {"vanilla": {"pic": "none"}, "bad": {"pic": "ntk", "pic_ratio": -1}}
    (grid / "bad.yaml").write_text(json.dumps(spec))
    done = _lch(["sweep", "bad.yaml", "--address", made.address, "--output", "bad"], grid)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "1 done, 0 skipped (already done), 1 failed" in done.stdout
    lines = done.stdout.splitlines()
    outcomes = lines[next(i for i, line in enumerate(lines) if line.split()[:2] == ["cell", "result"]) :]
    (row,) = [line for line in outcomes if line.split()[1:3] == ["bad", "failed"]]
    assert "lch: error:" in row and "pic_ratio" in row, row
    assert list(_cells(grid / "bad")) == [f"{Path(spec['models'][0]).name} vanilla"]


def test_a_dry_run_with_a_cell_its_plan_refuses_exits_2_with_its_line(grid, capsys):
    from harness.cli import main

    code = main(["sweep", "--models", str(grid / "no-such-model"), "--tasks", "ppl_govreport", "--dry-run",
                 "--output", str(grid / "dry")])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 2
    assert f"pretrained={grid / 'no-such-model'} does not exist" in out.splitlines()[-1]
    assert not (grid / "dry" / "cells").exists()


def test_without_ray_lch_sweep_says_how_to_install_it(grid, monkeypatch, capsys):
    from harness.cli import main

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails as where it is not installed
    monkeypatch.chdir(grid)
    assert main(["sweep", "sweep.yaml", "--output", str(grid / "no-ray")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "lch: error: lch sweep runs its cells on Ray, which is not installed: pip install "
        "'lch-harness[ray]' (or ray>=2.40)"
    ]
    assert not (grid / "no-ray").exists()


def test_a_run_time_failure_is_the_cells_outcome_and_leaves_no_folder(tmp_path):
    from harness.sweep.worker import run_cell_reporting

    folder = tmp_path / "cells" / "x-1"
    outcome = run_cell_reporting(
        ["--model", "hf-pic", "--model_args", f"pretrained={tmp_path / 'no-such-model'}", "--tasks", "ppl_govreport"],
        str(folder),
        {},
        {},
        1,
        str(tmp_path),
    )
    assert (outcome.status, outcome.exit_code) == ("failed", 2)
    assert outcome.line.startswith("lch: error:") and "no-such-model" in outcome.line
    assert not folder.exists() and not [p for p in (tmp_path / "cells").iterdir()]
    assert (tmp_path / "logs" / "x-1.log").read_text().startswith("=== attempt 1")


def test_a_checkpoint_series_gives_the_per_step_table_and_the_gate(cluster, grid):
    """Checkpoints 100 and 200 are the same weights, 300 is damaged: the gate of 300 against 200 fails (exit 1),
    of 200 against 100 passes (exit 0), and a named baseline gates as ``lch regress`` does."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    made, _ = cluster
    base = Path(json.loads((grid / "sweep.yaml").read_text())["models"][0])
    run = grid / "train"
    for step in (100, 200, 300):
        shutil.copytree(base, run / f"checkpoint-{step}")
    weights = load_file(run / "checkpoint-300" / "model.safetensors")
    generator = torch.Generator().manual_seed(0)
    save_file(
        {k: v + 0.5 * torch.randn(v.shape, generator=generator) if v.dim() == 2 else v for k, v in weights.items()},
        str(run / "checkpoint-300" / "model.safetensors"),
    )
    spec = json.loads((grid / "sweep.yaml").read_text())
    spec.update(models=["train/checkpoint-*"], variants={"vanilla": {"pic": "none"}}, tasks=["ppl_govreport"])
    spec.pop("lengths")
    (grid / "series.yaml").write_text(json.dumps(spec))
    gated = _lch(["sweep", "series.yaml", "--address", made.address, "--output", "series", "--gate", "previous"], grid)
    assert gated.returncode == 1, gated.stderr[-3000:]
    assert "gate, vanilla: step 300 against step 200: REGRESSION" in gated.stdout
    rows = list(csv.DictReader((grid / "series" / "by_step.csv").open()))
    cells = {c["step"]: c for c in _cells(grid / "series").values()}
    values = {
        step: _results(next(f for f in (grid / "series" / "cells").iterdir() if f"checkpoint-{step}" in f.name))[
            "ppl_govreport"
        ]["ppl,none"]
        for step in cells
    }
    assert [(int(r["step"]), float(r["ppl_govreport/ppl"])) for r in rows] == [(s, values[s]) for s in (100, 200, 300)]
    assert values[100] == values[200] < values[300]
    assert (grid / "series" / "by_step.png").stat().st_size > 0
    spec["models"] = ["train/checkpoint-[12]00"]
    (grid / "series_ok.yaml").write_text(json.dumps(spec))
    passed = _lch(
        ["sweep", "series_ok.yaml", "--address", made.address, "--output", "series", "--gate", "previous"], grid
    )
    assert passed.returncode == 0, passed.stdout[-3000:] + passed.stderr[-2000:]
    assert "0 done, 2 skipped" in passed.stdout and "step 200 against step 100: OK" in passed.stdout
    first = next(f for f in (grid / "series" / "cells").iterdir() if "checkpoint-100" in f.name)
    baseline = _lch(["regress", str(first), "--baseline", str(grid / "b100.json"), "--update-baseline"], grid)
    assert baseline.returncode == 0, baseline.stderr
    named = _lch(
        ["sweep", "series.yaml", "--address", made.address, "--output", "series", "--gate", str(grid / "b100.json")],
        grid,
    )
    assert named.returncode == 1 and f"step 300 against {grid / 'b100.json'}: REGRESSION" in named.stdout
