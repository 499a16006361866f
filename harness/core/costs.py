"""What a run cost, gathered while it runs: our engines report each batch of requests they computed (tokens in,
tokens out, tokens scored, seconds: :mod:`harness.engines.metering`), the judge stage each judge request (its tokens
as the server counted them), and the run's wrapper (:func:`harness.plugin.preflight.after_evaluator_import`) takes
them at the end (:func:`take_costs`) into the results under :data:`harness.core.results.COST`.

lm-eval hands an engine every request of one type at once, of every task; the seconds of a call are shared among its
requests in proportion to their tokens (prompt + generated), so each task's seconds and tokens per second are that
share. Requests answered from a response cache (``--use_cache``) are not computed and not counted."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable

UNKNOWN_TASK = "(no task)"  # a request lm-eval built outside a task (none of ours)


@dataclass
class TaskCost:
    """One task's share of a run: requests computed, their tokens and seconds."""

    requests: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    scored_tokens: int = 0
    seconds: float = 0.0
    # what a throughput model prices (harness.plan.cells.Throughput.work_seconds): the sum over requests of the prompt
    # tokens squared (attention's quadratic term), and of each generation's tokens times its mean context
    # (prompt + generated / 2)
    prompt_tokens_squared: int = 0
    decode_context: float = 0.0

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = asdict(self)
        tokens = self.prompt_tokens + self.generated_tokens
        out["tokens_per_second"] = tokens / self.seconds if self.seconds > 0 else None
        return out


@dataclass
class JudgeCost:
    """The judge requests a run sent and their tokens as the server reported them (None: a server that reports no
    usage)."""

    requests: int = 0
    prompt_tokens: int | None = 0
    completion_tokens: int | None = 0


_tasks: dict[str, TaskCost] = {}
_judge = JudgeCost()


def record_requests(rows: Iterable[tuple[str | None, int, int, int]], seconds: float) -> None:
    """One engine call: each computed request as ``(task, prompt tokens, generated tokens, scored tokens)``, and the
    call's seconds, shared in proportion to prompt + generated tokens (module docstring)."""
    rows = list(rows)
    weight = sum(p + g for _, p, g, _ in rows)
    for task, prompt, generated, scored in rows:
        cost = _tasks.setdefault(task or UNKNOWN_TASK, TaskCost())
        cost.requests += 1
        cost.prompt_tokens += prompt
        cost.generated_tokens += generated
        cost.scored_tokens += scored
        cost.prompt_tokens_squared += prompt * prompt
        cost.decode_context += generated * (prompt + generated / 2)
        cost.seconds += seconds * ((prompt + generated) / weight if weight else 1 / len(rows))


def record_judge(prompt_tokens: int | None, completion_tokens: int | None) -> None:
    """One judge request answered by the server (not from the judge cache), with the usage it reported."""
    _judge.requests += 1
    _judge.prompt_tokens = None if _judge.prompt_tokens is None or prompt_tokens is None else \
        _judge.prompt_tokens + prompt_tokens
    _judge.completion_tokens = None if _judge.completion_tokens is None or completion_tokens is None else \
        _judge.completion_tokens + completion_tokens


def take_costs() -> tuple[dict[str, TaskCost], JudgeCost]:
    """What was recorded since the last call (then cleared): each task's cost and the judge's."""
    global _judge
    tasks, judge = dict(_tasks), _judge
    _tasks.clear()
    _judge = JudgeCost()
    return tasks, judge
