"""Long-document loaders: rows ``{"doc_id": int, "text": str}`` from local ``data_files`` (``.jsonl`` / ``.json`` rows
with ``text_field``, a ``.txt`` as one document, or a folder of such files in sorted order), else an HF dataset."""

from __future__ import annotations

import contextlib
import json
import logging
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.cache import cache_root
from harness.core.errors import DataFormatError, MissingDataError, UsageError, missing_data_on_error
from harness.core.files import write_bytes_atomic
from harness.core.options import MAX_SAMPLES, MAX_TOKENS, option
from harness.data.inputs import Input

__all__ = ["DocumentOptions", "MissingDataError", "load_documents", "local_or_download", "read_json", "read_jsonl"]


def _read_local(path: Path, text_field: str) -> list[str]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in (".jsonl", ".json", ".txt"))
        return [text for f in files for text in _read_local(f, text_field)]
    if path.suffix == ".txt":
        return [read_text(path)]
    if path.suffix in (".jsonl", ".json"):
        rows = read_json(path) if path.suffix == ".json" else read_jsonl(path)
        if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
            raise DataFormatError(f"{path}: expected a JSON list of objects with field {text_field!r}")
        missing = [i for i, row in enumerate(rows) if text_field not in row]
        if missing:
            raise UsageError(f"{path}: row {missing[0]} has no field {text_field!r}")
        return [row[text_field] for row in rows]
    raise UsageError(f"{path}: unsupported file type {path.suffix!r} (use .jsonl, .json or .txt)")


def load_documents(
    data_files: str | None = None,
    text_field: str = "text",
    hf_dataset: str | None = None,
    hf_name: str | None = None,
    hf_split: str = "test",
) -> list[dict[str, Any]]:
    """Documents from local ``data_files`` if given, else from the HF dataset ``hf_dataset``."""
    if data_files:
        path = Path(data_files).expanduser()
        if not path.exists():
            raise MissingDataError(f"data_files={path} does not exist: put the documents there")
        texts = _read_local(path, text_field)
    elif hf_dataset:
        import datasets

        with missing_data_on_error(
            f"could not load HF dataset {hf_dataset!r} split {hf_split!r}",
            f'download it to the HF cache, or pass --metadata \'{{"data_files": "<file.jsonl '
            f"with field {text_field!r}>\"}}'",
        ):
            ds = datasets.load_dataset(hf_dataset, hf_name, split=hf_split)
        texts = list(ds[text_field])
    else:
        raise UsageError("load_documents needs data_files or hf_dataset")
    return [{"doc_id": i, "text": t} for i, t in enumerate(texts)]


HF_SOURCE_OPTIONS = ("hf_dataset", "hf_name", "hf_split")  # not read when data_files names local documents


@dataclass(frozen=True)
class DocumentOptions:
    """Where a document task's texts come from and which are scored; defaults: GovReport, docs/formulas.md §3."""

    data_files: str | None = option(None, "local .jsonl / .json / .txt file or folder of documents", path=True)
    text_field: str = option("report", "field of the documents' text")
    hf_dataset: str = option("ccdv/govreport-summarization", "HF dataset of the documents (when no data_files)")
    hf_name: str | None = option(None, "HF dataset configuration")
    hf_split: str = option("test", "HF dataset split")
    min_tokens: int = option(
        16384, "documents shorter than this are skipped (counted in docs_skipped; 0: none)", low=0, high=MAX_TOKENS
    )
    max_tokens: int | None = option(
        32767, "documents are cut to this many tokens (none: whole documents)", low=1, high=MAX_TOKENS
    )
    num_docs: int | None = option(50, "number of documents (none: all)", low=1, high=MAX_SAMPLES)
    allow_fewer_docs: bool = option(
        False,
        "go on when fewer than num_docs documents are long enough (the results "
        "count them); by default that is an error",
        measures=False,
    )

    def unused(self) -> set[str]:
        """Options not read: the HF ones with ``data_files``, and ``text_field`` when those are ``.txt`` only."""
        if not self.data_files:
            return set()
        out = set(HF_SOURCE_OPTIONS)
        path = Path(self.data_files).expanduser()
        texts = [path] if path.is_file() else sorted(path.iterdir()) if path.is_dir() else []
        if texts and all(p.suffix not in (".json", ".jsonl") for p in texts):
            out.add("text_field")
        return out

    def inputs(self) -> list[Input]:
        """The documents (:mod:`harness.data.inputs`): ``data_files``, else the HF dataset."""
        if self.data_files:
            return [
                Input(
                    "data_files",
                    self.data_files,
                    "path",
                    "give data_files= an existing .txt / .jsonl file or folder of documents",
                )
            ]
        return [
            Input(
                "hf_dataset",
                self.hf_dataset,
                "hf_dataset",
                "download it to the HF cache, or pass "
                "data_files=<a .txt / .jsonl file or folder of long texts> (e.g. a folder of essays)",
            )
        ]

    def __post_init__(self) -> None:
        # a scored document keeps min_tokens after the cut, so a cut below the minimum leaves nothing to score
        if self.max_tokens is not None and self.max_tokens < self.min_tokens:
            raise UsageError(
                f"max_tokens {self.max_tokens} is below min_tokens {self.min_tokens}: no "
                "document could be both long enough and cut that short; give max_tokens >= min_tokens"
            )


def check_enough_documents(found: int, options: DocumentOptions) -> None:
    """Fewer than ``num_docs`` documents ``found`` is a :class:`UsageError`, a warning with ``allow_fewer_docs``."""
    asked = options.num_docs
    if asked is None or found >= asked:
        return
    what = f"only {found} of the {asked} documents asked for (num_docs) have {options.min_tokens} tokens or more"
    if not options.allow_fewer_docs:
        raise UsageError(
            f"{what}: give more long documents, lower min_tokens or num_docs, or pass "
            "allow_fewer_docs=true to score those found"
        )
    logging.getLogger("harness.data").warning("%s: the scores rest on %d (allow_fewer_docs)", what, found)


