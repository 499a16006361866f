"""Our request types, each declared once in :data:`REQUESTS`: name, options dataclass, response ``TypedDict`` and the
lm-eval ``output_type`` it stands in for. Args are ``(text, options dict)`` (JSON: lm-eval's cache key), built by
:meth:`RequestType.arguments` and read by :meth:`RequestType.parse` (unknown options and bad values refused in one
line); :func:`check_response` holds a response against its shape."""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Generic, TypedDict, TypeVar, Union

from harness.core.errors import UsageError
from harness.core.options import MAX_SAMPLES, MAX_SEED, MAX_TOKENS, check_domains, convert, option
from harness.data.token_heads import encode_head

LSM_ESTIMATORS = ("overlap", "direct")

O = TypeVar("O", bound="RequestOptions")


class RequestOptions:
    """Base of our requests' frozen options dataclasses. :meth:`as_request` sends, in field order and never as None,
    the fields in ``ALWAYS_SENT``, those a request stated (:meth:`of`) and any other not at its default."""

    ALWAYS_SENT: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def of(cls: type[O], **values: Any) -> O:
        """The options a request states: ``values`` given as None are absent (the default applies); the
        others are sent even when they equal the default."""
        given = {k: v for k, v in values.items() if v is not None}
        made = cls(**given)
        object.__setattr__(made, "_stated", frozenset(given))  # not a field: equality ignores it
        return made

    def as_request(self) -> dict:
        """The request's options dict (tuples as lists: JSON)."""
        stated: frozenset[str] = getattr(self, "_stated", frozenset())
        out = {}
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if value is not None and (f.name in self.ALWAYS_SENT or f.name in stated or value != f.default):
                out[f.name] = list(value) if isinstance(value, tuple) else value
        return out


# ---------------------------------------------------------------------------------------------- options


@dataclass(frozen=True)
class ScoringOptions(RequestOptions):
    """The options of a ``token_logprobs`` request (offsets need a fast tokenizer)."""

    # field order is part of the cache key (the JSON of the dict): do not reorder
    max_tokens: int | None = option(None, "keep the first N tokens (none: all)", low=1, high=MAX_TOKENS)
    add_special_tokens: bool = option(True, "tokenise with the tokenizer's special tokens (BOS)")
    return_offsets: bool = option(True, "each token's character span (fast tokenizers)")


@dataclass(frozen=True)
class LsmOptions(RequestOptions):
    """The options of an ``lsm`` request (the LSM paper); the text is tokenised without special tokens."""

    ALWAYS_SENT: ClassVar[tuple[str, ...]] = ("context_length", "n_samples", "seed", "estimator")

    context_length: int = option(4096, "L: the training context length", low=2, high=MAX_TOKENS)
    n_samples: int = option(16, "LSM samples per document", low=1, high=MAX_SAMPLES)
    seed: int = option(0, "random seed of sampling (document i of a task uses seed + i)", low=0, high=MAX_SEED)
    estimator: str = option("overlap", "LSM estimator: overlap or direct", choices=LSM_ESTIMATORS)
    max_tokens: int | None = option(
        None, "cut the document to this many tokens first (none: all of it)", low=1, high=MAX_TOKENS
    )

    def __post_init__(self) -> None:
        check_domains(self, lambda name: f"lsm {name}")  # also when built from a request, not --metadata

    @classmethod
    def from_request(cls, options: Mapping[str, Any] | None) -> LsmOptions:
        """The options of a request's dict (unknown keys refused; numbers given as strings accepted)."""
        return LSM.parse_options(options)


