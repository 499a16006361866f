"""Async judge client for OpenAI-compatible chat servers. Replies are streamed: an attempt fails as ``silent`` after
``idle_timeout`` s without a byte, as ``timeout`` past ``timeout`` s for the whole reply; ``max_attempts`` per request
with exponential backoff (4xx other than 408 / 409 / 429 not retried; silence only while the server is heard on other
requests). A server silent on every request is dead (:attr:`JudgeClient.server_silent`): the rest fail at once, unsent.
Failures are never raised (an answer carries its :func:`failure_kind`); answers are cached as they arrive, keyed by the
SHA-256 of :func:`request_body`."""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import json
import math
import os
import random
import time
from collections import Counter
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

from tqdm import tqdm

from harness.core.cache import cache_root
from harness.core.costs import record_judge
from harness.core.errors import UsageError
from harness.core.files import read_json_or_none, write_json_atomic


def default_cache_dir() -> Path:
    return cache_root("judge")


@dataclass
class JudgeSettings:
    """Where and how to ask. ``None`` fields fall back to the environment."""

    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    temperature: float = 0.0
    max_tokens: int = 1024
    concurrency: int = 8
    max_attempts: int = 4  # attempts per request (the first included)
    timeout: float = 600.0  # seconds one attempt may take, the whole reply included
    idle_timeout: float = 60.0  # seconds of silence (no byte from the server) that fail an attempt as silent
    backoff: float = 1.0  # seconds before the first retry; doubles, with jitter
    cache_dir: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # more request fields (seed, top_p ...)

    def resolved(self) -> JudgeSettings:
        base_url = self.base_url or os.environ.get("LCH_JUDGE_BASE_URL")
        model = self.model or os.environ.get("LCH_JUDGE_MODEL")
        if not base_url or not model:
            raise UsageError(
                "judge needs base_url and model (task metadata judge_base_url / judge_model, "
                "or LCH_JUDGE_BASE_URL / LCH_JUDGE_MODEL)"
            )
        api_key = self.api_key or os.environ.get("LCH_JUDGE_API_KEY") or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        return replace(self, base_url=base_url, model=model, api_key=api_key, extra=dict(self.extra))


@dataclass
class JudgeAnswer:
    text: str | None  # None when every attempt failed
    finish_reason: str | None = None
    model: str | None = None  # the model name the server reported
    fingerprint: str | None = None  # system_fingerprint, when the server sends one
    cached: bool = False
    error: str | None = None  # the last failure, in words
    failure: str | None = None  # its kind (failure_kind), when no attempt got an answer


_ANSWER_FIELDS = {"text", "finish_reason", "model", "fingerprint"}


class JudgeCache:
    """One JSON file per answered request, named by the request hash; atomic writes and no lock (asking twice costs one
    request); an entry that is not an answer is a miss."""

    def __init__(self, folder: str | Path | None = None):
        self.folder = Path(folder) if folder else default_cache_dir()

    def get(self, key: str) -> dict | None:
        value = read_json_or_none(self.folder / key[:2] / f"{key}.json")
        ok = isinstance(value, dict) and isinstance(value.get("text"), str) and set(value) <= _ANSWER_FIELDS
        return value if ok else None

    def put(self, key: str, value: dict) -> None:
        write_json_atomic(self.folder / key[:2] / f"{key}.json", value)


def request_body(settings: JudgeSettings, messages: Sequence[dict]) -> dict:
    """The content of a request: what the cache key hashes. The client sends it with ``stream=True`` added."""
    return {
        "model": settings.model,
        "messages": list(messages),
        "temperature": settings.temperature,
        "max_tokens": settings.max_tokens,
        **settings.extra,
    }


