"""Interrupted `lch` commands (SIGINT and SIGTERM alike): exit 130, one line saying what was kept and how to
resume, no traceback. Real subprocesses: `lch judge` against a server that accepts and never answers."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cli import interrupted_hint

BIN = Path(sys.executable).parent


def _spawn(command: list[str]) -> subprocess.Popen:
    """Start an `lch` command as a terminal would: Ctrl-C (SIGINT) at its default disposition. A process inherits
    an ignored SIGINT across exec, and Python then installs no KeyboardInterrupt handler, so a test worker whose
    SIGINT some library set to ignored would start children that cannot be interrupted at all."""
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


@pytest.fixture()
def silent_server():
    """A socket that accepts connections and never answers; yields its URL and the socket."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    yield f"http://127.0.0.1:{server.getsockname()[1]}/v1", server
    server.close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_judge_exits_130_with_one_line(sig, silent_server, tmp_path):
    item = {
        "instruction": "Write an essay.",
        "response": "An essay.",
        "checklists": ["Is it an essay?"],
        "category": "argumentative_writing",
        "weights_file": "w.txt",
        "rescale": False,
        "judge": None,
    }
    samples = tmp_path / "samples_hellobench_htg_1.jsonl"
    samples.write_text(json.dumps({"doc_id": 0, "quality": item}) + "\n")
    url, server = silent_server
    proc = _spawn(
        [
            str(BIN / "lch"),
            "judge",
            str(samples),
            "--judge-base-url",
            url,
            "--judge-model",
            "m",
            "--judge-cache-dir",
            str(tmp_path / "cache"),
        ]
    )
    server.settimeout(120)
    connection, _ = server.accept()  # past the imports: the judge now waits on the server (its check: 30 s)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    connection.close()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-1] == (
        "lch: error: interrupted; the judge answers received so far are cached: run the same command to resume"
    )
    assert sum(line.startswith("lch: error:") for line in lines) == 1


def test_each_command_says_what_it_kept():
    assert "--use_cache response cache" in interrupted_hint(["eval", "--use_cache", "c", "--tasks", "x"])
    assert "nothing was kept" in interrupted_hint(["eval", "--tasks", "x"])
    assert "--resume" in interrupted_hint(["train", "pic-sft", "--output", "o"])
    assert interrupted_hint(["models", "fetch", "smollm2-135m"]) == "nothing was kept: run it again"


def test_sigterm_handler_is_restored():
    from harness.cli import main

    before = signal.getsignal(signal.SIGTERM)
    main(["tasks-path"])
    assert signal.getsignal(signal.SIGTERM) is before


def test_interrupted_eval_keeps_its_response_cache_and_resumes(tiny_model_dir, tmp_path):
    """`lch eval --use_cache` stopped by SIGINT while it scores: exit 130 and the one line; the response
    cache it kept answers the same command run again, which then finishes (exit 0) with results."""
    from harness.data.synthetic import synthetic_reports

    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"report": t}) + "\n" for t in synthetic_reports(300, 1500, seed=3)))
    meta = {"data_files": str(docs), "min_tokens": 100, "max_tokens": 2000, "num_docs": 300}
    command = [
        str(BIN / "lch"),
        "eval",
        "--model",
        "hf-pic",
        "--model_args",
        f"pretrained={tiny_model_dir},pic=dynamic,pic_ratio=2,pic_impl=reference,dtype=float32",
        "--device",
        "cpu",
        "--batch_size",
        "1",
        "--tasks",
        "ppl_govreport",
        "--metadata",
        json.dumps(meta),
        "--use_cache",
        str(tmp_path / "cache"),
        "--output_path",
        str(tmp_path / "out"),
    ]
    proc = _spawn(command)
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None and not list(tmp_path.glob("cache*")):
        time.sleep(0.5)  # until the response cache exists: it is scoring (300 documents: several seconds)
    time.sleep(1)
    assert proc.poll() is None, proc.communicate()[1][-2000:]
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-1] == (
        "lch: error: interrupted; responses computed so far are kept in the --use_cache response "
        "cache: run the same command to resume"
    )
    assert not list((tmp_path / "out").rglob("results_*.json"))  # no results from a stopped run
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(list((tmp_path / "out").rglob("results_*.json"))) == 1
