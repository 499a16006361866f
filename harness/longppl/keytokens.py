"""Key tokens computed once per (evaluator, text, K, d, alpha, beta, short_start) and evaluator dtype, cached on disk
(the evaluator by its folder's content digest, a hub name, or ``evaluator_id``) and loaded only on a miss; reference
span files (:mod:`harness.longppl.span_files`) can replace the evaluator."""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from harness.core.cache import cache_root
from harness.core.errors import UsageError
from harness.core.files import entry_lock, read_json_or_none, sweep_temporaries, write_json_atomic
from harness.core.options import option
from harness.longppl.formulas import KEY_TOKEN_DEFAULTS, KeySettings, KeyTokens, count_key_tokens
from harness.models.identity import model_identity

LAYER = "models"  # harness/devtools/layers.py

if TYPE_CHECKING:
    from harness.longppl.corpus import CorpusOptions


@dataclass(frozen=True)
class KeyTokenOptions(KeySettings):
    """How key tokens are found (:class:`KeySettings`) and where cached; the evaluator is named by ``CorpusOptions``."""

    key_spans_dir: str | None = option(
        None, "folder of reference key-span files instead of an evaluator", path=True, flag=False
    )
    key_cache_dir: str | None = option(
        None, "key-token cache folder (default ~/.cache/lch/keytokens)", location=True, flag="--cache-dir"
    )
    evaluator_id: str | None = option(None, "cache identity of the evaluator", flag=False)
    evaluator_dtype: str = option("auto", "evaluator dtype")
    evaluator_device: str | None = option(None, "evaluator device")


def default_cache_dir() -> Path:
    return cache_root("keytokens")


