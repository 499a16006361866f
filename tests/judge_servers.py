"""Local OpenAI-compatible judge servers for the tests: `transformers serve` with a tiny model, a fault-injecting
proxy in front of it, canned judges (streaming or not, fast or slow), failing ones and a silent one. Loopback only;
every loop is bounded."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def judge_model(source: Path, target: Path) -> Path:
    """A copy of a tiny model with a chat template, as `transformers serve` needs one."""
    from transformers import AutoTokenizer

    shutil.copytree(source, target)
    tok = AutoTokenizer.from_pretrained(target)
    tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(target)
    return target


class _ServerProcess:
    """An OpenAI-compatible server process on a free loopback port, healthy on entry, stopped on exit."""

    name = "server"

    def __init__(self, model: Path, start_timeout: float):
        self.model, self.port, self.start_timeout = str(model), free_port(), start_timeout
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.proc: subprocess.Popen | None = None

    def command(self) -> tuple[list[str], dict]:  # pragma: no cover - defined by subclasses
        raise NotImplementedError

    def __enter__(self):
        cmd, env = self.command()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.time() + self.start_timeout
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2)
                return self
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"{self.name} exited during start-up: {self.proc.stderr.read()[-2000:]}"
                    ) from None
                time.sleep(0.5)
        self.__exit__()
        raise RuntimeError(f"{self.name} did not become healthy within {self.start_timeout:.0f} s")

    def __exit__(self, *exc) -> None:
        if self.proc:
            self.proc.terminate()
            self.proc.wait(timeout=60)


class ServedModel(_ServerProcess):
    """`transformers serve <model>` (this environment's transformers)."""

    name = "transformers serve"

    def __init__(self, model: Path):
        super().__init__(model, start_timeout=120)

    def command(self) -> tuple[list[str], dict]:
        exe = Path(sys.executable).parent / "transformers"
        return (
            [str(exe), "serve", self.model, "--host", "127.0.0.1", "--port", str(self.port), "--device", "cpu"],
            {**os.environ, "HF_HUB_OFFLINE": "1"},
        )


class VllmServer(_ServerProcess):
    """vLLM's OpenAI-compatible server (``python -m vllm.entrypoints.openai.api_server``, fp32, eager) run by a
    vLLM environment (:class:`harness.engines.vllm_pic.env.VllmEnv`)."""

    name = "vLLM server"

    def __init__(self, env, model: Path, max_model_len: int = 4096, start_timeout: float = 300):
        super().__init__(model, start_timeout)
        self.env, self.max_model_len = env, max_model_len

    def command(self) -> tuple[list[str], dict]:
        return (
            [
                str(self.env.python),
                "-m",
                "vllm.entrypoints.openai.api_server",
                "--model",
                self.model,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--dtype",
                "float32",
                "--max-model-len",
                str(self.max_model_len),
                "--enforce-eager",
            ],
            {**self.env.environ(), "VLLM_CPU_KVCACHE_SPACE": "1"},
        )


class _LoopbackApp:
    """An aiohttp app on a free loopback port, served from its own thread."""

    route = "/{tail:.*}"

    def __init__(self):
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._closing = asyncio.Event()

    async def _hang(self, seconds: float) -> None:
        """Answer nothing for ``seconds``, or until the server stops (so that stopping it waits for no handler)."""
        try:
            await asyncio.wait_for(self._closing.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    async def _models(self, request):
        """The OpenAI model list the judge client checks for before its first request."""
        from aiohttp import web

        return web.json_response({"object": "list", "data": [{"id": "test-judge", "object": "model"}]})

    async def _handle(self, request):  # pragma: no cover - defined by subclasses
        raise NotImplementedError

    async def _start(self):
        from aiohttp import web

        app = web.Application()
        app.router.add_route("POST", self.route, self._handle)
        app.router.add_route("GET", "/v1/models", self._models)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    def __enter__(self):
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=30)
        return self

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._closing.set)
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)


