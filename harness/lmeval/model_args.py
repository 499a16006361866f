"""Checks of model args shared by our lm-eval model classes, run before anything is loaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.errors import MissingDataError


def check_model_path(value: Any, arg: str = "pretrained", local: bool = False) -> None:
    """A model arg that names a local folder (``local``, or a path rather than a hub id like ``org/name``)
    must exist."""
    if not isinstance(value, str):
        return
    looks_local = local or value.startswith(("/", ".", "~")) or value.count("/") > 1
    if looks_local and not Path(value).expanduser().exists():
        raise MissingDataError(f"{arg}={value} does not exist: give a model folder or a hub name (offline: "
                               "`lch models fetch NAME`, then pretrained=$(lch models path NAME))")
