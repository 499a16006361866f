"""The one on-disk cache root of the harness: ``$LCH_CACHE``, else ``~/.cache/lch`` (its entries:
docs/on-disk-state.md), and the check of the folder variables a user may set."""

from __future__ import annotations

import os
from pathlib import Path

from harness.core.errors import UsageError

# environment variables that name a folder the harness writes into, and what it holds
FOLDER_VARIABLES = {
    "LCH_CACHE": "the harness's cache (tiny models, key tokens, RULER rows, judge answers)",
    "LCH_MODELS": "the model cache of `lch models`",
    "LCH_VLLM_ENV": "the CPU vLLM environment of `lch vllm-env`",
}


def cache_root(*parts: str) -> Path:
    return Path(os.environ.get("LCH_CACHE", Path.home() / ".cache" / "lch")).expanduser().joinpath(*parts)


def models_root() -> Path:
    """``$LCH_MODELS`` if set, else ``<cache root>/models``: the real models of ``lch models``."""
    env = os.environ.get("LCH_MODELS")
    return Path(env).expanduser() if env else cache_root("models")


def check_folder_variables(environ: dict[str, str] | None = None) -> None:
    """Each set :data:`FOLDER_VARIABLES` names a folder this user can write or make, else :class:`UsageError`."""
    from harness.core.files import writable_problem

    environ = dict(os.environ if environ is None else environ)
    for name, what in FOLDER_VARIABLES.items():
        value = environ.get(name)
        if value is None:
            continue
        if not value.strip():
            raise UsageError(f"${name} is set but empty: unset it or give it a folder ({what})")
        problem = writable_problem(value, folder=True)
        if problem:
            raise UsageError(f"${name}={value}: {problem}; give it a folder you can write ({what})")
