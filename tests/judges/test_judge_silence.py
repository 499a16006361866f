"""Silence, not slowness: a judge server that accepts the connection and never answers is given up about one idle
timeout after it went silent, whatever the number of requests and attempts (the failure kind ``silent``, and a dead
server is asked nothing more), while a judge that streams its answer slowly but steadily, for longer in total than the
idle timeout, completes. A server that does not stream is answered from its plain completion, and streaming (transport)
leaves the cache key alone."""

from __future__ import annotations

import math
import time
from collections import Counter

import openai  # noqa: F401 - imported before any timing, so that no measured call pays for it
import pytest

from harness.judges.client import JudgeCache, JudgeClient, JudgeSettings, request_body, request_key
from harness.judges.stage import judge
from tests.judge_servers import CannedJudge, MisbehavingJudge, SilentServer, request_content

IDLE = 1.0  # the tests' idle timeout; the whole-reply timeout and the attempts are left large on purpose
REPLY = "Evaluation: the essay keeps to its subject, flows well and reads easily. " * 4


def _client(url: str, tmp_path, **extra) -> JudgeClient:
    settings = {
        "base_url": url,
        "model": "m",
        "idle_timeout": IDLE,
        "timeout": 60.0,
        "max_attempts": 4,
        "backoff": 0.01,
        "concurrency": 2,
        "cache_dir": str(tmp_path / "cache"),
        **extra,
    }
    return JudgeClient(JudgeSettings(**settings))


def _conversations(n: int) -> list[list[dict]]:
    return [[{"role": "user", "content": f"q{i}"}] for i in range(n)]


def _timed(client: JudgeClient, n: int):
    start = time.perf_counter()
    answers = client.ask_many(_conversations(n), progress=False)
    return answers, time.perf_counter() - start


@pytest.mark.parametrize(
    "server, sent",
    [(SilentServer, 0), (lambda: MisbehavingJudge("hang", hang_s=120), 2)],
    ids=["silent-everywhere", "silent-chat"],
)
def test_a_server_that_never_answers_is_given_up_within_the_idle_timeout(server, sent, tmp_path):
    """6 requests, 4 attempts each, 60 s per attempt: the old bound was 6 / 2 x 4 x 60 s. Silent everywhere (its model
    list too): nothing is sent. A model list that answers and a chat endpoint that does not: the first two requests
    (concurrency 2) wait one idle timeout, the server is then known dead and the four others fail unsent."""
    with server() as silent:
        client = _client(silent.base_url, tmp_path)
        answers, seconds = _timed(client, 6)
    print(f"dead server ({silent.__class__.__name__}): {seconds:.2f} s")
    assert [a.failure for a in answers] == ["silent"] * 6 and all(a.text is None for a in answers)
    assert client.server_silent and dict(client.stats["failures"]) == {"silent": 6}
    assert client.stats["requests_sent"] == sent and client.stats["retries"] == 0
    assert getattr(silent, "accepted", 1) == 1  # silent everywhere: the model-list probe was its only connection
    assert "nothing came from the server for 1 s" in answers[-1].error
    assert not list(tmp_path.rglob("*.json"))  # nothing cached: the next run asks again
    assert IDLE * 0.9 <= seconds < IDLE + 2.0, seconds


def test_a_slow_but_steady_stream_completes(tmp_path):
    """A chunk every 0.5 s for 5.5 s in all, with a 2 s idle timeout (four gaps of margin: a loaded machine stalls
    the server thread now and then): the full answer, at the first attempt."""
    with CannedJudge(grade=lambda prompt, body: REPLY, parts=12, chunk_delay=0.5) as slow:
        client = _client(slow.base_url, tmp_path, idle_timeout=2.0)
        answers, seconds = _timed(client, 2)
    print(f"slow server: {seconds:.2f} s")
    assert [a.text for a in answers] == [REPLY, REPLY] and seconds >= 5.5
    assert answers[0].finish_reason == "stop" and answers[0].model == "canned-judge"
    assert answers[0].fingerprint == CannedJudge.FINGERPRINT  # sent on the last chunk only, as vLLM does
    assert client.stats["requests_sent"] == 2 and client.stats["retries"] == 0 and not client.server_silent


def test_a_server_that_does_not_stream_is_answered_from_its_completion(tmp_path):
    """A plain JSON completion in reply to ``stream=True``; the cache key is the request without ``stream``."""
    with CannedJudge(grade=lambda prompt, body: REPLY, streams=False) as plain:
        client = _client(plain.base_url, tmp_path)
        answers, _ = _timed(client, 2)
        sent = plain.bodies
    assert [a.text for a in answers] == [REPLY, REPLY] and answers[0].fingerprint == CannedJudge.FINGERPRINT
    assert all(body["stream"] is True for body in sent)
    keys = {request_key(request_body(client.settings, c)) for c in _conversations(2)}
    assert {request_key(request_content(body)) for body in sent} == keys  # streaming is not part of the key
    assert all(JudgeCache(tmp_path / "cache").get(k)["text"] == REPLY for k in keys)


def test_a_request_silent_on_a_live_server_is_retried(tmp_path):
    """One request gets no byte at its first attempt while the other streams (a chunk every 0.3 s): the server is
    alive, so the silent request is retried (and answered) instead of the server being given up."""
    seen: Counter = Counter()

    def first_attempt_of_q0(prompt: str, body: dict) -> bool:
        seen[prompt] += 1
        return prompt == "q0" and seen[prompt] == 1

    with CannedJudge(grade=lambda prompt, body: REPLY, parts=10, chunk_delay=0.3, silent=first_attempt_of_q0) as judge_:
        client = _client(judge_.base_url, tmp_path)
        answers, seconds = _timed(client, 2)
    assert [a.text for a in answers] == [REPLY, REPLY] and not client.server_silent
    assert client.stats["requests_sent"] == 3 and client.stats["retries"] == 1 and seconds < 10


JUDGE = {
    "model": "m",
    "policy": "rejudge",
    "temperature": 0.5,
    "max_tokens": 16,
    "concurrency": 2,
    "timeout": 60.0,
    "max_attempts": 4,
    "idle_timeout": IDLE,
}


@pytest.mark.parametrize(
    "server", [SilentServer, lambda: MisbehavingJudge("hang", hang_s=120)], ids=["silent-everywhere", "silent-chat"]
)
def test_the_stage_ends_with_the_judged_metric_absent_in_bounded_time(server, tmp_path):
    """The judge stage (policy rejudge: up to three passes) over 5 items with a never-answering server: one idle
    timeout, no rejudge pass, every request counted as silent and no judged score."""
    from harness.judges.stage import task_scores

    with server() as silent:
        items = [
            {
                "kind": "hellobench",
                "instruction": f"Write about rivers, part {i}.",
                "response": f"Rivers {i}.",
                "checklists": ["Is it about rivers?"],
                "category": "open_ended_qa",
                "weights_file": "unread.txt",
                "judge": {**JUDGE, "base_url": silent.base_url, "cache_dir": str(tmp_path / "cache")},
            }
            for i in range(5)
        ]
        start = time.perf_counter()
        judged = judge(items)
        seconds = time.perf_counter() - start
    print(f"stage with a dead server: {seconds:.2f} s")
    assert judged.failures == {"silent": 5} and judged.provenance["unanswered"] == {"silent": 5}
    assert judged.absent_because() == f"the judge at {silent.base_url} answered 0 of 5 requests (silent x5)"
    assert math.isnan(task_scores(items, judged)["quality"])  # the judged metric does not exist: left out
    assert seconds < IDLE + 2.0, seconds
