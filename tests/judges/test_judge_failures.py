"""A judge that fails: HTTP 500s, replies that are not chat completions, streams cut short or carrying an error, a
server that refuses a request, a server that never answers. Every request ends within its bound (attempts x timeout +
backoff; a silent server much sooner: test_judge_silence.py), the failures are counted per kind, no judged score is
computed from the samples a failing server happened to answer, and nothing is lost: the answers received are cached,
``lch judge`` writes no judgements file and the same command resumes, and a run of lm-eval writes its results with the
judged scores left out (their reason recorded) and keeps the generations, a silent judge's included."""

from __future__ import annotations

import json
import math
import re
import time

import openai  # noqa: F401 - imported before any timing, so that no measured call pays for it
import pytest

from harness.cli import main
from harness.judges.client import JudgeClient, JudgeSettings
from harness.judges.stage import judge, task_scores
from tests.conftest import SHARED_DATA
from tests.judge_servers import CannedJudge, MisbehavingJudge, SilentServer

DIMENSIONS = {
    "Relevance": 4,
    "Accuracy": 4,
    "Coherence": 4,
    "Clarity": 4,
    "Breadth and Depth": 4,
    "Reading Experience": 4,
}


JUDGE_PROMPT = SHARED_DATA / "longbench_write" / "judge.txt"  # the published prompt, loaded at run time
needs_prompt = pytest.mark.skipif(not JUDGE_PROMPT.is_file(), reason=f"needs {JUDGE_PROMPT}")


def _items(judge: dict, n: int = 3) -> list[dict]:
    return [
        {
            "kind": "longbench_write",
            "instruction": f"Write about rivers, part {i}.",
            "response": f"Rivers {i}.",
            "length_score": 80.0,
            "judge": judge,
            "prompt_path": str(JUDGE_PROMPT),
        }
        for i in range(n)
    ]


def _settings(url: str, tmp_path, **extra) -> dict:
    return {
        "base_url": url,
        "model": "m",
        "policy": "drop",
        "temperature": 0.5,
        "max_tokens": 16,
        "concurrency": 4,
        "cache_dir": str(tmp_path / "cache"),
        "timeout": 0.5,
        "max_attempts": 3,
        **extra,
    }


@pytest.mark.parametrize(
    "mode, kind, attempts",
    [
        ("500", "http_500", 3),
        ("400", "http_400", 1),
        ("malformed", "malformed", 3),
        ("no_choices", "malformed", 3),
        ("cut_stream", "malformed", 3),
        ("stream_error", "stream_error", 3),
        ("hang", "timeout", 2),
    ],
)
def test_every_failure_is_counted_by_kind_within_its_bound(mode, kind, attempts, tmp_path):
    """Retried kinds get ``max_attempts`` attempts, a 400 one; a hanging server costs attempts x timeout when the
    whole-reply timeout (0.5 s here) is shorter than the idle timeout (60 s by default)."""
    with MisbehavingJudge(mode, hang_s=5.0) as server:
        client = JudgeClient(
            JudgeSettings(
                base_url=server.base_url,
                model="m",
                max_attempts=attempts if mode == "hang" else 3,
                timeout=0.5,
                backoff=0.01,
                concurrency=2,
                cache_dir=str(tmp_path),
            )
        )
        start = time.perf_counter()
        answers = client.ask_many([[{"role": "user", "content": f"q{i}"}] for i in range(2)], progress=False)
        seconds = time.perf_counter() - start
    assert [a.text for a in answers] == [None, None] and [a.failure for a in answers] == [kind, kind]
    assert dict(client.stats["failures"]) == {kind: 2} and client.stats["failed"] == 2
    assert client.stats["requests_sent"] == 2 * attempts
    # a server that answers counts each attempt; a hanging one may not have read an attempt the client gave up on
    # within its 0.5 s (seen under a loaded suite), so only the client's count is exact there
    assert server.requests == 2 * attempts if mode != "hang" else 0 < server.requests <= 2 * attempts
    assert not list(tmp_path.rglob("*.json"))  # no answer, nothing cached: the next run asks again
    bound = 2 * 0.5 * attempts + 1.0 if mode == "hang" else 2.0  # concurrency 2: the two requests in parallel
    assert seconds < bound, seconds


