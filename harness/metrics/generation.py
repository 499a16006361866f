"""Long-form generation scores (docs/formulas.md §2): lengths, LongBench-Write S_l / S_q / S, HelloEval scores,
repetition diagnostics and the PIC paper's corrupted-sample rule (App. A). Pure functions."""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from harness.core.errors import UsageError

# --------------------------------------------------------------------------- lengths


_CJK = re.compile(r"[\u4e00-\u9fff]")
_ASCII_WORD = re.compile(r"\b[a-zA-Z]+\b")


def longbench_write_length(text: str) -> int:
    """LongBench-Write output length: CJK characters plus ASCII words."""
    return len(_CJK.findall(text)) + len(_ASCII_WORD.findall(text))


def longbench_write_length_score(required_length: float, text_or_length: str | int) -> float:
    """S_l of one sample: ``l' > l``: ``100 max(0, 1 - (l'/l - 1)/3)``; ``l' <= l``:
    ``100 max(0, 1 - (l/l' - 1)/2)``; ``l' = 0`` scores 0."""
    produced = text_or_length if isinstance(text_or_length, int) else longbench_write_length(text_or_length)
    if required_length <= 0:
        raise UsageError(f"required_length must be > 0, got {required_length}")
    if produced == 0:
        return 0.0
    if produced > required_length:
        return 100.0 * max(0.0, 1.0 - (produced / required_length - 1.0) / 3.0)
    return 100.0 * max(0.0, 1.0 - (required_length / produced - 1.0) / 2.0)


LONGBENCH_WRITE_DIMENSIONS = (
    "Relevance",
    "Accuracy",
    "Coherence",
    "Clarity",
    "Breadth and Depth",
    "Reading Experience",
)


def longbench_write_quality(dimension_scores: Iterable[dict[str, float]]) -> float:
    """S_q over samples: per dimension ``25 * (mean - 1)`` of the 1-5 scores, then the mean of the six."""
    rows = list(dimension_scores)
    if not rows:
        return float("nan")
    per_dim = [25.0 * (sum(r[d] for r in rows) / len(rows) - 1.0) for d in LONGBENCH_WRITE_DIMENSIONS]
    return sum(per_dim) / len(per_dim)


def longbench_write_total(length_score: float, quality_score: float) -> float:
    """S = (S_l + S_q) / 2."""
    return (length_score + quality_score) / 2.0


# --------------------------------------------------------------------------- HelloBench / HelloEval


def parse_hellobench_weights(text: str) -> dict[str, list[float]]:
    """Per-category checklist weights from the published ``REGRESSION_DICT = {...}`` file's text (never executed)."""
    weights = ast.literal_eval(text[text.index("{") : text.rindex("}") + 1])
    return {k: [float(x) for x in v] for k, v in weights.items()}


def hellobench_sample_score(category: str, item_scores: Sequence[float], weights: dict[str, list[float]]) -> float:
    """``s_i = sum_j w_{category, j} * a_ij`` (weights sum to 100, scores in {0, .25, .5, .75, 1})."""
    w = weights[category]
    if len(w) != len(item_scores):
        raise ValueError(f"{category}: {len(item_scores)} checklist scores for {len(w)} weights")
    return float(sum(wj * aj for wj, aj in zip(w, item_scores)))


def hellobench_rescale(score: float) -> float:
    """Optional HelloBench rescaling ``r = 4 (s - 75)`` (off in the PIC paper)."""
    return 4.0 * (score - 75.0)


def hellobench_task_score(
    samples: Iterable[tuple[str, Sequence[float] | None]], weights: dict[str, list[float]], rescale: bool = False
) -> dict[str, float]:
    """Mean ``s_i`` (optionally rescaled) over the ``(category, item_scores or None)`` samples whose judgement parsed:
    ``{"score", "n_valid", "n_total"}``."""
    samples = list(samples)
    scores = [hellobench_sample_score(category, items, weights) for category, items in samples if items is not None]
    scores = [hellobench_rescale(s) for s in scores] if rescale else scores
    return {
        "score": sum(scores) / len(scores) if scores else float("nan"),
        "n_valid": len(scores),
        "n_total": len(samples),
    }


