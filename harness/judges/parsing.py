"""Parsers for judge replies: the official behaviour first, then fallbacks. None means unparsable."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from harness.metrics.generation import LONGBENCH_WRITE_DIMENSIONS

__all__ = ["parse_checklist_judgement", "parse_longbench_write_judgement"]


def first_literal(candidates: Sequence[str], convert: Callable[[Any], Any]) -> Any:
    """The first ``convert(value)`` that is not None, over candidate texts read as JSON, then as Python
    literals (never executed); a candidate that fails to read or convert is skipped."""
    for text in candidates:
        for loads in (json.loads, ast.literal_eval):
            try:
                found = convert(loads(text))
            except Exception:  # a malformed candidate just moves on to the next reading
                continue
            if found is not None:
                return found
    return None


def parse_checklist_judgement(raw: str, num_checklist: int) -> list[float] | None:
    """Checklist scores from a judge reply, or None: the official parser first (strip code fences, newlines and
    backslashes; a JSON list of ``checklist_id`` / ``evaluation_score`` objects, one score in [0, 1] per item), then the
    first ``[...]`` block, and Python-literal syntax."""
    candidates = [
        raw.replace("```json", "").replace("```python", "").replace("```", "").replace("\n", "").replace("\\", "")
    ]
    match = re.search(r"\[.*\]", raw, flags=re.S)
    if match:
        candidates.append(match.group(0))

    def scores_of(items: Any) -> list[float] | None:
        scores = [float(item["evaluation_score"]) for item in sorted(items, key=lambda d: int(d["checklist_id"]))]
        return scores if len(scores) == num_checklist and all(0.0 <= s <= 1.0 for s in scores) else None

    return first_literal(candidates, scores_of)


def _valid_dimensions(obj: object) -> dict[str, float] | None:
    if not isinstance(obj, dict):
        return None
    try:
        scores = {d: float(obj[d]) for d in LONGBENCH_WRITE_DIMENSIONS}
    except (KeyError, TypeError, ValueError):
        return None
    return scores if all(1.0 <= v <= 5.0 for v in scores.values()) else None


def parse_longbench_write_judgement(raw: str) -> dict[str, float] | None:
    """Six 1-5 dimension scores from a LongBench-Write judge reply, or None: the first ``{...}`` block with all six
    (official), then the widest ``{...}`` block, Python-literal syntax, and ``"Dimension": score`` pairs anywhere."""
    blocks = [m.group(0) for m in re.finditer(r"\{.*?\}", raw, flags=re.S)]
    wide = re.search(r"\{.*\}", raw, flags=re.S)
    if wide:
        blocks.append(wide.group(0))
    found = first_literal(blocks, _valid_dimensions)
    if found:
        return found
    pairs = {dim: re.search(re.escape(dim) + r"\W{0,4}\s*(\d(?:\.\d+)?)", raw) for dim in LONGBENCH_WRITE_DIMENSIONS}
    return _valid_dimensions({dim: m.group(1) for dim, m in pairs.items() if m})