@needs_prompt
def test_no_judged_score_from_a_judge_that_answered_some_requests(tmp_path):
    """Two of three requests answered (the third's server failed): the mean over the two is not the task's score."""
    with CannedJudge(dimensions=DIMENSIONS) as good, MisbehavingJudge("500") as bad:
        items = _items(_settings(good.base_url, tmp_path), 2)
        judged = judge(items)  # two answers cached
        assert judged.failures == {} and task_scores(items, judged)["quality"] == pytest.approx(75.0)
        items = _items(_settings(bad.base_url, tmp_path), 3)
        judged = judge(items)
    assert judged.failures == {"http_500": 1} and judged.n_valid == 2
    scores = task_scores(items, judged)
    assert math.isnan(scores["quality"]) and math.isnan(scores["score"]) and scores["n_valid"] == 2
    assert judged.absent_because() == f"the judge at {bad.base_url} answered 2 of 3 requests (http_500 x1)"
    assert judged.provenance["unanswered"] == {"http_500": 1} and judged.provenance["unparsed"] == 0


@needs_prompt
def test_lch_judge_writes_nothing_when_the_judge_fails_and_the_same_command_resumes(tmp_path, capsys):
    samples = tmp_path / "samples_longbench_write_2026.jsonl"
    with MisbehavingJudge("500") as bad:
        samples.write_text(
            "".join(
                json.dumps({"doc_id": i, "quality": item}) + "\n"
                for i, item in enumerate(_items(_settings(bad.base_url, tmp_path)))
            )
        )
        argv = [
            "judge",
            str(samples),
            "--judge-base-url",
            bad.base_url,
            "--judge-model",
            "m",
            "--judge-cache-dir",
            str(tmp_path / "cache"),
            "--judge-timeout",
            "0.5",
            "--judge-max-attempts",
            "2",
        ]
        assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        f"lch: error: {samples}: the judge at {bad.base_url} answered 0 of 3 requests (http_500 x3): no "
        "judgements written; the answers received are cached, so the same command asks only the others "
        "again"
    )
    assert not list(tmp_path.glob("judgements_*"))
    with CannedJudge(dimensions=DIMENSIONS) as good:
        argv[3] = good.base_url
        assert main(argv) == 0
        assert good.requests == 3
    summary = json.loads(capsys.readouterr().out)
    assert summary["quality"] == pytest.approx(75.0) and summary["n_valid"] == 3 and "absent" not in summary
    assert len(list(tmp_path.glob("judgements_*"))) == 1


class NothingListening:
    """A judge address on a free loopback port where nothing listens (a server not started, a wrong port)."""

    def __enter__(self):
        from tests.judge_servers import free_port

        self.base_url = f"http://127.0.0.1:{free_port()}/v1"
        return self

    def __exit__(self, *exc) -> None:
        return None


@needs_prompt
@pytest.mark.parametrize("mode", ["500", "malformed", "silent", "unreachable"])
def test_a_run_whose_judge_fails_keeps_its_generations_and_says_so(mode, tiny_model_dir, tmp_path, capsys, monkeypatch):
    """`lch eval` with a judge that fails every request: the results file is written without NaN (quality and score
    left out, with the reason under lch_absent), the command ends with one line and exit 2, and the generations kept
    as a samples file are judged afterwards by `lch judge` without generating again. A judge that accepts the
    connection and never answers (``silent``) is given up within its idle timeout; an address where nothing listens
    (``unreachable``) costs the run no more than a failing judge (before, the run ended without writing its results)."""
    from harness.judges import stage

    stage_seconds = []
    real_judge = stage.judge

    def timed_judge(items):
        start = time.perf_counter()
        try:
            return real_judge(items)
        finally:
            stage_seconds.append(time.perf_counter() - start)

    monkeypatch.setattr(stage, "judge", timed_judge)
    servers = {"silent": SilentServer, "unreachable": NothingListening}
    with servers[mode]() if mode in servers else MisbehavingJudge(mode) as bad:
        meta = {
            "longbench_write_data": str(SHARED_DATA / "longbench_write" / "longbench_write.jsonl"),
            "limit_docs": 2,
            "max_gen_toks": 8,
            "judge_base_url": bad.base_url,
            "judge_model": "m",
            "judge_prompt": str(SHARED_DATA / "longbench_write" / "judge.txt"),
            "judge_timeout": 1,
            "judge_idle_timeout": 1,
            "judge_max_attempts": 2,
            "judge_cache_dir": str(tmp_path / "judge-cache"),
        }
        code = main(
            [
                "eval",
                "--model",
                "hf-pic",
                "--model_args",
                f"pretrained={tiny_model_dir},dtype=float32",
                "--device",
                "cpu",
                "--tasks",
                "longbench_write",
                "--metadata",
                json.dumps(meta),
                "--output_path",
                str(tmp_path / "out"),
            ]
        )
    assert code == 2
    assert len(stage_seconds) == 1 and stage_seconds[0] < 4.0, stage_seconds  # judged once, within its bound
    err = capsys.readouterr().err.strip().splitlines()
    kind = {"500": "http_500", "malformed": "malformed", "silent": "silent", "unreachable": "unreachable"}[mode]
    assert err[-1].startswith(
        f"lch: error: longbench_write: quality, score not computed: the judge at {bad.base_url} "
        f"answered 0 of 2 requests ({kind} x2); the generations are kept in "
    )
    (results_file,) = (tmp_path / "out").rglob("results_*.json")
    constants = []  # NaN / Infinity / -Infinity values anywhere in the file
    results = json.loads(results_file.read_text(), parse_constant=lambda name: constants.append(name) or 0.0)
    assert constants == []
    lbw = results["results"]["longbench_write"]
    assert "quality,none" not in lbw and "score,none" not in lbw and lbw["n_valid,none"] == 0
    assert lbw["length,none"] >= 0  # what needs no judge is there
    assert set(results["lch_absent"]["longbench_write"]) == {"quality", "score"}
    assert results["configs"]["longbench_write"]["metadata"]["judge_provenance"]["unanswered"] == {kind: 2}
    (kept,) = (tmp_path / "judge-cache" / "unjudged").glob("samples_longbench_write_*.jsonl")
    assert str(kept) in err[-1]
    with CannedJudge(dimensions=DIMENSIONS) as good:
        assert main(["judge", str(kept), "--judge-base-url", good.base_url, "--judge-model", "m"]) == 0
    assert json.loads(capsys.readouterr().out)["quality"] == pytest.approx(75.0)