def request_key(body: dict) -> str:
    """Hash of everything that determines the answer (the server address is deliberately left out)."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class MalformedReply(ValueError):
    """A reply that is not a chat completion with a message (or a stream ending before its ``finish_reason``)."""


class JudgeUnreachable(UsageError):
    """The judge server cannot be asked at all (:meth:`JudgeClient.check_server`: nothing listening, a refused key, not
    an OpenAI-compatible server): one line naming the address and what to do."""


class ReplyTimeout(Exception):
    """An attempt that was still receiving its reply when its whole-reply bound (``timeout``) ran out."""


@lru_cache(maxsize=1)
def _http_errors() -> tuple[type[Exception], type[Exception], type[Exception]]:
    """The timeout, transport and bad-URL exception classes of the HTTP library under the openai client (httpx, or
    httpx2 from openai 3 on), which a directly read body and a stream under openai 1.x raise unwrapped."""
    import openai

    base = next(c for c in openai.DefaultAsyncHttpxClient.__mro__ if c.__name__ == "AsyncClient")
    http = importlib.import_module(base.__module__.partition(".")[0])
    return http.TimeoutException, http.TransportError, http.InvalidURL


def failure_kind(err: Exception) -> str | None:
    """The kind of a failed attempt: ``http_<status>``, ``silent`` (any HTTP-level timeout: each is ``idle_timeout``),
    ``timeout`` (the whole reply past ``timeout``), ``connection``, ``stream_error`` or ``malformed``; None for an
    exception that is not the server's doing (a bug: it propagates)."""
    import openai

    http_timeout, http_transport, _ = _http_errors()
    if isinstance(err, (openai.APITimeoutError, http_timeout)):  # APITimeoutError subclasses APIConnectionError
        return "silent"
    if isinstance(err, ReplyTimeout):
        return "timeout"
    if isinstance(err, (openai.APIConnectionError, http_transport)):
        return "connection"
    if isinstance(err, openai.APIStatusError):
        return f"http_{err.status_code}"
    if isinstance(err, (MalformedReply, json.JSONDecodeError, UnicodeDecodeError, openai.APIResponseValidationError)):
        return "malformed"
    if isinstance(err, openai.APIError):  # what the openai client raises for a stream's error event
        return "stream_error"
    return None


def _retryable(kind: str) -> bool:
    if kind.startswith("http_"):
        status = int(kind[5:])
        return status in (408, 409, 429) or status >= 500
    return True  # timeouts, dropped connections, malformed replies: the server may do better next time


def _completion_fields(reply: Any) -> dict:
    """``text`` / ``finish_reason`` / ``model`` / ``fingerprint`` of a chat completion as JSON (a server that answered
    without streaming), or :class:`MalformedReply`."""
    try:
        choice = reply["choices"][0]
        text = choice["message"]["content"]
        fields = {
            "text": text,
            "finish_reason": choice.get("finish_reason"),
            "model": reply.get("model"),
            "fingerprint": reply.get("system_fingerprint"),
        }
    except (AttributeError, IndexError, KeyError, TypeError) as err:
        raise MalformedReply(f"not a chat completion ({type(err).__name__}: {err})") from None
    if not isinstance(text, str):
        raise MalformedReply("a chat completion without message content")
    return fields


def _usage(usage: Any) -> tuple[int, int] | None:
    """``(prompt tokens, completion tokens)`` of a reply's ``usage`` (an object or a dict), None without one."""
    read = usage.get if isinstance(usage, dict) else lambda name: getattr(usage, name, None)
    prompt, completion = read("prompt_tokens"), read("completion_tokens")
    return (int(prompt), int(completion)) if isinstance(prompt, int) and isinstance(completion, int) else None


class _Hearing:
    """When one attempt last heard from the server (monotonic seconds): sent, then each part of the reply."""

    def __init__(self) -> None:
        self.last = time.monotonic()


