"""The one on-disk cache root of the harness: ``$LCH_CACHE``, else ``~/.cache/lch``.

Sub-folders: tiny models (top level), ``models/`` (real models, see harness.models.registry), ``keytokens/``,
``judge/``, ``downloads/``, ``ruler/``.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root(*parts: str) -> Path:
    return Path(os.environ.get("LCH_CACHE", Path.home() / ".cache" / "lch")).expanduser().joinpath(*parts)