class FaultyProxy(_LoopbackApp):
    """HTTP proxy that answers some requests with 429 or 500, drops some connections, forwards the rest.

    The fate of the k-th request is fixed by k (``pattern``), so runs are reproducible. ``forwarded``
    counts upstream answers per request, keyed like the judge cache.
    """

    def __init__(self, upstream_port: int, pattern: str = "f4f5fdff"):
        super().__init__()
        self.upstream = f"http://127.0.0.1:{upstream_port}"
        self.pattern = pattern
        self.forwarded: Counter = Counter()
        self.seen = 0

    async def _handle(self, request):
        from aiohttp import ClientSession, web

        body = await request.read()
        fate = self.pattern[self.seen % len(self.pattern)]
        self.seen += 1
        if fate == "4":
            return web.Response(status=429, text='{"error": "slow down"}', content_type="application/json")
        if fate == "5":
            return web.Response(status=500, text='{"error": "boom"}', content_type="application/json")
        if fate == "d":
            request.transport.close()  # a dropped connection
            return web.Response(status=500)
        async with ClientSession() as session:
            async with session.post(
                self.upstream + request.path, data=body, headers={"Content-Type": "application/json"}
            ) as upstream:
                payload = await upstream.read()
                status = upstream.status
                content_type = upstream.content_type  # text/event-stream for a streamed reply
        if status == 200:
            from harness.judges.client import request_key

            self.forwarded[request_key(request_content(json.loads(body)))] += 1
        return web.Response(status=status, body=payload, content_type=content_type)


def request_content(sent: dict) -> dict:
    """A request as sent, without its transport fields (``stream``): what the judge cache keys."""
    return {k: v for k, v in sent.items() if k not in ("stream", "stream_options")}


def longbench_write_reply(dimensions: dict) -> str:
    """A LongBench-Write judge reply the official parser reads: the six 1-5 scores as a JSON object."""
    return "Evaluation: " + json.dumps(dimensions)


def checklist_reply(scores) -> str:
    """A HelloEval judge reply: one ``{checklist_id, reason, evaluation_score}`` object per checklist item."""
    return json.dumps([{"checklist_id": i, "reason": "ok", "evaluation_score": s} for i, s in enumerate(scores)])


UNPARSABLE = "I cannot grade this response."  # neither judge parser finds grades in it


