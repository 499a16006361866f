"""The one transformers-version guard of the PIC patches, and every transformers internal they use.

The patches rely on how transformers' Llama-family code is written, not only on its public API: the
attention forward that :mod:`harness.models.pic.attention` replaces, the cache layer class that
:class:`harness.models.pic.dynamic.PicLayer` extends, the rotary embedding's attributes. They were
written against and tested on the versions in :data:`SUPPORTED_TRANSFORMERS`; :func:`apply_pic` calls
:func:`check_transformers_version` first, so another version fails at once with a one-line error
instead of computing something subtly different. Widen the range only after running
tests/models/test_pic_model.py on the new version (and reading the diff of ``modeling_llama.py``,
``modeling_mistral.py``, ``modeling_qwen2.py`` and ``cache_utils.py``).
"""

from __future__ import annotations

from typing import Any, Callable

from packaging.version import Version

from harness.errors import LchError

# [lowest, first unsupported): written against 5.x; the tests pass on 5.0.0 and 5.23.0.
SUPPORTED_TRANSFORMERS = ("5.0", "6.0")


class UnsupportedTransformersError(LchError, RuntimeError):
    """The installed transformers is outside :data:`SUPPORTED_TRANSFORMERS`."""


def supported_range() -> str:
    low, high = SUPPORTED_TRANSFORMERS
    return f">={low},<{high}"


def check_transformers_version() -> None:
    """Raise :class:`UnsupportedTransformersError` (one line) outside :data:`SUPPORTED_TRANSFORMERS`."""
    import transformers

    installed = transformers.__version__
    low, high = (Version(v) for v in SUPPORTED_TRANSFORMERS)
    if not low <= Version(Version(installed).base_version) < high:  # 6.0.0.dev0 counts as 6.0
        raise UnsupportedTransformersError(
            f"PIC patches support transformers {supported_range()}; installed: transformers {installed}"
        )


def attention_function(config: Any, default: Callable) -> Callable:
    """The attention kernel the model is configured with (sdpa, eager, flash, ...), as its own forward
    looks it up (``get_interface`` appeared during 5.x; before, a plain lookup)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    name = config._attn_implementation
    if hasattr(ALL_ATTENTION_FUNCTIONS, "get_interface"):
        return ALL_ATTENTION_FUNCTIONS.get_interface(name, default)
    return default if name == "eager" else ALL_ATTENTION_FUNCTIONS[name]


def eager_attention() -> Callable:
    from transformers.models.llama.modeling_llama import eager_attention_forward

    return eager_attention_forward


def rope_init_function(rotary: Any) -> Callable[..., tuple[Any, float]]:
    """The function that built ``rotary.inv_freq`` (the model's own, so rope types such as llama3 keep working)."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    if rotary.rope_type == "default":
        return rotary.compute_default_rope_parameters
    return ROPE_INIT_FUNCTIONS[rotary.rope_type]
