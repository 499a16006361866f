"""Parsers for judge replies: the official behaviour first, then fallbacks. None means unparsable."""

from __future__ import annotations

import re

from harness.metrics.generation import LONGBENCH_WRITE_DIMENSIONS, first_literal, parse_checklist_judgement

__all__ = ["parse_checklist_judgement", "parse_longbench_write_judgement"]


def _valid_dimensions(obj: object) -> dict[str, float] | None:
    if not isinstance(obj, dict):
        return None
    try:
        scores = {d: float(obj[d]) for d in LONGBENCH_WRITE_DIMENSIONS}
    except (KeyError, TypeError, ValueError):
        return None
    return scores if all(1.0 <= v <= 5.0 for v in scores.values()) else None


def parse_longbench_write_judgement(raw: str) -> dict[str, float] | None:
    """Six 1-5 dimension scores from a LongBench-Write judge reply.

    Official behaviour: the first ``{...}`` block parsed as JSON with all six dimensions. Fallbacks: the
    widest ``{...}`` block, Python-literal syntax, then ``"Dimension": score`` pairs anywhere in the text.
    """
    blocks = [m.group(0) for m in re.finditer(r"\{.*?\}", raw, flags=re.S)]
    wide = re.search(r"\{.*\}", raw, flags=re.S)
    if wide:
        blocks.append(wide.group(0))
    found = first_literal(blocks, _valid_dimensions)
    if found:
        return found
    pairs = {}
    for dim in LONGBENCH_WRITE_DIMENSIONS:
        m = re.search(re.escape(dim) + r"\W{0,4}\s*(\d(?:\.\d+)?)", raw)
        if m:
            pairs[dim] = m.group(1)
    return _valid_dimensions(pairs)