class CannedJudge(_LoopbackApp):
    """A minimal OpenAI-compatible chat server with known grades.

    By default every request gets the same valid grades: a checklist list of ``checklist_score`` per item
    for HelloEval prompts, ``dimensions`` for LongBench-Write ones. ``grade(prompt, body)`` (optional)
    gives per-request replies: ``prompt`` is the text of the last message (instruction and response are
    in it, so a marker in the response picks the grades), ``body`` the whole request (``body.get("seed")``
    tells a re-judging pass); it returns the reply text, or None for the default reply.
    ``requests`` counts the requests; ``bodies`` keeps them in arrival order, ``authorizations`` their
    ``Authorization`` headers.

    A request that asks to stream gets its reply as server-sent events, as vLLM sends them: the reply cut into
    ``parts`` content chunks, ``chunk_delay`` seconds apart, then one with the finish reason (and
    ``system_fingerprint``) and ``[DONE]``; ``streams=False`` answers it with one plain JSON completion instead (a
    server that does not stream). ``silent(prompt, body)`` (optional): True for a request that gets no byte at all
    until the server stops."""

    route = "/v1/chat/completions"
    FINGERPRINT = "canned-fp"

    def __init__(
        self,
        checklist_score: float = 0.5,
        dimensions: dict | None = None,
        grade=None,
        streams: bool = True,
        parts: int = 3,
        chunk_delay: float = 0.0,
        silent=None,
    ):
        super().__init__()
        self.checklist_score, self.dimensions, self.grade = checklist_score, dimensions, grade
        self.streams, self.parts, self.chunk_delay, self.silent = streams, parts, chunk_delay, silent
        self.requests = 0
        self.bodies: list[dict] = []
        self.authorizations: list[str | None] = []

    def default_reply(self, prompt: str) -> str:
        import re

        match = re.search(r"CHECKLIST \((\d+) items\)", prompt)
        if match:
            return checklist_reply([self.checklist_score] * int(match.group(1)))
        if self.dimensions is None:
            raise ValueError("CannedJudge got a LongBench-Write prompt but has no dimensions to answer with")
        return longbench_write_reply(self.dimensions)

    async def _handle(self, request):
        from aiohttp import web

        body = await request.json()
        self.requests += 1
        self.bodies.append(body)
        self.authorizations.append(request.headers.get("Authorization"))
        prompt = body["messages"][-1]["content"]
        if self.silent is not None and self.silent(prompt, body):
            await self._hang(3600)
            return web.Response(status=503)
        reply = self.grade(prompt, body) if self.grade is not None else None
        if reply is None:
            reply = self.default_reply(prompt)
        usage = canned_usage(prompt, reply)
        if not (body.get("stream") and self.streams):
            return web.json_response(
                {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 0,
                    "model": "canned-judge",
                    "system_fingerprint": self.FINGERPRINT,
                    "usage": usage,
                    "choices": [
                        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": reply}}
                    ],
                }
            )
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        size = -(-len(reply) // self.parts) or 1
        pieces = [reply[i : i + size] for i in range(0, len(reply), size)]
        for i, piece in enumerate(pieces):
            if i and self.chunk_delay:
                await asyncio.sleep(self.chunk_delay)
            await response.write(
                _sse(
                    {
                        "delta": {"role": "assistant", "content": piece} if i == 0 else {"content": piece},
                        "finish_reason": None,
                    }
                )
            )
        await response.write(_sse({"delta": {}, "finish_reason": "stop"}, fingerprint=self.FINGERPRINT))
        if (body.get("stream_options") or {}).get("include_usage"):  # OpenAI's last chunk: no choices, the usage
            chunk = {
                "id": "x",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "canned-judge",
                "choices": [],
                "usage": usage,
            }
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def canned_usage(prompt: str, reply: str) -> dict:
    """The usage a canned judge reports for one request: its prompt's and reply's words as tokens."""
    prompt_tokens, completion_tokens = len(prompt.split()), len(reply.split())
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _sse(choice: dict, fingerprint: str | None = None) -> bytes:
    """One chat completion chunk as a server-sent event."""
    chunk = {
        "id": "x",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "canned-judge",
        "choices": [{"index": 0, **choice}],
        **({"system_fingerprint": fingerprint} if fingerprint else {}),
    }
    return f"data: {json.dumps(chunk)}\n\n".encode()


class MisbehavingJudge(_LoopbackApp):
    """An OpenAI-compatible address whose chat endpoint fails every request in one way (``mode``): ``500`` (HTTP
    500), ``400`` (HTTP 400: a request the server refuses, not retried), ``malformed`` (HTTP 200 with a body that is
    not JSON), ``no_choices`` (a JSON object that is not a chat completion), ``cut_stream`` (a stream that ends
    after one content chunk, before its finish reason), ``stream_error`` (a stream whose event is an error, as vLLM
    sends one), ``hang`` (no answer for ``hang_s`` seconds, or until the server stops). Its model list answers, as a
    real server's would. ``requests`` counts the attempts."""

    route = "/v1/chat/completions"

    def __init__(self, mode: str, hang_s: float = 30.0):
        super().__init__()
        self.mode, self.hang_s = mode, hang_s
        self.requests = 0

    async def _handle(self, request):
        from aiohttp import web

        await request.read()
        self.requests += 1
        if self.mode in ("500", "400"):
            return web.Response(status=int(self.mode), text='{"error": "no"}', content_type="application/json")
        if self.mode == "malformed":
            return web.Response(status=200, text='{"choices": [{"message": ', content_type="application/json")
        if self.mode == "no_choices":
            return web.json_response({"id": "x", "object": "error"})
        if self.mode in ("cut_stream", "stream_error"):
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            if self.mode == "cut_stream":
                await response.write(
                    _sse({"delta": {"role": "assistant", "content": "Evaluation: {"}, "finish_reason": None})
                )
            else:
                await response.write(b'data: {"error": {"message": "engine died", "code": 500}}\n\n')
            await response.write_eof()
            return response
        await self._hang(self.hang_s)
        return web.json_response({"error": "too late"})


class SilentServer:
    """A server that accepts every connection and never sends a byte, its model list included: a hung judge.
    ``accepted`` counts the connections it took. A bare listening socket, deliberately: an HTTP server framework
    reads the request and answers something, which is what this server must not do."""

    def __init__(self):
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=64)
        self._listener.settimeout(0.05)  # so that the accepting thread sees the stop flag
        self.port = self._listener.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def accepted(self) -> int:
        return len(self._held)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                self._held.append(self._listener.accept()[0])
            except (TimeoutError, OSError):
                continue

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._listener.close()
        for conn in self._held:
            conn.close()
