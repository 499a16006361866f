"""Length honesty's counts: each prompt lm-eval built for a task, by document, in the model's tokenizer."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from typing import Any

from harness.data.prompt_tokens import ModelKeys, PromptCounter

log = logging.getLogger(__name__)


def doc_key(doc: dict) -> str:
    """A document's identity among a task's documents: the SHA-1 of its JSON."""
    return hashlib.sha1(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


class PromptLengths:
    """The prompt counts of one task: :meth:`record` counts the prompt built for a document, :meth:`tokens` gives it
    back (None: not counted; :attr:`counter` is None when the model args name no tokenizer)."""

    def __init__(self, task: str | None, model_keys: ModelKeys) -> None:
        self.task, self.model_keys = task, model_keys
        self._tokens: dict[str, int] = {}

    @functools.cached_property
    def counter(self) -> PromptCounter | None:
        """The counter in the evaluated model's tokenizer, loaded on first use (None: no tokenizer named)."""
        from harness.data.prompt_tokens import load_tokenizer, tokenizer_name

        name = tokenizer_name(self.model_keys)
        if name is None:
            log.warning("%s: no tokenizer in the model args, so prompt lengths are not reported", self.task)
            return None
        return PromptCounter(load_tokenizer(name))

    def record(self, doc: dict, ctx: Any) -> None:
        """Count the prompt lm-eval built for ``doc`` (a string; other contexts are not prompts of ours)."""
        if isinstance(ctx, str) and self.counter is not None:
            self._tokens[doc_key(doc)] = self.counter.count_rendered([ctx])[0]

    def tokens(self, doc: dict) -> int | None:
        """The tokens of the prompt recorded for ``doc`` (None: not counted)."""
        return self._tokens.get(doc_key(doc))