# whole documents (max_tokens none) longer than this are refused before tokenizing (about MAX_TOKENS of English)
MAX_WHOLE_DOCUMENT_CHARS = 40_000_000


def documents_from_options(options: DocumentOptions) -> list[dict[str, Any]]:
    """:func:`load_documents` of the options' source without documents of no text (they keep their ``doc_id``; a corpus
    of nothing else is refused); with ``max_tokens`` none, one over :data:`MAX_WHOLE_DOCUMENT_CHARS` is refused."""
    docs = load_documents(
        data_files=options.data_files,
        text_field=options.text_field,
        hf_dataset=options.hf_dataset,
        hf_name=options.hf_name,
        hf_split=options.hf_split,
    )
    bad = next((d for d in docs if not isinstance(d["text"], str)), None)
    if bad is not None:
        raise DataFormatError(
            f"document {bad['doc_id']}: field {options.text_field!r} holds "
            f"{str(bad['text'])[:40]!r} ({type(bad['text']).__name__}), not text; give text"
        )
    kept = [d for d in docs if d["text"].strip()]
    if docs and not kept:
        raise UsageError(
            f"none of the {len(docs)} documents could be scored: each is empty or only whitespace; "
            "give documents with text"
        )
    if len(kept) < len(docs):
        logging.getLogger("harness.data").warning(
            "%d of the %d documents are empty or only whitespace: left out", len(docs) - len(kept), len(docs)
        )
    if options.max_tokens is None:
        huge = next((d for d in kept if len(d["text"]) > MAX_WHOLE_DOCUMENT_CHARS), None)
        if huge is not None:
            raise UsageError(
                f"document {huge['doc_id']} has {len(huge['text']):,} characters: whole documents "
                f"(max_tokens none) are limited to {MAX_WHOLE_DOCUMENT_CHARS:,} characters; give "
                "max_tokens (only that many tokens of each document are then read)"
            )
    return kept


def select_long(
    docs: Iterable[dict[str, Any]], count_tokens: Callable[[str], int], min_tokens: int, max_docs: int | None
) -> list[dict[str, Any]]:
    """The first ``max_docs`` documents with at least ``min_tokens`` tokens, in order."""
    chosen = []
    for doc in docs:
        if count_tokens(doc["text"]) >= min_tokens:
            chosen.append(doc)
            if max_docs is not None and len(chosen) >= max_docs:
                break
    return chosen


def download_cache(url: str) -> Path:
    """Where :func:`local_or_download` keeps the file of ``url``."""
    return cache_root("downloads", url.split("/")[-1])


def downloaded_input(option_name: str, path: str | None, url: str) -> Input:
    """The :class:`~harness.data.inputs.Input` of :func:`local_or_download`'s file: ``path`` if given, else ``url``."""
    if path:
        return Input(option_name, path, "path", f"give {option_name}= an existing file")
    return Input(
        option_name, url, "download", f"fetch it and pass {option_name}=<its path>", cached=download_cache(url)
    )


_NO_DOWNLOADS = False


@contextlib.contextmanager
def no_downloads() -> Iterator[None]:
    """Within it :func:`local_or_download` downloads nothing: a file not at hand is a :class:`MissingDataError`."""
    global _NO_DOWNLOADS
    before, _NO_DOWNLOADS = _NO_DOWNLOADS, True
    try:
        yield
    finally:
        _NO_DOWNLOADS = before


def local_or_download(path: str | None, url: str, what: str) -> Path:
    """``path`` if given (must exist), else ``url`` downloaded once into the cache (not within :func:`no_downloads`)."""
    if path:
        local = Path(path).expanduser()
        if not local.is_file():
            raise MissingDataError(f"{what}: {local} does not exist")
        return local
    cached = download_cache(url)
    if not cached.is_file() and _NO_DOWNLOADS:
        raise MissingDataError(f"{what}: not downloaded yet ({url})")
    if not cached.is_file():
        try:
            with urllib.request.urlopen(url, timeout=60) as reply:
                data = reply.read()
        except OSError as err:
            raise MissingDataError(
                f"{what}: could not download {url} ({type(err).__name__}); fetch it and pass its path"
            ) from err
        write_bytes_atomic(cached, data)  # concurrent downloaders each rename the same bytes in
    return cached


def read_text(path: str | Path) -> str:
    """A UTF-8 text file's text; a file that is not UTF-8 (binary) is a :class:`DataFormatError` naming it."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise DataFormatError(f"{path}: not UTF-8 text (byte {err.start}: {err.reason}); give a text file") from None


def read_json(path: str | Path) -> Any:
    """A JSON file, or a :class:`DataFormatError` naming the file and where it stops being JSON."""
    path = Path(path)
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as err:
        raise DataFormatError(
            f"{path}: not valid JSON ({err.msg} at line {err.lineno}); fix or replace the file"
        ) from None


def read_jsonl(path: str | Path, what: str = "JSON Lines") -> list[dict[str, Any]]:
    """Rows of a JSON Lines file (blank lines skipped); a line not a JSON object is a :class:`DataFormatError`."""
    path = Path(path)
    rows = []
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataFormatError(
                f"{path}:{number}: not {what} ({err.msg}); each line must be one JSON object"
            ) from None
        if not isinstance(row, dict):
            raise DataFormatError(f"{path}:{number}: not {what} (a {type(row).__name__}, not a JSON object)")
        rows.append(row)
    return rows
