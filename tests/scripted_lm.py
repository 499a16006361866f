"""An lm-eval model for tests of what our tasks do around a model: it renders chat prompts as lm-eval's HF model does
(the tokenizer's template, an answer prefix continued) and answers each request with what ``answer(doc)`` says of its
document (nothing by default), so that prompts, cuts, counts and aggregations are checked without running a network."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lm_eval.api.model import LM


class ScriptedLM(LM):
    def __init__(self, tokenizer: Any, answer: Callable[[dict], str] = lambda doc: "") -> None:
        super().__init__()
        self.tokenizer, self.answer = tokenizer, answer

    @property
    def tokenizer_name(self) -> str:
        return "scripted"

    def chat_template(self, chat_template: bool | str = False) -> str:
        return self.tokenizer.chat_template

    def apply_chat_template(self, chat_history: list[dict], add_generation_prompt: bool = True) -> str:
        return self.tokenizer.apply_chat_template(
            chat_history,
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=not add_generation_prompt,
        )

    def generate_until(self, requests: list, disable_tqdm: bool = False) -> list[str]:
        return [self.answer(request.doc) for request in requests]

    def loglikelihood(self, requests: list, disable_tqdm: bool = False) -> list:
        raise NotImplementedError

    def loglikelihood_rolling(self, requests: list, disable_tqdm: bool = False) -> list:
        raise NotImplementedError