@dataclass(frozen=True)
class LongGenerationOptions(RequestOptions):
    """The options of a ``generate_long`` request: greedy unless ``do_sample``; a stop string ends it as EOS does."""

    ALWAYS_SENT: ClassVar[tuple[str, ...]] = ("max_gen_toks", "do_sample")

    max_gen_toks: int | None = option(
        None, "generation budget in tokens (none: the engine's max_gen_toks)", low=1, high=MAX_TOKENS
    )
    do_sample: bool = option(False, "sample instead of greedy decoding")
    temperature: float = option(0.8, "sampling temperature (with do_sample)", low=0.0)
    top_p: float = option(1.0, "nucleus sampling mass (with do_sample)", low=0.0, high=1.0)
    until: tuple[str, ...] = option((), "stop strings")


@dataclass(frozen=True)
class CompressRequestOptions(RequestOptions):
    """The options of a ``compress_ae`` / ``compress_lm`` request: the text's first ``max_tokens`` tokens
    (None: all) are split in half, context then completion."""

    ALWAYS_SENT: ClassVar[tuple[str, ...]] = ("max_tokens",)

    max_tokens: int | None = option(None, "|X|: tokens of the text (none: all)", low=1, high=MAX_TOKENS)


# ---------------------------------------------------------------------------------------------- responses


class TokenLogprobsResponse(TypedDict):
    """``logprobs[i] = log P(token_ids[i+1] | token_ids[:i+1])`` (n - 1 values for n tokens); ``offsets``:
    ``[start, end]`` per token, None without ``return_offsets`` or a fast tokenizer."""

    token_ids: list[int]
    logprobs: list[float]
    offsets: list[list[int]] | None


class LsmResponse(TypedDict):
    """One SCE value per LSM sample."""

    sce: list[float]


class LongGenerationResponse(TypedDict):
    """The generated text; ``ended_with_eos``: False when the token budget ended it (a stop string counts
    as an end); ``n_tokens``: tokens generated, the EOS not counted."""

    text: str
    ended_with_eos: bool
    n_tokens: int


class ReconstructionResponse(TypedDict):
    """``compress_ae``: the context as text and the compressor's greedy reconstruction of it."""

    reference: str
    prediction: str


class CompletionResponse(TypedDict):
    """``compress_lm``: per-token log-probabilities of the completion given the context's memory."""

    logprobs: list[float]


# ---------------------------------------------------------------------------------------------- declarations


@dataclass(frozen=True)
class RequestType(Generic[O]):
    """One request type: lm-eval calls the model's method ``name`` with args ``(text, options.as_request())``, each
    answer a ``response``; ``output_type`` is the lm-eval type our tasks declare to pass its config validation."""

    name: str
    options: type[O]
    response: type
    output_type: str

    def arguments(self, text: str, options: O | None = None) -> tuple[str, dict]:
        """The ``Instance`` arguments of one request (``options`` None: all defaults)."""
        if options is not None and not isinstance(options, self.options):
            raise TypeError(f"{self.name} takes {self.options.__name__}, got {type(options).__name__}")
        return (text, (options if options is not None else self.options()).as_request())

    def parse(self, args: Sequence[Any]) -> tuple[str, O]:
        """``(text, options)`` of a request's args ``(text,)`` or ``(text, options dict)``."""
        if not 1 <= len(args) <= 2 or not isinstance(args[0], str):
            raise UsageError(f"{self.name}: a request's args are (text, options), got {len(args)} args")
        return args[0], self.parse_options(args[1] if len(args) > 1 else None)

    def parse_options(self, options: Mapping[str, Any] | None) -> O:
        """The options dataclass of a request's dict: unknown keys refused, values converted to the fields'
        types (numbers given as strings accepted); the keys given count as stated (:meth:`RequestOptions.of`)."""
        options = dict(options or {})
        known = {f.name for f in fields(self.options)}  # type: ignore[arg-type]
        unknown = set(options) - known
        if unknown:
            raise UsageError(f"{self.name}: unknown options {sorted(unknown)}; known: {', '.join(sorted(known))}")
        hints = typing.get_type_hints(self.options)
        try:
            return self.options.of(**{k: _coerce(v, hints[k], f"{self.name}: option {k}") for k, v in options.items()})
        except (TypeError, ValueError) as err:
            if isinstance(err, UsageError):
                raise
            raise UsageError(f"{self.name}: bad option value ({err})") from None

    def check_response(self, value: Any) -> None:
        """Raise ValueError naming what is wrong when ``value`` is not of the declared response shape."""
        hints = typing.get_type_hints(self.response)
        if not isinstance(value, dict) or set(value) != set(hints):
            keys = sorted(value) if isinstance(value, dict) else type(value).__name__
            raise ValueError(f"{self.name} response needs keys {sorted(hints)}, got {keys}")
        for key, tp in hints.items():
            if not _matches(value[key], tp):
                raise ValueError(f"{self.name} response: {key} is not {tp}")


