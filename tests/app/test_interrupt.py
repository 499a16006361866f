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


@pytest.fixture()
def silent_server():
    """A socket that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    yield f"http://127.0.0.1:{server.getsockname()[1]}/v1"
    server.close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_judge_exits_130_with_one_line(sig, silent_server, tmp_path):
    item = {"instruction": "Write an essay.", "response": "An essay.", "checklists": ["Is it an essay?"],
            "category": "argumentative_writing", "weights_file": "w.txt", "rescale": False, "judge": None}
    samples = tmp_path / "samples_hellobench_htg_1.jsonl"
    samples.write_text(json.dumps({"doc_id": 0, "quality": item}) + "\n")
    proc = subprocess.Popen([str(BIN / "lch"), "judge", str(samples), "--judge-base-url", silent_server,
                             "--judge-model", "m", "--judge-cache-dir", str(tmp_path / "cache")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(8)  # imports, then waiting on the server
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-1] == ("lch: error: interrupted; the judge answers received so far are cached: run the same "
                         "command to resume")
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
