"""A model's identity for cache keys: ``sha256:<hex>`` of a local folder's files (not sub-folders, hidden files or
``lch_model.json``; ``transformers_version`` left out of ``config.json`` / ``generation_config.json``), memoised under
``$LCH_CACHE/identities/`` by path and file state; a hub name is its own identity."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from harness.core.cache import cache_root
from harness.core.files import read_json_or_none, write_json_atomic

SKIPPED = {"lch_model.json"}
VERSION_STAMPED = {"config.json", "generation_config.json"}  # JSON with a transformers_version field


def model_identity(name_or_path: str | Path) -> str:
    """``sha256:<hex>`` of a local model folder's content (module docstring); anything else (a hub id) as given."""
    path = Path(str(name_or_path)).expanduser()
    try:
        if not path.is_dir():
            return str(name_or_path)
        files = sorted(
            f for f in path.iterdir() if f.is_file() and f.name not in SKIPPED and not f.name.startswith(".")
        )
        memo = state_memo("identities", [str(path.resolve())], files)
    except OSError:
        return str(name_or_path)
    known = read_json_or_none(memo)
    if isinstance(known, dict) and isinstance(known.get("identity"), str):
        return known["identity"]
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode() + b"\0")
        digest.update(_file_digest(f) + b"\0")
    identity = f"sha256:{digest.hexdigest()}"
    write_json_atomic(memo, {"folder": str(path.resolve()), "identity": identity})
    return identity


def state_memo(kind: str, key: list[Any], files: list[Path]) -> Path:
    """``$LCH_CACHE/<kind>/<hash of key and the inode, size, mtime of files>.json``; OSError if one is unreadable."""
    stats = [(f.name, f.stat()) for f in files]
    state = [*key, *((name, s.st_ino, s.st_size, s.st_mtime_ns) for name, s in stats)]
    return cache_root(kind, hashlib.sha256(json.dumps(state).encode()).hexdigest()[:24] + ".json")


def _file_digest(f: Path) -> bytes:
    if f.name in VERSION_STAMPED:
        try:
            value = json.loads(f.read_text(encoding="utf-8"))
        except ValueError:
            value = None
        if isinstance(value, dict):
            value.pop("transformers_version", None)
            return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).digest()
    return file_sha256(f)


def file_sha256(path: Path) -> bytes:
    """The SHA-256 of a file's bytes, read in blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.digest()
