"""A plan's numbers and the arithmetic on them: one :class:`PlanCell` per task and sample length, their totals, and
the wall-time estimate from a measured :class:`Throughput` (no model, no I/O).

Estimate. A forward pass over ``n`` prompt tokens costs ``t_prefill(n) = a n + b n^2`` seconds (the linear layers
and attention's quadratic term) and one generated token at context ``n`` costs ``t_decode(n) = c + d n``; the four
coefficients are fitted from timings at two lengths (:meth:`Throughput.fit`). A sample costs
``t_prefill(prompt) + budget x t_decode(prompt + budget / 2)`` (its generation at the mean context it sees): an
upper bound when generations stop before their budget, and a batch-1 figure (batched runs go faster). A request that
scores every token of its text and generates nothing (a perplexity) costs ``t_score(n) = e n + f n^2``, timed
apart: the head and the log-softmax at every position cost about as much again as the prefill."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

LAYER = "pure"  # harness/devtools/layers.py


@dataclass(frozen=True)
class PlanCell:
    """One task at one sample length (``length`` "-" for tasks whose samples have none): each request's prompt tokens
    as sent (after the task's truncation policy, chat template counted) and generation budget, the tokens whose
    log-probabilities are scored, the samples the truncation policy cuts or skips (``cut``), the judge calls
    and their tokens, and whether the samples were read from the data cache (None: the task keeps no such cache)."""

    task: str
    length: str
    prompts: tuple[int, ...]
    budgets: tuple[int, ...]
    scored_tokens: int = 0
    cut: int = 0
    judge_calls: int = 0
    cached: bool | None = None
    # at most, each judge call's prompt (its messages, the response at its budget) plus completion (the judge's
    # max_tokens), in the evaluated tokenizer; None: the judge's prompt is not at hand to count
    judge_tokens: int | None = 0
    # bytes the cell's longest request needs on the planned device, weights included, and whether that fits it
    # (None: not planned, harness.plan.make's with_memory)
    memory: int | None = None
    fits: bool | None = None
    # the model the run loads beside the evaluated one for this cell, (name or folder, dtype): LongPPL's evaluator
    # when the key tokens are not cached
    helper: tuple[str, str] | None = None

    def __post_init__(self) -> None:
        if len(self.prompts) != len(self.budgets):
            raise ValueError(f"{self.task} {self.length}: {len(self.prompts)} prompts but {len(self.budgets)} budgets")

    @property
    def samples(self) -> int:
        return len(self.prompts)

    @property
    def prompt_tokens(self) -> int:
        return sum(self.prompts)

    @property
    def longest_prompt(self) -> int:
        return max(self.prompts, default=0)

    @property
    def generated_tokens(self) -> int:
        """At most: every generation uses its whole budget."""
        return sum(self.budgets)

    def row(self) -> dict[str, object]:
        """The cell as one row of :data:`COLUMNS` (the plan's table and JSON)."""
        return {name: getattr(self, name) for name in COLUMNS}


COLUMNS = ("task", "length", "samples", "prompt_tokens", "longest_prompt", "generated_tokens", "scored_tokens",
           "cut", "judge_calls", "judge_tokens", "cached", "memory", "fits")
SUMMED = ("samples", "prompt_tokens", "generated_tokens", "scored_tokens", "cut", "judge_calls",
          "judge_tokens")


def totals(cells: Iterable[PlanCell]) -> dict[str, int | None]:
    """The sums of :data:`SUMMED` over ``cells`` (None where a cell's is unknown), the longest prompt, the most
    memory a cell needs and whether every cell fits."""
    cells = list(cells)
    out: dict[str, int | None] = {}
    for name in SUMMED:
        values = [getattr(c, name) for c in cells]
        out[name] = None if any(v is None for v in values) else sum(values)
    out["longest_prompt"] = max((c.longest_prompt for c in cells), default=0)
    needs = [c.memory for c in cells]
    out["memory"] = None if not needs or None in needs else max(needs)  # type: ignore[type-var]
    fits = [c.fits for c in cells]
    out["fits"] = None if not fits or None in fits else all(fits)  # type: ignore[assignment]
    return out


@dataclass(frozen=True)
class Throughput:
    """``t_prefill(n) = a n + b n^2`` and ``t_decode(n) = c + d n`` in seconds (module docstring), and
    ``t_score(n) = e n + f n^2`` for a forward that scores every token of ``n`` (the head and an fp32 log-softmax at
    each position: a perplexity's request; None in a calibration made before it was timed: priced as a prefill), with
    what they were measured on (``basis``: the model, device, dtype and lengths, in words)."""

    a: float
    b: float
    c: float
    d: float
    basis: str
    e: float | None = None
    f: float | None = None

    @classmethod
    def fit(cls, lengths: Sequence[int], prefill_seconds: Sequence[float], decode_seconds: Sequence[float],
            basis: str, score_seconds: Sequence[float] | None = None) -> "Throughput":
        """The coefficients through two measured points: ``prefill_seconds[i]`` for one forward over ``lengths[i]``
        tokens, ``decode_seconds[i]`` for one generated token at context ``lengths[i]``, ``score_seconds[i]`` for
        the log-probabilities of every token of ``lengths[i]``. A negative coefficient (timing noise) is set to 0 and
        its partner refitted through the longer point."""
        (n1, n2), (g1, g2) = lengths, decode_seconds
        if not 0 < n1 < n2:
            raise ValueError(f"calibration lengths must be two increasing positive lengths, got {n1}, {n2}")
        a, b = _through(n1, n2, *prefill_seconds)
        e, f = _through(n1, n2, *score_seconds) if score_seconds is not None else (None, None)
        d = (g2 - g1) / (n2 - n1)
        c = g1 - d * n1
        if d < 0:
            c, d = g2, 0.0
        elif c < 0:
            c, d = 0.0, g2 / n2
        return cls(a, b, c, d, basis, e, f)

    def score(self, n: float) -> float:
        """One scoring forward over ``n`` tokens (a prefill where scoring was not timed)."""
        if self.e is None or self.f is None:
            return self.prefill(n)
        return self.e * n + self.f * n * n

    def prefill(self, n: float) -> float:
        return self.a * n + self.b * n * n

    def decode(self, n: float) -> float:
        return self.c + self.d * n

    def sample_seconds(self, prompt: float, budget: float) -> float:
        """One sample: its prefill and at most ``budget`` generated tokens at its mean context."""
        return self.prefill(prompt) + budget * self.decode(prompt + budget / 2)

    def work_seconds(self, prompt_tokens: float, prompt_tokens_squared: float, generated_tokens: float,
                     decode_context: float, scoring: bool = False) -> float:
        """Requests given by their sums (what a run records per task, :class:`harness.core.costs.TaskCost`): the sum
        of :meth:`sample_seconds` over them, ``a sum(n) + b sum(n^2) + c sum(g) + d sum(g (n + g / 2))``; with
        ``scoring`` (requests that score every token and generate none) ``e sum(n) + f sum(n^2)``."""
        if scoring and self.e is not None and self.f is not None:
            return self.e * prompt_tokens + self.f * prompt_tokens_squared
        return (self.a * prompt_tokens + self.b * prompt_tokens_squared + self.c * generated_tokens
                + self.d * decode_context)

    def cell_seconds(self, cell: PlanCell) -> float:
        """A cell's samples, each by :meth:`sample_seconds`; a cell that scores its prompts and generates nothing
        (a perplexity's documents), each by :meth:`score`."""
        if scores_only(cell.scored_tokens, sum(cell.budgets)):
            return sum(self.score(p) for p in cell.prompts)
        return sum(self.sample_seconds(p, b) for p, b in zip(cell.prompts, cell.budgets))


def scores_only(scored_tokens: float, generated_tokens: float) -> bool:
    """Whether requests score their tokens and generate none (priced by :meth:`Throughput.score`)."""
    return scored_tokens > 0 and not generated_tokens


def _through(n1: int, n2: int, y1: float, y2: float) -> tuple[float, float]:
    """``(p, q)`` of ``p n + q n^2`` through ``(n1, y1)`` and ``(n2, y2)``; a negative one set to 0 and the other
    through the longer point."""
    q = (y2 / n2 - y1 / n1) / (n2 - n1)
    p = y1 / n1 - q * n1
    if q < 0:
        return y2 / n2, 0.0
    if p < 0:
        return 0.0, y2 / n2 ** 2
    return p, q
