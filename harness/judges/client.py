"""Async judge client for OpenAI-compatible chat servers (vLLM, ``transformers serve``, OpenAI).

Settings come from arguments, else the environment (``LCH_JUDGE_BASE_URL``, ``LCH_JUDGE_MODEL``,
``LCH_JUDGE_API_KEY`` / ``OPENAI_API_KEY``). Requests run concurrently under a semaphore. Every attempt is bounded by
``timeout`` seconds, and a request gets at most ``max_attempts`` of them with exponential backoff between them (the
openai client's own retries are off so that every attempt is counted), so a request ends within
``max_attempts * timeout`` plus the backoff whatever the server does. 429, 408, 409, 5xx, timeouts, dropped
connections and replies that are not a chat completion (a body that is not JSON, no choices, no message content) are
retried; other HTTP errors (a 400: a request the server refuses) are not. A request that gets no answer is never an
exception: its answer carries the kind of failure (:func:`failure_kind`: ``http_500``, ``timeout``, ``connection``,
``malformed`` ...), counted in :attr:`JudgeClient.stats`, so a run ends with what it has and says what failed. Every
answer is written to the cache the moment it arrives, keyed by the SHA-256 of the full request, so a killed or
failed run resumes where it stopped and a finished run re-asks nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from tqdm import tqdm

from harness.core.cache import cache_root
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
    timeout: float = 300.0  # seconds one attempt may take, the whole reply included
    backoff: float = 1.0  # seconds before the first retry; doubles, with jitter
    cache_dir: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # more request fields (seed, top_p ...)

    def resolved(self) -> "JudgeSettings":
        base_url = self.base_url or os.environ.get("LCH_JUDGE_BASE_URL")
        model = self.model or os.environ.get("LCH_JUDGE_MODEL")
        if not base_url or not model:
            raise UsageError("judge needs base_url and model (task metadata judge_base_url / judge_model, "
                             "or LCH_JUDGE_BASE_URL / LCH_JUDGE_MODEL)")
        api_key = self.api_key or os.environ.get("LCH_JUDGE_API_KEY") or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        return JudgeSettings(base_url, model, api_key, self.temperature, self.max_tokens, self.concurrency,
                             self.max_attempts, self.timeout, self.backoff, self.cache_dir, dict(self.extra))


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
    """One JSON file per answered request, named by the request hash. Writes are atomic
    (:func:`harness.core.files.write_json_atomic`), so concurrent runs asking the same request both store the same
    answer harmlessly (no lock: asking twice costs one request); an entry that is not a JSON object (a writer
    killed before writes were atomic) is a miss, asked again and overwritten."""

    def __init__(self, folder: str | Path | None = None):
        self.folder = Path(folder) if folder else default_cache_dir()

    def get(self, key: str) -> dict | None:
        value = read_json_or_none(self.folder / key[:2] / f"{key}.json")
        ok = isinstance(value, dict) and isinstance(value.get("text"), str) and set(value) <= _ANSWER_FIELDS
        return value if ok else None

    def put(self, key: str, value: dict) -> None:
        write_json_atomic(self.folder / key[:2] / f"{key}.json", value)


def request_body(settings: JudgeSettings, messages: Sequence[dict]) -> dict:
    return {"model": settings.model, "messages": list(messages), "temperature": settings.temperature,
            "max_tokens": settings.max_tokens, **settings.extra}


def request_key(body: dict) -> str:
    """Hash of everything that determines the answer (the server address is deliberately left out)."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class MalformedReply(ValueError):
    """A reply that is not a chat completion with a message (a body that is not JSON, no choices, no content)."""


def failure_kind(err: Exception) -> str | None:
    """The kind of a failed attempt: ``http_<status>``, ``timeout``, ``connection`` or ``malformed``; None for an
    exception that is not the server's doing (a bug: it propagates)."""
    import openai

    if isinstance(err, openai.APITimeoutError):  # a subclass of APIConnectionError
        return "timeout"
    if isinstance(err, openai.APIConnectionError):
        return "connection"
    if isinstance(err, openai.APIStatusError):
        return f"http_{err.status_code}"
    if isinstance(err, (MalformedReply, json.JSONDecodeError, openai.APIResponseValidationError)):
        return "malformed"
    return None


def _retryable(kind: str) -> bool:
    if kind.startswith("http_"):
        status = int(kind[5:])
        return status in (408, 409, 429) or status >= 500
    return True  # timeouts, dropped connections, malformed replies: the server may do better next time


def _reply_fields(reply: Any) -> dict:
    """``text`` / ``finish_reason`` / ``model`` / ``fingerprint`` of a chat completion, or :class:`MalformedReply`."""
    try:
        choice = reply.choices[0]
        text = choice.message.content
    except (AttributeError, IndexError, KeyError, TypeError) as err:
        raise MalformedReply(f"not a chat completion ({type(err).__name__}: {err})") from None
    if not isinstance(text, str):
        raise MalformedReply("a chat completion without message content")
    return {"text": text, "finish_reason": choice.finish_reason, "model": getattr(reply, "model", None),
            "fingerprint": getattr(reply, "system_fingerprint", None)}