def test_an_interrupt_while_judging_keeps_the_generations(tmp_path, caplog):
    """Ctrl-C while a run's judged task is being judged still ends the run (the interrupt propagates), but the
    generations are first kept as a samples file that `lch judge` resumes from."""
    from types import SimpleNamespace

    from harness.tasks.longform import LongGenerationTask

    items = _items({"base_url": "http://127.0.0.1:9/v1", "model": "m", "cache_dir": str(tmp_path / "cache")})

    def interrupted(items):
        raise KeyboardInterrupt

    task = SimpleNamespace(config=SimpleNamespace(task="longbench_write"))
    with pytest.raises(KeyboardInterrupt):
        LongGenerationTask._judge_keeping_generations(task, items, interrupted)
    (kept,) = (tmp_path / "cache" / "unjudged").glob("samples_longbench_write_*.jsonl")
    assert [json.loads(line)["quality"] for line in kept.read_text().splitlines()] == items
    assert str(kept) in caplog.text


@pytest.mark.parametrize(
    "status, content_type, body, message",
    [
        (
            404,
            "text/html",
            b"<html>not here</html>",
            "is not OpenAI-compatible (GET /models answered HTTP 404): start an ",
        ),
        (
            401,
            "application/json",
            b'{"error": "bad key"}',
            "refused the API key (HTTP 401): set LCH_JUDGE_API_KEY or OPENAI_API_KEY",
        ),
        (200, "text/html", b"<html>a web page</html>", "is not OpenAI-compatible (GET /models did not answer JSON): "),
        (200, "application/json", b"[1, 2]", "is not OpenAI-compatible (GET /models has no model list): "),
        (200, "application/json", b'{"object": "list"}', "is not OpenAI-compatible (GET /models has no model list): "),
    ],
)
def test_a_server_that_is_no_judge_is_refused_in_one_line_naming_it(status, content_type, body, message, tmp_path):
    """The model-list check before the first request: what answers at the judge URL is named, with what to do."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from harness.judges.client import JudgeUnreachable

    class Reply(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Reply)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        with pytest.raises(JudgeUnreachable) as refused:
            JudgeClient(JudgeSettings(base_url=url, model="m", cache_dir=str(tmp_path))).ask_many([[]], progress=False)
    finally:
        server.shutdown()
    assert str(refused.value).startswith(f"the judge server at {url} {message}")
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("url", ["not a url", "localhost", "http://[::1/v1"])
def test_a_judge_url_that_is_no_url_is_refused_in_one_line(url, tmp_path):
    """What httpx says of the URL, in brackets; never a traceback."""
    from harness.judges.client import JudgeUnreachable

    with pytest.raises(JudgeUnreachable) as refused:
        JudgeClient(JudgeSettings(base_url=url, model="m", cache_dir=str(tmp_path))).ask_many([[]], progress=False)
    assert re.fullmatch(
        rf"no judge server answers at {re.escape(url)} \([^\n]+\): (start an .* or )?fix the judge "
        r"base URL \(it ends in /v1\)",
        str(refused.value),
    ), str(refused.value)
