"""The one transformers-version guard of PIC: the patches rely on transformers 5.x internals (``rotary_emb``,
``position_embeddings``, the kwargs a decoder hands its attention modules, each modelling file's
``apply_rotary_pos_emb``, ``DynamicLayer``), so :func:`apply_pic` refuses other versions in one line. Widen
:data:`SUPPORTED_TRANSFORMERS` only once tests/pic/test_pic_model.py and test_pic_families.py pass on it."""

from __future__ import annotations

from packaging.version import Version

from harness.core.errors import LchError

# [lowest, first unsupported); the tests pass on 5.0.0, 5.23.0 and 5.24.0
SUPPORTED_TRANSFORMERS = ("5.0", "6.0")


class UnsupportedTransformersError(LchError, RuntimeError):
    """The installed transformers is outside :data:`SUPPORTED_TRANSFORMERS`."""


def check_transformers_version() -> None:
    """Raise :class:`UnsupportedTransformersError` (one line) outside :data:`SUPPORTED_TRANSFORMERS`."""
    import transformers

    installed = transformers.__version__
    low, high = SUPPORTED_TRANSFORMERS
    if not Version(low) <= Version(Version(installed).base_version) < Version(high):  # 6.0.0.dev0 counts as 6.0
        raise UnsupportedTransformersError(
            f"PIC patches support transformers >={low},<{high}; installed: transformers {installed}"
        )
