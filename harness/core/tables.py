"""Tables as text, the one writer of every report and listing: Markdown (``| a | b |`` over ``|---|---:|``), text
aligned in columns, CSV (the csv module's) and HTML. pytablewriter (installed with lm-eval) was tried and not taken:
its Markdown pads every cell to its column's width (unpadded, its rule row has no dashes) and types the cells itself,
and its HTML has no place for a cell's own attributes (the leaderboard's sort keys and tooltips)."""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any


def markdown(head: Sequence[Any], rows: Iterable[Sequence[Any]], right: Collection[int] = ()) -> list[str]:
    """The lines of a Markdown table: the head, its rule (``---:`` under the columns numbered in ``right``, which are
    right-aligned, ``---`` under the others) and a line per row; ``|`` in a cell is written ``\\|``."""

    def line(cells: Iterable[Any]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    rule = "|" + "".join("---:|" if i in right else "---|" for i in range(len(head)))
    return [line(head), rule, *(line(cells) for cells in rows)]


def aligned(rows: Sequence[Sequence[str]], right: Collection[int] = ()) -> list[str]:
    """``rows`` (the head first) as lines of text in columns two spaces apart, those numbered in ``right`` flush
    right, the others flush left; no trailing spaces."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))] if rows else []
    return [
        "  ".join(t.rjust(w) if i in right else t.ljust(w) for i, (t, w) in enumerate(zip(r, widths))).rstrip()
        for r in rows
    ]


def csv_text(head: Sequence[Any], rows: Iterable[Sequence[Any] | Mapping[str, Any]]) -> str:
    """CSV with ``\\n`` line ends: the head, then a line per row (a sequence, or a mapping keyed by the head)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(head)
    writer.writerows([r.get(c, "") for c in head] if isinstance(r, Mapping) else r for r in rows)
    return out.getvalue()


def html_table(head: Sequence[str], rows: Iterable[Sequence[str | tuple[str, Mapping[str, str]]]]) -> str:
    """``<table>`` with a ``<thead>`` and a ``<tbody>``; a cell is its text, or ``(text, {attribute: value})``; text and
    values escaped."""

    def cell(c: str | tuple[str, Mapping[str, str]]) -> str:
        text, attributes = (c, {}) if isinstance(c, str) else c
        extra = "".join(f" {k}='{html.escape(v, quote=True)}'" for k, v in attributes.items())
        return f"<td{extra}>{html.escape(text)}</td>"

    head_cells = "".join(f"<th>{html.escape(c)}</th>" for c in head)
    body = "".join("<tr>" + "".join(map(cell, r)) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head_cells}</tr></thead><tbody>{body}</tbody></table>"
