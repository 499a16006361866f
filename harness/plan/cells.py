"""A plan's numbers and arithmetic (no model, no I/O): :class:`PlanCell`, totals, and the estimate: a sample costs
``t_prefill(prompt) + budget x t_decode(prompt + budget / 2)`` (:class:`Throughput`; batch 1, an upper bound)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from harness.longppl.formulas import EvaluatorRun


@dataclass(frozen=True)
class PlanCell:
    """One task at one sample length (``"-"``: none): each request's prompt tokens as sent and generation budget, tokens
    scored, samples cut or skipped, judge calls, and whether read from the data cache (None: the task keeps none)."""

    task: str
    length: str
    prompts: tuple[int, ...]
    budgets: tuple[int, ...]
    scored_tokens: int = 0
    cut: int = 0
    judge_calls: int = 0
    cached: bool | None = None
    # at most: each judge call's prompt plus max_tokens, in the evaluated tokenizer; None: the prompt is not at hand
    judge_tokens: int | None = 0
    # bytes the longest request needs on the planned device, weights included, and whether it fits (None: not planned)
    memory: int | None = None
    fits: bool | None = None
    # a model loaded beside the evaluated one where ``cached`` is not True: LongPPL's evaluator
    helper: EvaluatorRun | None = None

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


COLUMNS = (
    "task",
    "length",
    "samples",
    "prompt_tokens",
    "longest_prompt",
    "generated_tokens",
    "scored_tokens",
    "cut",
    "judge_calls",
    "judge_tokens",
    "cached",
    "memory",
    "fits",
)
SUMMED = ("samples", "prompt_tokens", "generated_tokens", "scored_tokens", "cut", "judge_calls", "judge_tokens")


def totals(cells: Iterable[PlanCell]) -> dict[str, int | None]:
    """Sums of :data:`SUMMED` (None where one is unknown), the longest prompt, the most memory, whether all fit."""
    cells = list(cells)
    out: dict[str, int | None] = {}
    for name in SUMMED:
        values = [getattr(c, name) for c in cells]
        out[name] = None if any(v is None for v in values) else sum(values)
    out["longest_prompt"] = max((c.longest_prompt for c in cells), default=0)
    needs = [c.memory for c in cells]
    out["memory"] = None if not needs or None in needs else max(needs)  # type: ignore[type-var]
    fits = [c.fits for c in cells]
    out["fits"] = None if not fits or None in fits else all(fits)
    return out


@dataclass(frozen=True)
class Throughput:
    """``t_prefill(n) = a n + b n^2``, ``t_decode(n) = c + d n`` per generated token and ``t_score(n) = e n + f n^2``
    in seconds (``e``, ``f`` None: scoring priced as a prefill); ``basis``: what they were measured on, in words."""

    a: float
    b: float
    c: float
    d: float
    basis: str
    e: float | None = None
    f: float | None = None

    @classmethod
    def fit(
        cls,
        lengths: Sequence[int],
        prefill_seconds: Sequence[float],
        decode_seconds: Sequence[float],
        basis: str,
        score_seconds: Sequence[float] | None = None,
    ) -> Throughput:
        """The coefficients through timings at two ``lengths``; a negative one (noise) is 0, its partner refitted."""
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

    def work_seconds(
        self,
        prompt_tokens: float,
        prompt_tokens_squared: float,
        generated_tokens: float,
        decode_context: float,
        scoring: bool = False,
    ) -> float:
        """Requests given by their sums (:class:`harness.core.costs.TaskCost`): ``a sum(n) + b sum(n^2) + c sum(g) + d
        sum(g (n + g / 2))``; with ``scoring`` (requests that only score) ``e sum(n) + f sum(n^2)``."""
        if scoring and self.e is not None and self.f is not None:
            return self.e * prompt_tokens + self.f * prompt_tokens_squared
        return (
            self.a * prompt_tokens
            + self.b * prompt_tokens_squared
            + self.c * generated_tokens
            + self.d * decode_context
        )

    def cell_seconds(self, cell: PlanCell) -> float:
        """A cell's samples, each by :meth:`sample_seconds`, or by :meth:`score` when the cell only scores."""
        if scores_only(cell.scored_tokens, sum(cell.budgets)):
            return sum(self.score(p) for p in cell.prompts)
        return sum(self.sample_seconds(p, b) for p, b in zip(cell.prompts, cell.budgets))


def scores_only(scored_tokens: float, generated_tokens: float) -> bool:
    """Whether requests score their tokens and generate none (priced by :meth:`Throughput.score`)."""
    return scored_tokens > 0 and not generated_tokens


def _through(n1: int, n2: int, y1: float, y2: float) -> tuple[float, float]:
    """``(p, q)`` of ``p n + q n^2`` through ``(n1, y1)``, ``(n2, y2)``; a negative one 0, the other through ``n2``."""
    q = (y2 / n2 - y1 / n1) / (n2 - n1)
    p = y1 / n1 - q * n1
    if q < 0:
        return y2 / n2, 0.0
    if p < 0:
        return 0.0, y2 / n2**2
    return p, q
