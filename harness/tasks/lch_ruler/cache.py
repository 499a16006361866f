"""The on-disk cache of generated RULER rows: ``<cache>/ruler/<task>-<length>-<digest>.jsonl``.

The digest hashes everything the rows depend on (task and its parameters, length, sample count, seed, worked
example, tokenizer and chat-template fingerprint (of the tokenizer as loaded here: its vocabulary, special-token
handling and template), haystack sources, the word lists, :data:`GENERATOR_VERSION`, the depth buckets the niah rows
record), so a hit is always the rows a fresh generation would give, in whichever environment it was generated. The
key's contents and hashing are part of the cache format: changing either orphans every cached file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path
from typing import Any

from harness.core.cache import cache_root
from harness.core.files import entry_lock, sweep_temporaries, write_text_atomic
from harness.data.depth import DEPTH_BUCKETS
from harness.data.haystacks import word_lists_digest
from harness.data.prompts import PromptCounter
from harness.tasks.lch_ruler.builders import Sources
from harness.tasks.lch_ruler.catalogue import GENERATOR_VERSION, TaskSpec


def cache_path(task: str, spec: TaskSpec, length: int, num_samples: int, seed: int, icl: bool,
               counter: PromptCounter, sources: Sources) -> Path:
    """Where the rows of ``generate(task, length, num_samples, counter, seed, sources, icl)`` are cached."""
    key = {"task": task, "spec": spec.params, "length": length, "n": num_samples, "seed": seed, "icl": icl,
           "tokenizer": counter.fingerprint(), "sources": sources.fingerprint(spec), "words": word_lists_digest(),
           "version": GENERATOR_VERSION, "depth_buckets": DEPTH_BUCKETS}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:20]
    return cache_root("ruler", f"{task}-{length}-{digest}.jsonl")


def read_rows(path: Path, expected: int | None = None) -> list[dict[str, Any]] | None:
    """The cached rows at ``path``; None when there are none or the file is not a whole entry (unreadable, a
    line that is not a JSON object, a missing final newline, or not ``expected`` rows: a partial file of a
    writer killed before writes were atomic). A None entry is regenerated and overwritten by the caller."""
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
    """Stores ``rows`` at ``path`` atomically (:func:`harness.core.files.write_text_atomic`): concurrent runs never
    read a partial file, and two runs writing the same rows leave them."""
    sweep_temporaries(path.parent)
    write_text_atomic(path, "".join(json.dumps(r) + "\n" for r in rows))


def rows_lock(path: Path) -> contextlib.AbstractContextManager[bool]:
    """The lock under which one process generates the rows at ``path`` while concurrent ones wait and read them
    (:func:`harness.core.files.entry_lock`; an optimisation, not needed for correctness)."""
    return entry_lock(path)
