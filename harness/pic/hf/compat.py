"""The one transformers-version guard of PIC.

PIC relies on how transformers 5.x writes its RoPE decoders, not only on its public API: the decoder's
``rotary_emb`` and the ``position_embeddings`` keyword every attention module takes
(:mod:`harness.pic.hf.rope_layout`), the keyword arguments a decoder hands on to its attention modules
(:mod:`harness.pic.hf.hooks`), each modelling file's ``apply_rotary_pos_emb`` and the cache layer class
that :class:`harness.pic.hf.dynamic.PicLayer` extends. They were written against and tested on the
versions in :data:`SUPPORTED_TRANSFORMERS`; :func:`apply_pic` calls :func:`check_transformers_version`
first, so another version fails at once with a one-line error instead of computing something subtly
different. Widen the range only after running tests/models/test_pic_model.py and
tests/models/test_pic_families.py on the new version.
"""

from __future__ import annotations

from packaging.version import Version

from harness.core.errors import LchError

# [lowest, first unsupported): written against 5.x; the tests pass on 5.0.0, 5.23.0 and 5.24.0 (which renamed
# past_key_values to cache: harness.models.hf_cache).
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