def cache_key(
    evaluator_id: str,
    text: str,
    trunc_len: int,
    sliding_window: int,
    alpha: float,
    beta: float,
    short_start: str = KEY_TOKEN_DEFAULTS["short_start"],
    dtype: str = "auto",
) -> str:
    """The entry of one text's key tokens: the evaluator's identity and dtype, the text, the settings."""
    fields = {
        "evaluator": evaluator_id,
        "dtype": dtype,
        "text": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "trunc_len": int(trunc_len),
        "sliding_window": int(sliding_window),
        "alpha": float(alpha),
        "beta": float(beta),
        "format": 2,
    }
    if short_start != KEY_TOKEN_DEFAULTS["short_start"]:  # keys cached before the option stay valid
        fields["short_start"] = short_start
    payload = json.dumps(fields, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


class KeyTokenCache:
    """Folder of ``<cache_key>.json`` :class:`KeyTokens`, shared by concurrent processes: written atomically, an
    unreadable entry is a miss; :meth:`lock` lets concurrent runs compute an entry once (correctness never needs it)."""

    def __init__(self, folder: str | Path | None = None):
        self.folder = Path(folder) if folder else default_cache_dir()
        self._swept = False

    def _path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def get(self, key: str) -> KeyTokens | None:
        value = read_json_or_none(self._path(key))
        try:
            return KeyTokens.from_json(value) if value is not None else None
        except (KeyError, TypeError, ValueError):  # valid JSON of another shape: a miss, overwritten
            return None

    def put(self, key: str, value: KeyTokens) -> None:
        if not self._swept:  # once per cache object: temporaries of writers killed hours ago
            sweep_temporaries(self.folder)
            self._swept = True
        write_json_atomic(self._path(key), value.to_json())

    def lock(self, key: str) -> contextlib.AbstractContextManager[bool]:
        """:func:`harness.core.files.entry_lock` of the entry ``key``."""
        return entry_lock(self._path(key))


def load_evaluator(name: str, dtype: str = "auto", device: str | None = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of an evaluator given by HF name or local path, in eval mode."""
    import torch
    from transformers import AutoModelForCausalLM

    from harness.data.prompt_tokens import load_tokenizer
    from harness.models.folders import check_model_folder

    # a local folder: whole (its tokenizer too), and (fetched ones) meaning what its source says
    check_model_folder(name, "evaluator", tokenizer=True)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch_dtype = dtype if dtype == "auto" else getattr(torch, dtype)
    from harness.models.attention import use_blocked_masks

    # transformers types PreTrainedModel.to through a wrapper whose signature takes the model, not a device
    model = AutoModelForCausalLM.from_pretrained(name, dtype=torch_dtype).to(device).eval()  # type: ignore[arg-type]
    use_blocked_masks(model)
    return model, load_tokenizer(name)


def key_tokens_for_texts(
    texts: Sequence[str],
    evaluator: str | tuple[Any, Any],
    settings: KeySettings = KeySettings(),
    cache: KeyTokenCache | None = None,
    evaluator_id: str | None = None,
    loader: Callable[[str], tuple[Any, Any]] = load_evaluator,
    dtype: str = "auto",
) -> list[KeyTokens]:
    """Key tokens of every text, from the cache where possible (the evaluator runs only on misses). ``evaluator``: a
    name / path (``loader`` loads it in ``dtype``) or a ``(model, tokenizer)`` pair, which needs ``evaluator_id``."""
    if evaluator_id is None:
        if not isinstance(evaluator, str):
            raise UsageError("pass evaluator_id when the evaluator is given as a (model, tokenizer) pair")
        evaluator_id = model_identity(evaluator)  # a local folder's content digest, else the hub name
    cache = cache or KeyTokenCache()
    trunc_len, sliding_window = settings.trunc_len, settings.sliding_window
    values = settings.settings()  # K, d, alpha, beta, short_start by name: cache_key's and find_key_tokens' keywords
    entries = [cache_key(evaluator_id, text, **values, dtype=dtype) for text in texts]
    results = [cache.get(entry) for entry in entries]
    missing = [i for i, found in enumerate(results) if found is None]
    if missing:
        # imported here: the task classes read KeyTokenOptions without importing torch
        from harness.longppl.estimator import find_key_tokens, passes

        if isinstance(evaluator, str):
            from harness.core.costs import record_helper

            record_helper(evaluator, dtype)  # what the run held beside its model (lch plan --against)
        model, tokenizer = loader(evaluator) if isinstance(evaluator, str) else evaluator
        # progress in forward passes, so the bar moves within a long document (minutes of windows on a CPU)
        counts = {i: passes(len(tokenizer(texts[i])["input_ids"]), trunc_len, sliding_window) for i in missing}
        description = f"Finding key tokens ({len(missing)} documents)"
        with tqdm(total=sum(counts.values()), unit="window", desc=description) as bar:
            for i in missing:
                with cache.lock(entries[i]):
                    found = cache.get(entries[i])  # a concurrent run may have computed it while we waited
                    if found is None:
                        found = find_key_tokens(texts[i], model, tokenizer, **values, progress=bar.update)
                        cache.put(entries[i], found)
                    else:
                        bar.update(counts[i])
                results[i] = found
    return results  # type: ignore[return-value]


def key_tokens_cached(texts: Sequence[str], evaluator: str, options: KeyTokenOptions) -> bool:
    """Whether the key tokens of every text are at hand without running the evaluator: read from reference span
    files (``key_spans_dir``), or each in the cache as :func:`attach_key_tokens` would look it up."""
    if options.key_spans_dir:
        return True
    evaluator_id = options.evaluator_id or model_identity(evaluator)
    cache, values = KeyTokenCache(options.key_cache_dir), options.settings()
    return all(
        cache.get(cache_key(evaluator_id, text, **values, dtype=options.evaluator_dtype)) is not None for text in texts
    )


def attach_key_tokens(docs: list[dict[str, Any]], evaluator: str, options: KeyTokenOptions) -> list[dict[str, Any]]:
    """``docs`` with ``key_json`` (the :class:`KeyTokens` as JSON): from reference span files when
    ``key_spans_dir`` is set, else from ``evaluator`` (cached)."""
    from harness.longppl.span_files import key_tokens_from_span_files

    if options.key_spans_dir:
        keys = key_tokens_from_span_files(options.key_spans_dir, [d["doc_id"] for d in docs])
    else:
        keys = key_tokens_for_texts(
            [d["text"] for d in docs],
            evaluator,
            options,  # a KeySettings: K, d, alpha, beta, short_start
            cache=KeyTokenCache(options.key_cache_dir),
            evaluator_id=options.evaluator_id,
            loader=lambda name: load_evaluator(name, options.evaluator_dtype, options.evaluator_device),
            dtype=options.evaluator_dtype,
        )
    return [{**d, "key_json": json.dumps(k.to_json())} for d, k in zip(docs, keys)]


@dataclass(frozen=True)
class KeyTokenCorpus:
    """The documents of a LongPPL task with their key tokens (``key_json``) and each one's key-token count."""

    docs: list[dict[str, Any]]
    key_counts: list[int]


def key_token_corpus(corpus: CorpusOptions, keys: KeyTokenOptions) -> KeyTokenCorpus:
    """The one way to a LongPPL corpus: documents selected, windows checked against their lengths (not for span files),
    key tokens attached (cached); no key token in any document is refused in one line."""
    from harness.longppl.corpus import check_key_windows, corpus_documents

    docs = corpus_documents(corpus)
    if not keys.key_spans_dir:
        check_key_windows(docs, keys.trunc_len)
    docs = attach_key_tokens(docs, corpus.evaluator, keys)
    counts = [count_key_tokens(KeyTokens.from_json(json.loads(d["key_json"]))) for d in docs]
    if not sum(counts):
        raise UsageError(
            f"the evaluator {corpus.evaluator} found no key token in any of the {len(docs)} documents "
            f"(trunc_len {keys.trunc_len}, sliding_window {keys.sliding_window}, alpha {keys.alpha}, "
            f"beta {keys.beta}): LongPPL would rest on nothing; give longer documents or lower trunc_len"
        )
    return KeyTokenCorpus(docs, counts)
