"""What a run cost, gathered while it runs (engine calls, judge requests) and taken at the end into the results under
:data:`harness.core.results.COST`. A call's seconds are shared among its requests in proportion to prompt + generated
tokens; requests answered from the response cache (``--use_cache``) are not counted."""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.core.context import setting

UNKNOWN_TASK = "(no task)"  # a request lm-eval built outside a task (none of ours)


@dataclass
class TaskCost:
    """One task's share of a run: requests computed, their tokens and seconds."""

    requests: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    scored_tokens: int = 0
    seconds: float = 0.0
    # priced by harness.plan.cells.Throughput.work_seconds: sum of prompt**2, of generated * (prompt + generated / 2)
    prompt_tokens_squared: int = 0
    decode_context: float = 0.0

    def as_json(self) -> dict[str, Any]:
        tokens = self.prompt_tokens + self.generated_tokens
        return {**asdict(self), "tokens_per_second": tokens / self.seconds if self.seconds > 0 else None}


@dataclass
class JudgeCost:
    """The judge requests a run sent and their tokens as the server reported them (None: not reported)."""

    requests: int = 0
    prompt_tokens: int | None = 0
    completion_tokens: int | None = 0


@dataclass
class RunCost:
    """What one run has cost so far: each task's share, the judge's, and the models loaded beside the evaluated one
    (``{"model", "dtype"}``: LongPPL's evaluator where its key tokens were not cached), for ``lch plan --against``."""

    tasks: dict[str, TaskCost] = field(default_factory=dict)
    judge: JudgeCost = field(default_factory=JudgeCost)
    helpers: list[dict[str, str]] = field(default_factory=list)


_CURRENT: ContextVar[RunCost | None] = ContextVar("lch_run_cost", default=None)


def gathering() -> AbstractContextManager[RunCost]:
    """Within it, engine calls and judge requests are recorded into the :class:`RunCost` it yields (outside any run,
    nothing is recorded)."""
    return setting(_CURRENT, RunCost())


def record_requests(rows: Iterable[tuple[str | None, int, int, int]], seconds: float) -> None:
    """One engine call: ``(task, prompt, generated, scored tokens)`` per computed request, and the call's seconds."""
    run = _CURRENT.get()
    if run is None:
        return
    rows = list(rows)
    weight = sum(p + g for _, p, g, _ in rows)
    for task, prompt, generated, scored in rows:
        cost = run.tasks.setdefault(task or UNKNOWN_TASK, TaskCost())
        cost.requests += 1
        cost.prompt_tokens += prompt
        cost.generated_tokens += generated
        cost.scored_tokens += scored
        cost.prompt_tokens_squared += prompt * prompt
        cost.decode_context += generated * (prompt + generated / 2)
        cost.seconds += seconds * ((prompt + generated) / weight if weight else 1 / len(rows))


def record_helper(model: str, dtype: str) -> None:
    """A model loaded beside the evaluated one (by name or folder, in ``dtype``), once per run however often."""
    run = _CURRENT.get()
    if run is not None and {"model": model, "dtype": dtype} not in run.helpers:
        run.helpers.append({"model": model, "dtype": dtype})


def record_judge(prompt_tokens: int | None, completion_tokens: int | None) -> None:
    """One judge request answered by the server (not from the judge cache), with the usage it reported."""
    run = _CURRENT.get()
    if run is None:
        return
    judge = run.judge
    judge.requests += 1
    judge.prompt_tokens = (
        None if judge.prompt_tokens is None or prompt_tokens is None else judge.prompt_tokens + prompt_tokens
    )
    judge.completion_tokens = (
        None
        if judge.completion_tokens is None or completion_tokens is None
        else judge.completion_tokens + completion_tokens
    )
