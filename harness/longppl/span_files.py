"""Reference-format key-span files (``[a, b];[c, d];...``, one file per document), as the LongPPL
authors publish them: read and written here, parsed by :func:`harness.longppl.formulas.parse_spans`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.core.files import write_text_atomic
from harness.data.documents import MissingDataError
from harness.longppl.formulas import KeyTokens, format_spans, parse_spans

LAYER = "data"  # harness/devtools/layers.py


def read_span_file(path: str | Path) -> list[list[int]]:
    """Key spans of one reference-format file."""
    return parse_spans(Path(path).read_text(encoding="utf-8"))


def write_span_file(path: str | Path, spans: Sequence[Sequence[int]]) -> None:
    """Write spans in the reference format."""
    write_text_atomic(path, format_spans(spans))


def key_tokens_from_span_files(folder: str | Path, doc_ids: Sequence[int]) -> list[KeyTokens]:
    """Reference-format span files ``<folder>/<doc_id>.txt`` (published key spans of the LongPPL authors)."""
    out = []
    for doc_id in doc_ids:
        path = Path(folder) / f"{doc_id}.txt"
        if not path.exists():
            raise MissingDataError(f"no key-span file {path}: put one '[a, b];[c, d]' file per document there")
        out.append(KeyTokens(read_span_file(path)))
    return out