class JudgeClient:
    """``ask_many(list_of_messages)`` -> list of :class:`JudgeAnswer`, in order."""

    def __init__(self, settings: JudgeSettings | None = None):
        self.settings = (settings or JudgeSettings()).resolved()
        self.cache = JudgeCache(self.settings.cache_dir)
        self.stats: dict[str, Any] = {"requests_sent": 0, "retries": 0, "cache_hits": 0, "failed": 0,
                                      "failures": Counter()}  # failures: requests left unanswered, per kind

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
                try:
                    self.stats["requests_sent"] += 1
                    answer = _reply_fields(await client.chat.completions.create(**body))
                    self.cache.put(key, answer)
                    return JudgeAnswer(**answer)
                except Exception as err:  # noqa: BLE001 - classified just below
                    kind = failure_kind(err)
                    if kind is None:
                        raise
                    error = f"{type(err).__name__}: {' '.join(str(err).split())[:200]}"
                    if not _retryable(kind):
                        break
                    if attempt + 1 < self.settings.max_attempts:
                        self.stats["retries"] += 1
                        delay = self.settings.backoff * (2 ** attempt) * (0.5 + random.random())
                        await asyncio.sleep(delay)
        self.stats["failed"] += 1
        self.stats["failures"][kind] += 1
        return JudgeAnswer(text=None, error=error, failure=kind)

    def check_server(self) -> None:
        """One ``GET <base_url>/models`` before the first request that is not cached: an OpenAI-compatible
        server (vLLM, OpenAI) answers with a JSON model list. Nothing listening, a 4xx (no such endpoint, a
        refused key) or a page that is not JSON is a :class:`UsageError` naming the URL, instead of every
        request failing after its retries and the judged metrics coming out empty; a 5xx is left to the
        requests' own retries (``transformers serve`` offline answers 500 here: it lists hub models)."""
        import urllib.error
        import urllib.request

        url = self.settings.base_url.rstrip("/") + "/models"
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.settings.api_key}"})
        hint = ("start an OpenAI-compatible server (e.g. python -m vllm.entrypoints.openai.api_server --model M) "
                "or fix the judge base URL (it ends in /v1)")
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                body = json.loads(reply.read().decode("utf-8", "replace"))
        except urllib.error.HTTPError as err:
            if err.code >= 500:  # a server that is there but failed (transformers serve offline lists the hub): ask
                return
            if err.code in (401, 403):
                raise UsageError(f"the judge server at {self.settings.base_url} refused the API key (HTTP {err.code}): "
                                 "set LCH_JUDGE_API_KEY or OPENAI_API_KEY") from None
            raise UsageError(f"the judge server at {self.settings.base_url} is not OpenAI-compatible (GET /models "
                             f"answered HTTP {err.code}): {hint}") from None
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise UsageError(f"no judge server answers at {self.settings.base_url} ({reason}): {hint}") from None
        except ValueError:
            raise UsageError(f"the judge server at {self.settings.base_url} is not OpenAI-compatible (GET /models did "
                             f"not answer JSON): {hint}") from None
        if not isinstance(body, dict) or not isinstance(body.get("data"), list):
            raise UsageError(f"the judge server at {self.settings.base_url} is not OpenAI-compatible (GET /models has "
                             f"no model list): {hint}")

    async def _check_server_off_loop(self) -> None:
        """:meth:`check_server` in a daemon thread, awaited: the blocking probe (up to 30 s) must not hold the
        event loop, or an interrupt (asyncio.run turns Ctrl-C into a cancellation of the main task) would wait
        for it and then surface as the probe's error. (``asyncio.to_thread`` would still make ``asyncio.run``
        wait for the thread at shutdown.)"""
        loop = asyncio.get_running_loop()
        done: asyncio.Future = loop.create_future()

        def probe() -> None:
            try:
                self.check_server()
                outcome: BaseException | None = None
            except BaseException as err:  # noqa: BLE001 - handed to the awaiting task
                outcome = err

            def settle() -> None:
                if not done.done():
                    done.set_exception(outcome) if outcome is not None else done.set_result(None)

            try:
                loop.call_soon_threadsafe(settle)
            except RuntimeError:  # the loop has closed: the run was interrupted, nobody waits any more
                pass

        threading.Thread(target=probe, name="judge-server-probe", daemon=True).start()
        await done

    async def ask_many_async(self, conversations: Sequence[Sequence[dict]], progress: bool = True) -> list[JudgeAnswer]:
        import openai

        bodies = [request_body(self.settings, messages) for messages in conversations]
        if any(self.cache.get(request_key(body)) is None for body in bodies):
            await self._check_server_off_loop()  # answers from the cache need no server

        client = openai.AsyncOpenAI(base_url=self.settings.base_url, api_key=self.settings.api_key,
                                    timeout=self.settings.timeout, max_retries=0)
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
        """Blocking wrapper around :meth:`ask_many_async`."""
        return asyncio.run(self.ask_many_async(conversations, progress))
