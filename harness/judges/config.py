"""How a task's samples are judged: :class:`JudgeConfig`, carried by each logged item as JSON, and
:class:`JudgeOptions`, the ``--metadata`` keys that build it."""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, fields
from typing import Any

from harness.core.errors import UsageError, check_known
from harness.core.options import MAX_TOKENS, option
from harness.judges.client import JudgeSettings

POLICIES = ("drop", "zero", "rejudge")  # what a reply that does not parse becomes (harness.judges.stage)


@dataclass(frozen=True)
class JudgeConfig:
    """How a task's samples are judged: the server, the model, the parse-failure policy and the request
    settings. Its defaults are the one place judge defaults are written; items carry it as JSON."""

    base_url: str | None = None
    model: str | None = None
    policy: str = "drop"
    temperature: float = 0.0
    max_tokens: int = 1024
    concurrency: int = 8
    cache_dir: str | None = None
    timeout: float = JudgeSettings.timeout
    max_attempts: int = JudgeSettings.max_attempts
    idle_timeout: float = JudgeSettings.idle_timeout

    def __post_init__(self) -> None:
        check_known("judge_policy", self.policy, POLICIES)
        for name in ("timeout", "idle_timeout"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0 < value < math.inf):
                raise UsageError(f"judge {name} must be a number of seconds > 0, got {value!r}")
        if not (isinstance(self.max_attempts, int) and self.max_attempts >= 1):
            raise UsageError(f"judge max_attempts must be a whole number >= 1, got {self.max_attempts!r}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, values: dict | None) -> JudgeConfig:
        """A config from logged settings (missing keys take the defaults, unknown ones are ignored)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (values or {}).items() if k in names})


@dataclass(frozen=True)
class JudgeOptions:
    """The ``--metadata`` keys of a judged task: :class:`JudgeConfig` with a ``judge_`` prefix (its defaults),
    except temperature and reply budget, whose defaults are the task's (the benchmark's reference judge)."""

    judge_base_url: str | None = option(None, "OpenAI-compatible judge server URL (default $LCH_JUDGE_BASE_URL)")
    judge_model: str | None = option(None, "judge model name (default $LCH_JUDGE_MODEL)")
    judge_policy: str = option(JudgeConfig.policy, "parse failures: drop, zero or rejudge", choices=POLICIES)
    judge_concurrency: int = option(JudgeConfig.concurrency, "concurrent judge requests", low=1, high=1024)
    judge_timeout: float = option(
        JudgeConfig.timeout,
        "seconds one judge request attempt may take, the whole streamed reply included",
        low=0.001,
        high=86400.0,
    )
    judge_idle_timeout: float = option(
        JudgeConfig.idle_timeout,
        "seconds without a byte from the judge (waiting for "
        "the first one included) that fail an attempt as silent; a server silent on "
        "every request is taken as dead and asked nothing more",
        low=0.001,
        high=86400.0,
    )
    judge_max_attempts: int = option(
        JudgeConfig.max_attempts,
        "attempts per judge request (retries of 5xx, 429, timeouts, dropped connections, malformed replies)",
        low=1,
        high=100,
    )
    judge_cache_dir: str | None = option(JudgeConfig.cache_dir, "judge answer cache folder", location=True)
    judge_temperature: float | None = option(None, "judge temperature (default: the task's reference setting)", low=0.0)
    judge_max_tokens: int | None = option(
        None, "judge reply budget (default: the task's reference setting)", low=1, high=MAX_TOKENS
    )
    judge_prompt: str | None = option(None, "LongBench-Write judge prompt file (default: the published one)", path=True)

    def settings(self, temperature: float, max_tokens: int) -> dict | None:
        """The JSON-able judge settings carried by each item (None when no judge is configured);
        ``temperature`` and ``max_tokens`` are the task's own, used unless these options set them."""
        base_url = self.judge_base_url or os.environ.get("LCH_JUDGE_BASE_URL")
        model = self.judge_model or os.environ.get("LCH_JUDGE_MODEL")
        if not base_url or not model:
            return None
        return JudgeConfig(
            base_url=base_url,
            model=model,
            policy=self.judge_policy,
            temperature=temperature if self.judge_temperature is None else self.judge_temperature,
            max_tokens=max_tokens if self.judge_max_tokens is None else self.judge_max_tokens,
            concurrency=self.judge_concurrency,
            cache_dir=self.judge_cache_dir,
            timeout=self.judge_timeout,
            max_attempts=self.judge_max_attempts,
            idle_timeout=self.judge_idle_timeout,
        ).to_json()
