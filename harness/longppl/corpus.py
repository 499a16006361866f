"""Documents for the LongPPL tasks (docs/formulas.md §3): the first ``num_docs`` with at least ``min_tokens`` tokens of
``length_tokenizer`` (default: the evaluator's, special tokens included), each cut to its first ``max_tokens``."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.core.errors import MissingDataError, UsageError
from harness.core.options import option
from harness.data.documents import DocumentOptions, check_enough_documents, documents_from_options
from harness.data.inputs import Input
from harness.data.token_heads import encode_head
from harness.longppl.formulas import DEFAULT_EVALUATOR

LAYER = "data"  # harness/devtools/layers.py


@dataclass(frozen=True)
class CorpusOptions(DocumentOptions):
    """The documents of a LongPPL task and the evaluator whose tokenizer cuts them."""

    evaluator: str = option(DEFAULT_EVALUATOR, "evaluator model that picks key tokens (HF name or folder)", path=True)
    length_tokenizer: str | None = option(None, "tokenizer that cuts documents (default: the evaluator's)", path=True)

    def inputs(self) -> list[Input]:
        """The documents and the evaluator (its tokenizer cuts them; its model picks the key tokens)."""
        instead = (
            "give a local model folder (offline: `lch models fetch smollm2-135m`, then "
            "evaluator=$(lch models path smollm2-135m))"
        )
        found = super().inputs() + [Input("evaluator", self.evaluator, "hf_model", instead)]
        if self.length_tokenizer:
            found.append(Input("length_tokenizer", self.length_tokenizer, "hf_model", "give a local tokenizer folder"))
        return found


def truncate_by_tokens(text: str, tokenizer: Any, max_tokens: int | None) -> tuple[str, int]:
    """``(text of the first max_tokens tokens, token count)``; a text longer than ``max_tokens`` is not tokenized
    whole, and its count is then some number above ``max_tokens``."""
    head = encode_head(tokenizer, text, max_tokens, return_offsets_mapping=True)
    n = head.count_at_least()
    if max_tokens is None or n <= max_tokens:
        return text, n
    assert head.offsets is not None  # asked for with return_offsets_mapping=True
    return text[: head.offsets[max_tokens - 1][1]], n


def select_documents(
    docs: list[dict[str, Any]], tokenizer: Any, min_tokens: int, max_tokens: int | None, num_docs: int | None
) -> list[dict[str, Any]]:
    """The first ``num_docs`` documents of at least ``min_tokens`` tokens, each cut to ``max_tokens``; each row
    also carries ``n_tokens``, its length after the cut."""
    chosen = []
    for doc in docs:
        text, n = truncate_by_tokens(doc["text"], tokenizer, max_tokens)
        if n >= min_tokens:
            chosen.append({**doc, "text": text, "n_tokens": n if max_tokens is None else min(n, max_tokens)})
            if num_docs is not None and len(chosen) >= num_docs:
                break
    return chosen


def corpus_documents(options: CorpusOptions) -> list[dict[str, Any]]:
    """The selected documents (``doc_id``, ``text``), selected once per process and options; each call gets copies."""
    return [dict(doc) for doc in _selected_corpus(options)]


@lru_cache(maxsize=4)
def _selected_corpus(options: CorpusOptions) -> tuple[dict[str, Any], ...]:
    from harness.data.prompt_tokens import load_tokenizer

    docs = documents_from_options(options)
    key, name = (
        ("length_tokenizer", options.length_tokenizer) if options.length_tokenizer else ("evaluator", options.evaluator)
    )
    if name.startswith(("/", ".", "~")) and not Path(name).expanduser().exists():
        raise MissingDataError(f"{key}={name} does not exist: give the {key} as a model folder or a hub name")
    try:
        length_tok = load_tokenizer(name)
    except OSError:  # transformers' "not a local folder and not a valid model identifier" (offline, unknown)
        default = " (the default evaluator, from the HF hub)" if name == DEFAULT_EVALUATOR else ""
        raise MissingDataError(
            f"the tokenizer of {key}={name}{default} could not be loaded: give the {key} as a "
            "local model folder or a reachable hub name"
        ) from None
    chosen = select_documents(docs, length_tok, options.min_tokens, options.max_tokens, options.num_docs)
    if not chosen:
        raise UsageError(
            f"none of the {len(docs)} documents has {options.min_tokens} tokens or more: lower "
            "min_tokens or give longer documents"
        )
    check_enough_documents(len(chosen), options)
    return tuple(chosen)


def check_key_windows(docs: list[dict[str, Any]], trunc_len: int) -> None:
    """Refuse documents of at most ``trunc_len`` (K) tokens (``n_tokens``): they can hold no key token."""
    short = [d for d in docs if d["n_tokens"] <= trunc_len]
    if short:
        first = short[0]
        raise UsageError(
            f"trunc_len (K) {trunc_len} is at least as long as {len(short)} of the {len(docs)} documents "
            f"(document {first.get('doc_id', 0)}: {first['n_tokens']} tokens): no token of them can be a "
            "key token; give trunc_len (and sliding_window) below the shortest document, or min_tokens "
            "above trunc_len"
        )
