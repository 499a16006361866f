"""Judges: parsers, prompts, and the async client against a real local server, with and without faults."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.judges.client import JudgeCache, JudgeClient, JudgeSettings
from harness.judges.parsing import parse_longbench_write_judgement
from harness.judges.prompts import helloeval_messages, load_longbench_write_prompt, longbench_write_messages
from harness.data.documents import MissingDataError
from tests.conftest import SHARED_DATA
from tests.judge_servers import FaultyProxy, ServedModel, judge_model

DIMS = {"Relevance": 4, "Accuracy": 3, "Coherence": 5, "Clarity": 4, "Breadth and Depth": 2, "Reading Experience": 3}


def test_longbench_write_parser():
    official = "Here is my evaluation:\n" + json.dumps(DIMS) + "\nDone."
    assert parse_longbench_write_judgement(official) == {k: float(v) for k, v in DIMS.items()}
    nested_text = "```json\n{'Relevance': 4, 'Accuracy': 3, 'Coherence': 5, 'Clarity': 4, " \
                  "'Breadth and Depth': 2, 'Reading Experience': 3}\n```"
    assert parse_longbench_write_judgement(nested_text)["Coherence"] == 5.0
    prose = "Relevance: 4\nAccuracy - 3\nCoherence: 5\nClarity: 4\nBreadth and Depth: 2\nReading Experience: 3"
    assert parse_longbench_write_judgement(prose)["Accuracy"] == 3.0
    assert parse_longbench_write_judgement(json.dumps({**DIMS, "Clarity": 7})) is None
    assert parse_longbench_write_judgement("I cannot grade this.") is None


@pytest.mark.skipif(not (SHARED_DATA / "longbench_write").exists(), reason="../shared/data not present")
def test_longbench_write_prompt_loaded_from_path():
    template = load_longbench_write_prompt(str(SHARED_DATA / "longbench_write" / "judge.txt"))
    messages = longbench_write_messages(template, "Write 100 words.", "Some words.")
    assert "Write 100 words." in messages[0]["content"] and "$INST$" not in messages[0]["content"]
    with pytest.raises(MissingDataError, match="not found"):
        load_longbench_write_prompt("/nonexistent/judge.txt")
    hello = helloeval_messages("Write an essay.", "An essay.", ["Is it good?", "Is it long?"])
    assert '"checklist_id": 1' in hello[1]["content"] and "2 items" in hello[1]["content"]


def test_settings_need_server_and_model(monkeypatch):
    monkeypatch.delenv("LCH_JUDGE_BASE_URL", raising=False)
    monkeypatch.delenv("LCH_JUDGE_MODEL", raising=False)
    with pytest.raises(ValueError, match="judge_base_url"):
        JudgeClient(JudgeSettings())


@pytest.fixture(scope="module")
def served(tiny_model_dir, tmp_path_factory):
    model = judge_model(tiny_model_dir, tmp_path_factory.mktemp("judge") / "model")
    with ServedModel(model) as server:
        yield server


def _conversations(n):
    return [[{"role": "user", "content": f"Grade answer number {i}."}] for i in range(n)]


def test_real_server_answers_and_cache_resumes(served, tmp_path):
    settings = JudgeSettings(base_url=served.base_url, model=served.model, max_tokens=8, concurrency=3,
                             cache_dir=str(tmp_path))
    client = JudgeClient(settings)
    answers = client.ask_many(_conversations(6), progress=False)
    assert all(a.text and not a.cached for a in answers) and client.stats["requests_sent"] == 6
    assert answers[0].model  # the server's model name is recorded
    again = JudgeClient(settings)
    repeat = again.ask_many(_conversations(6), progress=False)
    assert again.stats["requests_sent"] == 0 and all(a.cached for a in repeat)
    assert [a.text for a in repeat] == [a.text for a in answers]


JUDGE_SCRIPT = """
import json, sys
from harness.judges.client import JudgeClient, JudgeSettings
base_url, model, cache, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
client = JudgeClient(JudgeSettings(base_url=base_url, model=model, max_tokens=8, concurrency=4,
                                   cache_dir=cache, backoff=0.05, max_attempts=20))
conversations = [[{"role": "user", "content": f"Grade answer number {i}."}] for i in range(n)]
answers = client.ask_many(conversations, progress=False)
print(json.dumps({"ok": sum(a.text is not None for a in answers), **client.stats}))
"""


def test_faults_and_a_killed_run_lose_nothing(served, tmp_path):
    """429s, 500s and dropped connections, and a run killed halfway: every request ends answered, and
    nothing answered before the kill is asked again."""
    n = 24
    cache = tmp_path / "cache"
    with FaultyProxy(int(served.base_url.split(":")[2].split("/")[0])) as proxy:
        args = [sys.executable, "-c", JUDGE_SCRIPT, proxy.base_url, served.model, str(cache), str(n)]
        first = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        deadline = time.time() + 120
        while len(list(cache.glob("*/*.json"))) < n // 3 and time.time() < deadline:
            time.sleep(0.05)
        first.kill()
        first.wait()
        answered_before = {p.stem for p in cache.glob("*/*.json")}
        assert 0 < len(answered_before) < n
        done = subprocess.run(args, capture_output=True, text=True, timeout=300)
        report = json.loads(done.stdout.strip().splitlines()[-1])
        assert report["ok"] == n and report["cache_hits"] >= len(answered_before)
        assert report["retries"] > 0  # the faults really happened
        assert len(list(cache.glob("*/*.json"))) == n
        # every request ends answered; those answered before the kill were never requested again
        from harness.judges.client import request_body, request_key

        settings = JudgeSettings(base_url=proxy.base_url, model=served.model, max_tokens=8).resolved()
        keys = [request_key(request_body(settings, c)) for c in
                [[{"role": "user", "content": f"Grade answer number {i}."}] for i in range(n)]]
        assert all(JudgeCache(cache).get(k)["text"] is not None for k in keys)
        assert set(proxy.forwarded) == set(keys)
        assert all(proxy.forwarded[k] == 1 for k in answered_before)
        # at most the requests in flight at the kill (concurrency 4) were answered twice
        assert sum(proxy.forwarded.values()) - n <= 4
