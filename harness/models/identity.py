"""What a model is, for the keys of caches that depend on it: a digest of a local folder's content, or the hub name.

A model named by its path is not a model: the same path can hold a rebuilt folder (a stale fetch replaced, a
checkpoint saved again), and two environments can hold different files under one name. Caches whose entries
depend on a model's outputs (key tokens, response caches) are keyed by :func:`model_identity` instead.

The digest covers every file of the folder (not sub-folders) except ``lch_model.json`` (provenance: fetch time and
converter versions) and hidden files; in ``config.json`` / ``generation_config.json`` the ``transformers_version``
field is left out, so the same model converted by two transformers versions has one identity. Hashing a 1 GB
folder takes about a second; it is remembered under ``$LCH_CACHE/identities/`` by the path and the state (inode,
size, modification time) of every file, so it runs once per folder state.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from harness.core.cache import cache_root
from harness.core.files import read_json_or_none, write_json_atomic

SKIPPED = {"lch_model.json"}
VERSION_STAMPED = {"config.json", "generation_config.json"}  # JSON with a transformers_version field


def model_identity(name_or_path: str | Path) -> str:
    """``sha256:<hex>`` of the content of a local model folder (see the module docstring); a name that is not a
    local folder (a hub id) is its own identity."""
    path = Path(str(name_or_path)).expanduser()
    try:
        if not path.is_dir():
            return str(name_or_path)
        files = sorted(f for f in path.iterdir() if f.is_file() and f.name not in SKIPPED and not f.name.startswith("."))
        state = [str(path.resolve())] + [(f.name, *_stat(f)) for f in files]
    except OSError:
        return str(name_or_path)
    memo = cache_root("identities", hashlib.sha256(json.dumps(state).encode()).hexdigest()[:24] + ".json")
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


def _stat(f: Path) -> tuple[int, int, int]:
    s = f.stat()
    return s.st_ino, s.st_size, s.st_mtime_ns


def _file_digest(f: Path) -> bytes:
    if f.name in VERSION_STAMPED:
        try:
            value = json.loads(f.read_text(encoding="utf-8"))
        except ValueError:
            value = None
        if isinstance(value, dict):
            value.pop("transformers_version", None)
            return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).digest()
    digest = hashlib.sha256()
    with f.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.digest()
