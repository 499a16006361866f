"""The keyword a KV cache travels under: ``cache`` from transformers 5.24 (every ``forward`` and model output),
``past_key_values`` before (still accepted, with a warning, at the top-level model until 5.40)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from packaging.version import Version

OLD_NAME, NEW_NAME = "past_key_values", "cache"
RENAMED_IN = Version("5.24")


@lru_cache(maxsize=1)
def cache_keyword() -> str:
    """``"cache"`` on transformers >= 5.24, ``"past_key_values"`` before."""
    import transformers

    return NEW_NAME if Version(Version(transformers.__version__).base_version) >= RENAMED_IN else OLD_NAME


def given_cache(kwargs: dict[str, Any]) -> Any:
    """The cache in a forward's keyword arguments under either name (pre-hooks run before the rename shim), or None."""
    cache = kwargs.get(NEW_NAME)
    return cache if cache is not None else kwargs.get(OLD_NAME)


def output_cache(output: Any) -> Any:
    """The cache a model output returns (``output.cache`` from 5.24, ``output.past_key_values`` before)."""
    return getattr(output, cache_keyword())
