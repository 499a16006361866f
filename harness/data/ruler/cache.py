"""The on-disk cache of generated RULER rows: ``<cache>/ruler/<task>-<length>-<digest>.jsonl``.

The digest hashes everything the rows depend on (task and its parameters, length, sample count, seed, worked
example, tokenizer and chat-template fingerprint, haystack sources, :data:`GENERATOR_VERSION`), so a hit is
always the rows a fresh generation would give. The key's contents and hashing are part of the cache format:
changing either orphans every cached file.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

from harness.cache import cache_root
from harness.data.prompt_length import PromptCounter
from harness.data.ruler.builders import Sources
from harness.data.ruler.catalogue import GENERATOR_VERSION, TaskSpec


def cache_path(task: str, spec: TaskSpec, length: int, num_samples: int, seed: int, icl: bool,
               counter: PromptCounter, sources: Sources) -> Path:
    """Where the rows of ``generate(task, length, num_samples, counter, seed, sources, icl)`` are cached."""
    key = {"task": task, "spec": spec.params, "length": length, "n": num_samples, "seed": seed, "icl": icl,
           "tokenizer": counter.fingerprint(), "sources": sources.fingerprint(spec), "version": GENERATOR_VERSION}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:20]
    return cache_root("ruler", f"{task}-{length}-{digest}.jsonl")


def read_rows(path: Path) -> list[dict[str, Any]] | None:
    """The cached rows at ``path``, or None when there are none."""
    if not path.is_file():
        return None
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    """Stores ``rows`` at ``path`` atomically (write a temporary file, then rename): concurrent runs never
    read a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{random.randrange(1 << 30)}")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    tmp.replace(path)