TOKEN_LOGPROBS: RequestType[ScoringOptions] = RequestType(
    "token_logprobs", ScoringOptions, TokenLogprobsResponse, "loglikelihood_rolling"
)
LSM: RequestType[LsmOptions] = RequestType("lsm", LsmOptions, LsmResponse, "loglikelihood_rolling")
GENERATE_LONG: RequestType[LongGenerationOptions] = RequestType(
    "generate_long", LongGenerationOptions, LongGenerationResponse, "generate_until"
)
COMPRESS_AE: RequestType[CompressRequestOptions] = RequestType(
    "compress_ae", CompressRequestOptions, ReconstructionResponse, "loglikelihood_rolling"
)
COMPRESS_LM: RequestType[CompressRequestOptions] = RequestType(
    "compress_lm", CompressRequestOptions, CompletionResponse, "loglikelihood_rolling"
)

REQUESTS: dict[str, RequestType[Any]] = {
    r.name: r for r in (TOKEN_LOGPROBS, LSM, GENERATE_LONG, COMPRESS_AE, COMPRESS_LM)
}


def check_response(kind: str, value: Any) -> None:
    """Raise ValueError when ``value`` is not a response of request type ``kind`` (:data:`REQUESTS`)."""
    REQUESTS[kind].check_response(value)


def encode_for_scoring(tokenizer: Any, text: str, options: ScoringOptions | Mapping[str, Any] | None = None) -> dict:
    """``{"token_ids", "offsets"}`` of a ``token_logprobs`` request's text under :class:`ScoringOptions`
    (a dict is parsed first): offsets are None unless asked for and the tokenizer is a fast one."""
    if not isinstance(options, ScoringOptions):
        options = TOKEN_LOGPROBS.parse_options(options)
    want_offsets = options.return_offsets and bool(getattr(tokenizer, "is_fast", False))
    # with max_tokens, only the text's head is tokenized (harness.data.token_heads): the ids of the whole text, cut
    head = encode_head(
        tokenizer,
        text,
        options.max_tokens,
        add_special_tokens=options.add_special_tokens,
        return_offsets_mapping=want_offsets,
    )
    return {"token_ids": head.ids, "offsets": head.offsets}


# ---------------------------------------------------------------------------------------------- helpers


def _coerce(value: Any, tp: Any, name: str) -> Any:
    """A request value as its field's type (:func:`harness.core.options.convert`), except one stop string, which
    stays whole as a 1-tuple (stop strings may hold commas, which the list rule would split on)."""
    if value is None:
        return None
    if isinstance(value, str) and typing.get_origin(tp) is tuple:
        return (value,)
    return convert(value, tp, name)


def _matches(value: Any, tp: Any) -> bool:
    """Whether a JSON-like value has type ``tp`` (None, bool, int, float, str, list[...], unions)."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return any(_matches(value, member) for member in typing.get_args(tp))
    if tp is type(None):
        return value is None
    if origin is list:
        return isinstance(value, list) and all(_matches(v, typing.get_args(tp)[0]) for v in value)
    if tp in (int, float) and isinstance(value, bool):  # a bool is an int to isinstance, not a number here
        return False
    return isinstance(value, (int, float) if tp is float else tp)
