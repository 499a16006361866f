"""The on-disk cache of generated RULER rows, ``<cache>/ruler/<task>-<length>-<digest>.jsonl``, keyed by all they depend
on (:func:`cache_key`); the key's contents and hashing are the cache format: changing either orphans every file."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core.cache import cache_root
from harness.core.cache_keys import OMIT, data_key
from harness.core.files import sweep_temporaries, write_text_atomic
from harness.data.depth import DEPTH_BUCKETS
from harness.data.haystacks import word_lists_digest
from harness.data.prompt_tokens import PromptCounter
from harness.tasks.lch_ruler.builders import source_fingerprint
from harness.tasks.lch_ruler.definitions import GENERATOR_VERSION, TASKS

LAYER = "data"  # harness/devtools/layers.py

if TYPE_CHECKING:
    from harness.tasks.lch_ruler.dataset import RulerOptions


def cache_key(options: RulerOptions, length: int, counter: PromptCounter) -> dict[str, Any]:
    """What the rows of ``generate(options, length, counter)`` depend on: every option declared to shape them
    (:func:`harness.core.cache_keys.data_key`; sources by content, the tokenizer by fingerprint), the task's builder
    parameters, the word lists, :data:`GENERATOR_VERSION` and the depth buckets."""
    tokenizer = counter.fingerprint()
    unused = options.unused()
    resolve = {
        "entry": lambda name: length,
        "tokenizer": lambda name: tokenizer,
        "source": lambda name: OMIT if name in unused else source_fingerprint(getattr(options, name)),
    }
    return {
        "options": data_key(options, resolve),
        "spec": TASKS[str(options.ruler_task)].params,
        "words": word_lists_digest(),
        "version": GENERATOR_VERSION,
        "depth_buckets": DEPTH_BUCKETS,
    }


def cache_path(options: RulerOptions, length: int, counter: PromptCounter) -> Path:
    """Where the rows of ``generate(options, length, counter)`` are cached."""
    key = cache_key(options, length, counter)
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:20]
    return cache_root("ruler", f"{options.ruler_task}-{length}-{digest}.jsonl")


def read_rows(path: Path, expected: int | None = None) -> list[dict[str, Any]] | None:
    """The cached rows at ``path``; None when absent or not a whole entry (unreadable, a line not a JSON object, no
    final newline, or not ``expected`` rows), which the caller regenerates and overwrites."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, ValueError):
        return None
    if not text.endswith("\n"):
        return None
    try:
        rows = [json.loads(line) for line in text.splitlines()]
    except ValueError:
        return None
    if not all(isinstance(r, dict) for r in rows) or (expected is not None and len(rows) != expected):
        return None
    return rows


def write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    """Stores ``rows`` at ``path`` atomically, and their counts beside them (:func:`counts_path`)."""
    sweep_temporaries(path.parent)
    write_text_atomic(path, "".join(json.dumps(r) + "\n" for r in rows))
    _write_counts(path, rows)


def counts_path(path: Path) -> Path:
    """Where the counts of the rows cached at ``path`` are kept: each row's ``prompt_tokens`` and ``max_gen_toks``
    (what ``lch plan`` reads, a few bytes a row, instead of the rows: a 128k prompt is half a megabyte)."""
    return path.with_suffix(".counts.json")


def _write_counts(path: Path, rows: list[dict[str, Any]]) -> dict[str, list[int]]:
    counts = {
        "prompt_tokens": [int(r["prompt_tokens"]) for r in rows],
        "max_gen_toks": [int(r["max_gen_toks"]) for r in rows],
    }
    write_text_atomic(counts_path(path), json.dumps(counts))
    return counts


def read_counts(path: Path, expected: int) -> dict[str, list[int]] | None:
    """The counts of the rows cached at ``path``, read from the rows (and written beside them) when missing; None when
    no whole entry of ``expected`` rows is cached."""
    if not path.is_file():
        return None
    try:
        counts = json.loads(counts_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        counts = None
    if isinstance(counts, dict) and all(
        isinstance(counts.get(k), list) and len(counts[k]) == expected for k in ("prompt_tokens", "max_gen_toks")
    ):
        return counts
    rows = read_rows(path, expected)
    return None if rows is None else _write_counts(path, rows)