class JudgeClient:
    """``ask_many(conversations)`` -> :class:`JudgeAnswer` list, in order; ``stats`` counts ``requests_sent``,
    ``retries``, ``cache_hits``, ``failed``, ``failures`` (per kind); ``server_silent``: dead, nothing more sent."""

    def __init__(self, settings: JudgeSettings | None = None):
        self.settings = (settings or JudgeSettings()).resolved()
        self.cache = JudgeCache(self.settings.cache_dir)
        self.stats: dict[str, Any] = {
            "requests_sent": 0,
            "retries": 0,
            "cache_hits": 0,
            "failed": 0,
            "failures": Counter(),
        }  # failures: requests left unanswered, per kind
        self.server_silent = False
        self._last_heard = -math.inf  # when any request last heard from the server (monotonic seconds)

    def _heard(self, attempt: _Hearing) -> None:
        attempt.last = self._last_heard = time.monotonic()

    def _silence(self) -> str:
        return f"nothing came from the server for {self.settings.idle_timeout:g} s"

    async def _reply(self, client: Any, body: dict, attempt: _Hearing) -> dict:
        """One attempt's answer fields (:func:`_completion_fields`), from the stream or a plain completion."""
        # the usage of the reply (the run's cost) asked for beside the body: the body is the judge cache's key
        stream = await client.chat.completions.create(**body, stream=True, stream_options={"include_usage": True})
        try:
            self._heard(attempt)
            content_type = stream.response.headers.get("content-type", "")
            if not content_type.startswith("text/event-stream"):  # a server that does not stream: one completion
                reply = json.loads(await stream.response.aread())
                return {**_completion_fields(reply), "usage": _usage(reply.get("usage"))}  # a dict: fields were read
            parts: list[str] = []
            fields: dict[str, Any] = {"finish_reason": None, "model": None, "fingerprint": None, "usage": None}
            async for chunk in stream:
                self._heard(attempt)
                try:
                    fields["usage"] = _usage(getattr(chunk, "usage", None)) or fields["usage"]
                    fields["model"] = fields["model"] or chunk.model
                    fields["fingerprint"] = getattr(chunk, "system_fingerprint", None) or fields["fingerprint"]
                    for choice in chunk.choices or ():  # a usage chunk has no choices
                        if choice.index == 0:
                            parts.append(choice.delta.content or "")
                            fields["finish_reason"] = choice.finish_reason or fields["finish_reason"]
                except (AttributeError, TypeError) as err:
                    raise MalformedReply(f"not a chat completion chunk ({type(err).__name__}: {err})") from None
            if fields["finish_reason"] is None:  # a reply cut short must not be cached as the answer
                raise MalformedReply("the stream ended before the reply did (no finish_reason)")
            return {"text": "".join(parts), **fields}
        finally:
            await stream.close()

    async def _attempt(self, client: Any, body: dict, attempt: _Hearing) -> dict:
        """:meth:`_reply` within the whole-reply bound (:class:`ReplyTimeout` past it)."""
        try:
            return await asyncio.wait_for(self._reply(client, body, attempt), self.settings.timeout)
        except asyncio.TimeoutError:  # the outer bound only: httpx's timeouts raise their own classes
            raise ReplyTimeout(f"the reply took longer than {self.settings.timeout:g} s") from None

    async def _ask(self, client: Any, semaphore: asyncio.Semaphore, messages: Sequence[dict]) -> JudgeAnswer:
        body = request_body(self.settings, messages)
        key = request_key(body)
        hit = self.cache.get(key)
        if hit is not None:
            self.stats["cache_hits"] += 1
            return JudgeAnswer(**{**hit, "cached": True})
        error, kind = None, None
        async with semaphore:
            for attempt in range(self.settings.max_attempts):
                if self.server_silent:
                    error, kind = f"not sent: {self._silence()} on any request (a hung server)", "silent"
                    break
                hearing = _Hearing()
                try:
                    self.stats["requests_sent"] += 1
                    answer = await self._attempt(client, body, hearing)
                    usage = answer.pop("usage", None) or (None, None)
                    record_judge(*usage)
                    self.cache.put(key, answer)
                    return JudgeAnswer(**answer)
                except Exception as err:  # noqa: BLE001 - classified just below
                    kind = failure_kind(err)
                    if kind is None:
                        raise
                    error = f"{type(err).__name__}: {' '.join(str(err).split())[:200]}"
                    if kind == "silent":
                        error = f"{self._silence()} ({error})"
                        if self._last_heard <= hearing.last:  # no request heard anything meanwhile: dead server
                            self.server_silent = True
                            break
                    if not _retryable(kind):
                        break
                    if attempt + 1 < self.settings.max_attempts:
                        self.stats["retries"] += 1
                        await asyncio.sleep(self.settings.backoff * (2**attempt) * (0.5 + random.random()))
        self.stats["failed"] += 1
        self.stats["failures"][kind] += 1
        return JudgeAnswer(text=None, error=error, failure=kind)

    async def check_server(self, client: Any) -> bool:
        """One ``GET <base_url>/models`` (``client.models.list()``) before the first uncached request: nothing
        listening, a 4xx or no JSON model list is a :class:`JudgeUnreachable` naming the URL; a 5xx is left to the
        requests' retries. False when the server is silent for ``idle_timeout`` (its requests then fail as ``silent``,
        unsent), else True."""
        import openai

        url, hint = (
            self.settings.base_url,
            (
                "start an OpenAI-compatible server (e.g. python -m "
                "vllm.entrypoints.openai.api_server --model M) or fix the judge base URL "
                "(it ends in /v1)"
            ),
        )
        try:
            # the raw reply: the page openai parses from it hides a body that is not JSON, or JSON that is no list
            reply = await client.models.with_raw_response.list()
            body = json.loads(reply.http_response.content)
        except openai.APITimeoutError:  # no connection accepted, or no answer, within idle_timeout: silent
            return False
        except openai.APIStatusError as err:
            if err.status_code >= 500:  # a server that is there but failed (transformers serve offline lists the hub)
                return True
            if err.status_code in (401, 403):
                raise JudgeUnreachable(
                    f"the judge server at {url} refused the API key (HTTP {err.status_code}): set "
                    "LCH_JUDGE_API_KEY or OPENAI_API_KEY"
                ) from None
            raise JudgeUnreachable(
                f"the judge server at {url} is not OpenAI-compatible (GET /models answered HTTP "
                f"{err.status_code}): {hint}"
            ) from None
        except openai.APIConnectionError as err:
            reason: BaseException = err
            while (
                inner := reason.__cause__ or reason.__context__
            ) is not None:  # the innermost: the socket's, the URL's
                reason = inner
            if isinstance(reason, OSError) and reason.errno and reason.errno > 0:  # not asyncio's "Connect call failed"
                reason = OSError(reason.errno, os.strerror(reason.errno))
            raise JudgeUnreachable(f"no judge server answers at {url} ({reason}): {hint}") from None
        except ValueError:
            raise JudgeUnreachable(
                f"the judge server at {url} is not OpenAI-compatible (GET /models did not answer JSON): {hint}"
            ) from None
        if not isinstance(body, dict) or not isinstance(body.get("data"), list):
            raise JudgeUnreachable(
                f"the judge server at {url} is not OpenAI-compatible (GET /models has no model list): {hint}"
            )
        return True

    async def ask_many_async(self, conversations: Sequence[Sequence[dict]], progress: bool = True) -> list[JudgeAnswer]:
        """The answers to ``conversations``, in order; never raises for the server's failures (module docstring)."""
        import openai

        # httpx's timeouts bound each wait for the server: the silence detector (_attempt bounds the whole reply).
        # The client's own retries (max_retries) were tried and not taken: they cover the opening of a request only,
        # not a reply that fails while it streams, and they retry a timeout, so a dead server would be asked again,
        # each attempt an idle timeout, where _ask gives it up after one.
        try:
            client = openai.AsyncOpenAI(
                base_url=self.settings.base_url,
                api_key=self.settings.api_key,
                timeout=openai.Timeout(self.settings.idle_timeout, pool=None),
                max_retries=0,
            )
        except _http_errors()[2] as err:  # a URL httpx cannot parse
            raise JudgeUnreachable(
                f"no judge server answers at {self.settings.base_url} ({err}): fix the judge base URL (it ends in /v1)"
            ) from None
        bodies = [request_body(self.settings, messages) for messages in conversations]
        if any(self.cache.get(request_key(body)) is None for body in bodies):  # answers from the cache need no server
            if not await self.check_server(client):
                self.server_silent = True  # nothing is sent: the uncached requests fail as silent at once
        semaphore = asyncio.Semaphore(self.settings.concurrency)
        bar = tqdm(total=len(conversations), desc="Judging", disable=not progress)

        async def one(messages: Sequence[dict]) -> JudgeAnswer:
            answer = await self._ask(client, semaphore, messages)
            bar.update(1)
            return answer

        try:
            return list(await asyncio.gather(*(one(m) for m in conversations)))
        finally:
            bar.close()
            await client.close()

    def ask_many(self, conversations: Sequence[Sequence[dict]], progress: bool = True) -> list[JudgeAnswer]:
        """Blocking wrapper around :meth:`ask_many_async` (:func:`run_interruptible`)."""
        return run_interruptible(self.ask_many_async(conversations, progress))


T = TypeVar("T")


def run_interruptible(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``, where Ctrl-C or a SIGTERM cancels the task as ``asyncio.run`` does for Ctrl-C, and the
    signal is raised again to the process's own handler once the loop has closed. Raised by that handler inside the
    loop, an interrupt can land in a library's task group (httpx connecting through anyio) and end the run with an
    exception group's traceback instead of the command line's one line."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return asyncio.run(coro)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    task = loop.create_task(coro)
    caught: list[int] = []
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def interrupt(sig: int) -> None:
        caught.append(sig)
        task.cancel()

    for sig in handlers:
        loop.add_signal_handler(sig, interrupt, sig)
    try:
        return loop.run_until_complete(task)
    finally:
        for sig, handler in handlers.items():
            loop.remove_signal_handler(sig)
            signal.signal(sig, handler)
        pending = asyncio.all_tasks(loop)
        for left in pending:
            left.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        asyncio.set_event_loop(None)
        loop.close()
        if caught:
            signal.raise_signal(caught[0])
