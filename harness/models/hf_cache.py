"""The keyword transformers passes a KV cache under, across the versions we support.

transformers 5.24 renamed the ``past_key_values`` argument of every model, decoder layer and attention
``forward`` (and the field of model outputs) to ``cache``; the old name is still accepted at the top-level
model, with a deprecation warning, until 5.40. Code that reads the cache out of a module's keyword
arguments (the PIC pre-hooks) or passes one in (the compressor) goes through these two helpers, so it
works on both sides of the rename and never warns.
"""

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
    """The cache in a forward call's keyword arguments under either name (a pre-hook runs before the
    deprecation shim renames the old one), or None."""
    cache = kwargs.get(NEW_NAME)
    return cache if cache is not None else kwargs.get(OLD_NAME)


def output_cache(output: Any) -> Any:
    """The cache a model output returns (``output.cache`` from 5.24, ``output.past_key_values`` before)."""
    return getattr(output, cache_keyword())
