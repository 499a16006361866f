"""The one on-disk cache root of the harness: ``$LCH_CACHE``, else ``~/.cache/lch``.

Sub-folders: tiny models (top level), ``models/`` (real models, see harness.models.registry), ``keytokens/``,
``judge/``, ``downloads/``, ``ruler/``, ``model-checks/`` and ``identities/`` (harness.models.model_check,
harness.models.identity). What each entry depends on across environments: docs/ARCHITECTURE.md, "On-disk state".
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root(*parts: str) -> Path:
    return Path(os.environ.get("LCH_CACHE", Path.home() / ".cache" / "lch")).expanduser().joinpath(*parts)
