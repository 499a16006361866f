"""Token length of the prompt lm-eval sends, and the model's max length. lm-eval joins text and ``gen_prefix`` with one
space when neither has whitespace at the join, or renders ``[user: text, assistant: gen_prefix]`` under
``--apply_chat_template``; :class:`PromptCounter` counts the same string (a template's own BOS is not doubled)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from harness.core.errors import UsageError
from harness.core.options import MAX_TOKENS, option
from harness.data.truncation import TruncationOptions
from harness.metrics.context_length import CurveOptions

DEFAULT_MAX_LENGTH = 2048  # lm-eval's HFLM fallback when neither model_args nor the config give one


def _join(text: str, gen_prefix: str) -> str:
    if not gen_prefix:
        return text
    if text and not (text[-1].isspace() or gen_prefix[0].isspace()):
        return f"{text} {gen_prefix}"
    return text + gen_prefix


class PromptCounter:
    """``counter(text, gen_prefix)`` = tokens of the prompt lm-eval builds for that document."""

    def __init__(self, tokenizer: Any, chat_template: bool = False) -> None:
        if chat_template and not getattr(tokenizer, "chat_template", None):
            raise UsageError("chat_template=true but the tokenizer has no chat template")
        self.tokenizer = tokenizer
        self.chat_template = bool(chat_template)

    def render(self, text: str, gen_prefix: str = "") -> str:
        if not self.chat_template:
            return _join(text, gen_prefix)
        messages = [{"role": "user", "content": text}]
        if gen_prefix:
            messages.append({"role": "assistant", "content": gen_prefix})
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=not gen_prefix, continue_final_message=bool(gen_prefix)
        )

    def _special_kwargs(self, rendered: str) -> dict:
        bos = self.tokenizer.bos_token
        return {"add_special_tokens": not (bos and rendered.startswith(bos))}

    def count_rendered(self, rendered: Sequence[str]) -> list[int]:
        """Token counts of already rendered prompts (one batched tokenizer call)."""
        with_special = [i for i, r in enumerate(rendered) if self._special_kwargs(r)["add_special_tokens"]]
        out = [0] * len(rendered)
        for flag, idx in ((True, with_special), (False, sorted(set(range(len(rendered))) - set(with_special)))):
            if idx:
                ids = self.tokenizer([rendered[i] for i in idx], add_special_tokens=flag)["input_ids"]
                for i, row in zip(idx, ids):
                    out[i] = len(row)
        return out

    def __call__(self, text: str, gen_prefix: str = "") -> int:
        return self.count_rendered([self.render(text, gen_prefix)])[0]

    def fingerprint(self) -> str:
        """Hash of everything that changes counts: vocabulary/merges, special-token handling, template."""
        tok = self.tokenizer
        parts = [
            type(tok).__name__,
            _body(tok, len(tok)),
            str(tok.bos_token),
            str(getattr(tok, "add_bos_token", None)),
            str(self.chat_template),
            str(getattr(tok, "chat_template", None) if self.chat_template else None),
        ]
        return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16]


@lru_cache(maxsize=8)
def _body(tokenizer: Any, size: int) -> str:
    """A tokenizer's vocabulary and merges as backend JSON (cached per tokenizer and ``size``: added tokens count)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    return backend.to_str() if backend is not None else json.dumps(sorted(tokenizer.get_vocab().items()))


@dataclass(frozen=True)
class ModelKeys:
    """The model args lm-eval merges into every task's metadata that our tasks read."""

    pretrained: str | None = option(None, "model (model args are merged into the metadata)", cache_key="tokenizer")
    tokenizer: str | None = option(None, "tokenizer (model arg)", cache_key="tokenizer")
    model: str | None = option(None, "model name", cache_key="tokenizer")
    max_length: int | None = option(None, "model max length (model arg)", low=1, high=MAX_TOKENS, cache_key="no")
    max_model_len: int | None = option(None, "vLLM engine length (model arg)", low=1, high=MAX_TOKENS, cache_key="no")


@dataclass(frozen=True)
class PromptOptions(ModelKeys, TruncationOptions, CurveOptions):
    """Options of tasks that fit prompts to a token budget (RULER, BABILong), cut what still does not fit
    (``truncation``) and read per-length scores against a bar (``effective_threshold``)."""

    chat_template: bool | None = option(
        None,
        "fit samples with the chat template counted (default: as the run applies "
        "one, --apply_chat_template); true in a run without the template fits the "
        "very samples of a run with it",
        cache_key="tokenizer",
    )


def tokenizer_name(model: ModelKeys) -> str | None:
    """The tokenizer the model args name: ``tokenizer``, then ``pretrained``, then ``model``; else None."""
    return next((value for value in (model.tokenizer, model.pretrained, model.model) if value), None)


@lru_cache(maxsize=8)
def load_tokenizer(name: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(name)


def counter_for(options: PromptOptions) -> PromptCounter:
    """The :class:`PromptCounter` of the evaluated model, counting the chat template if ``options.chat_template``."""
    name = tokenizer_name(options)
    if name is None:
        raise UsageError(
            "this task sizes prompts in the evaluated model's tokens: pass --model_args "
            "pretrained=<model> (or tokenizer=<name>)"
        )
    return PromptCounter(load_tokenizer(name), bool(options.chat_template))


def model_max_length(model: ModelKeys) -> int:
    """The length lm-eval's HF model truncates to: ``max_length`` / ``max_model_len`` (model args), else the config's
    ``max_position_embeddings`` / ``n_positions`` / ``n_ctx``, else the tokenizer's (if real), else 2048."""
    given = model.max_length or model.max_model_len
    if given:
        return int(given)
    name = model.pretrained or model.model
    if name:
        try:
            from transformers import AutoConfig

            config = AutoConfig.from_pretrained(name)
            for attr in ("max_position_embeddings", "n_positions", "n_ctx"):
                value = getattr(getattr(config, "text_config", config), attr, None)
                if value:
                    return int(value)
        except (OSError, ValueError):
            pass
    name = tokenizer_name(model)
    if name:
        try:
            value = load_tokenizer(name).model_max_length
            if value and value < 1e9:
                return int(value)
        except (OSError, ValueError):
            pass
    return DEFAULT_MAX_LENGTH
