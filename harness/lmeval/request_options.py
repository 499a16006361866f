"""The options of our request types, checked once for every engine that serves them (``hf-pic``,
``vllm-pic``): what a task may put in a request, their defaults and their checks.

* ``token_logprobs``: ``(text, options)`` -> :func:`encode_for_scoring` (``add_special_tokens``,
  ``max_tokens``, ``return_offsets``); response ``{"token_ids": [n], "logprobs": [n-1], "offsets"}``.
* ``lsm``: ``(text, options)`` -> :class:`LsmOptions`; response ``{"sce": [one value per sample]}``.
* ``generate_long``: ``(context, gen_kwargs)``; response ``{"text", "ended_with_eos", "n_tokens"}``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from harness.errors import UsageError
from harness.options import option

TOKEN_LOGPROBS_OPTIONS = ("add_special_tokens", "max_tokens", "return_offsets")
LSM_ESTIMATORS = ("overlap", "direct")


def _unknown(request_type: str, options: dict, known: tuple[str, ...] | set[str]) -> None:
    unknown = set(options) - set(known)
    if unknown:
        raise UsageError(f"{request_type}: unknown options {sorted(unknown)}; known: {', '.join(sorted(known))}")


def encode_for_scoring(tokenizer: Any, text: str, options: dict | None = None) -> dict:
    """``{"token_ids", "offsets"}`` of a ``token_logprobs`` request's text: special tokens as
    ``add_special_tokens`` says (default True: BOS as the tokenizer adds it), the first ``max_tokens``
    tokens (default all), and each token's character span when ``return_offsets`` (default True) and the
    tokenizer is a fast one (``None`` otherwise)."""
    options = dict(options or {})
    _unknown("token_logprobs", options, TOKEN_LOGPROBS_OPTIONS)
    want_offsets = bool(options.get("return_offsets", True)) and bool(getattr(tokenizer, "is_fast", False))
    enc = tokenizer(text, add_special_tokens=bool(options.get("add_special_tokens", True)),
                    return_offsets_mapping=want_offsets)
    ids = list(enc["input_ids"])
    offsets = [list(span) for span in enc["offset_mapping"]] if want_offsets else None
    max_tokens = options.get("max_tokens")
    if max_tokens is not None:
        ids = ids[: int(max_tokens)]
        offsets = offsets[: int(max_tokens)] if offsets is not None else None
    return {"token_ids": ids, "offsets": offsets}


@dataclass(frozen=True)
class LsmOptions:
    """The options of an ``lsm`` request (paper 001): ``context_length`` L (the training context length),
    ``n_samples`` per document, ``seed``, ``estimator`` (``overlap``: paper Sec. 4.2, or ``direct``) and
    ``max_tokens`` (cut the document first; None: all of it). The text is tokenised without special
    tokens (suffix windows start mid-document)."""

    context_length: int = option(4096, "L: the training context length")
    n_samples: int = option(16, "LSM samples per document")
    seed: int = option(0, "random seed of sampling (document i of a task uses seed + i)")
    estimator: str = option("overlap", "LSM estimator: overlap or direct", choices=LSM_ESTIMATORS)
    max_tokens: int | None = option(None, "cut the document to this many tokens first (none: all of it)")

    def __post_init__(self) -> None:
        if self.estimator not in LSM_ESTIMATORS:
            raise UsageError(f"lsm estimator {self.estimator!r} is unknown; allowed: {', '.join(LSM_ESTIMATORS)}")
        if self.context_length < 2 or self.n_samples < 1:
            raise UsageError(f"lsm needs context_length >= 2 and n_samples >= 1, got {self.context_length} and "
                             f"{self.n_samples}")

    @classmethod
    def from_request(cls, options: dict | None) -> "LsmOptions":
        """The options of a request's dict (unknown keys refused; numbers given as strings accepted)."""
        options = dict(options or {})
        _unknown("lsm", options, {f.name for f in fields(cls)})
        try:
            return cls(**{k: (v if k == "estimator" or v is None else int(v)) for k, v in options.items()})
        except (TypeError, ValueError) as err:
            if isinstance(err, UsageError):
                raise
            raise UsageError(f"lsm: bad option value ({err})") from None

    def as_request(self) -> dict:
        """The request's options dict (``max_tokens`` left out when None)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        return {k: v for k, v in out.items() if v is not None}