# --------------------------------------------------------------------------- repetition / corruption


def rep_n(text: str, n: int = 4) -> float:
    """``1 - distinct n-grams / all n-grams`` over whitespace words (0 for short texts)."""
    words = text.split()
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    return 1.0 - len(set(grams)) / len(grams) if grams else 0.0


def distinct_n(text: str, n: int = 2) -> float:
    """``distinct n-grams / all n-grams`` over whitespace words."""
    return 1.0 - rep_n(text, n) if len(text.split()) >= n else 0.0


def has_consecutive_loop(
    text: str, window: int = 8000, min_unit: int = 10, max_unit: int = 300, repeats: int = 4
) -> bool:
    """A unit of 10-300 characters repeated >= 4 times in a row in the last ``window`` characters (whitespace
    collapsed), the unit holding >= 3 word characters."""
    import numpy as np

    tail = re.sub(r"\s+", " ", text)[-window:]
    codes = np.frombuffer(tail.encode("utf-32-le"), dtype=np.uint32)
    is_word = np.array([c.isalnum() or c == "_" for c in tail], dtype=bool)
    for unit in range(min_unit, min(max_unit, len(tail) // repeats) + 1):
        same = codes[:-unit] == codes[unit:]
        need = (repeats - 1) * unit
        if same.sum() < need:
            continue
        # starts of runs of True of length >= need
        padded = np.concatenate(([False], same, [False]))
        edges = np.flatnonzero(padded[1:] != padded[:-1])
        for start, stop in zip(edges[::2], edges[1::2]):
            if stop - start >= need and is_word[start : start + unit].sum() >= 3:
                return True
    return False


def has_paragraph_cycle(text: str, min_chars: int = 80, min_count: int = 3) -> bool:
    """A whitespace-normalised paragraph of >= ``min_chars`` characters occurring >= ``min_count`` times."""
    paragraphs = [re.sub(r"\s+", " ", p).strip() for p in re.split(r"\n\s*\n|\n", text)]
    counts = Counter(p for p in paragraphs if len(p) >= min_chars)
    return any(c >= min_count for c in counts.values())


def shows_repetition(text: str) -> bool:
    """The text side of the corrupted rule: a consecutive loop or a paragraph cycle."""
    return has_consecutive_loop(text) or has_paragraph_cycle(text)


def is_corrupted(text: str, ended_with_eos: bool) -> bool:
    """Corrupted sample (docs/formulas.md §2): stopped by the token budget (no EOS / finish_reason "length")
    *and* its text shows repetition."""
    return (not ended_with_eos) and shows_repetition(text)


def corrupted_ratio(flags: Sequence[bool]) -> float:
    return sum(flags) / len(flags) if flags else float("nan")


def shared_clean_average(
    values: dict[str, dict[Any, float]], corrupted: dict[str, dict[Any, bool]], threshold: float = 0.2
) -> dict[str, dict[str, float]]:
    """The PIC paper App. A averaging of ``values[model][sample_id]`` given ``corrupted[model][sample_id]``: a model
    with corrupted ratio < ``threshold`` is averaged over the samples clean for all models, else over its own clean.
    Returns per model ``{"shared", "own", "used", "n_used", "corrupted_ratio"}``."""
    shared_ids = set.intersection(*[{i for i, bad in flags.items() if not bad} for flags in corrupted.values()])
    out = {}
    for model, per_sample in values.items():
        flags = corrupted[model]
        ratio = corrupted_ratio(list(flags.values()))
        own_ids = [i for i, bad in flags.items() if not bad]

        def mean(ids: list[Any]) -> float:
            return sum(per_sample[i] for i in ids) / len(ids) if ids else float("nan")  # noqa: B023 (called in this iteration)

        shared, own = mean(sorted(shared_ids, key=str)), mean(own_ids)
        out[model] = {
            "shared": shared,
            "own": own,
            "used": shared if ratio < threshold else own,
            "n_used": len(shared_ids) if ratio < threshold else len(own_ids),
            "corrupted_ratio": ratio,
        }
    return out
