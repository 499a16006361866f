"""Training examples of each recipe as ``{"input_ids", "loss_mask"[, "position_ids"]}``, ``loss_mask[t] = 1`` for a
target. Instruction rows use the tokenizer's chat template if any, else ``prompt + "\\n\\n" + answer + EOS``."""

from __future__ import annotations

import random
from typing import Any

from harness.core.errors import DataFormatError, UsageError
from harness.data.instructions import conversation
from harness.train.positions import dynamic_sft_segments


def encode_instruction(
    tokenizer,
    row: dict[str, Any],
    where: str,
    chat_template: bool = True,
    prompt_field: str = "instruction",
    response_field: str = "response",
) -> tuple[list[int], list[int]]:
    """``(prompt ids, answer ids)`` of one instruction row."""
    messages, answer = conversation(row, where, prompt_field, response_field)
    enc = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    if chat_template and getattr(tokenizer, "chat_template", None):
        prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        full = tokenizer.apply_chat_template(messages + [{"role": "assistant", "content": answer}], tokenize=False)
        if not full.startswith(prompt):
            raise DataFormatError(f"{where}: the chat template renders the prompt differently inside the conversation")
        return enc(prompt), enc(full[len(prompt) :])
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    text = "\n\n".join(m["content"] for m in messages)
    return bos + enc(text + "\n\n"), enc(answer) + eos


def dynamic_sft_examples(
    prompt: list[int], answer: list[int], segment_length: int, max_length: int | None = None
) -> list[dict]:
    """Dynamic PIC-SFT (the PIC paper, Fig. 2): one example per answer segment, cut from the end; the input is
    the prompt and every answer token before the segment, the loss covers the segment only."""
    if max_length is not None:
        if len(prompt) >= max_length:
            return []
        answer = answer[: max_length - len(prompt)]
    return [
        {"input_ids": prompt + answer[:end], "loss_mask": [0] * (len(prompt) + start) + [1] * (end - start)}
        for start, end in dynamic_sft_segments(len(answer), segment_length)
    ]


def text_chunks(token_lists: list[list[int]], length: int) -> list[dict]:
    """Non-overlapping chunks of exactly ``length`` tokens (remainders dropped: unpadded batches); loss on all."""
    return [
        {"input_ids": tokens[start : start + length], "loss_mask": [1] * length}
        for tokens in token_lists
        for start in range(0, len(tokens) - length + 1, length)
    ]


def split_heldout(rows: list, fraction: float, seed: int) -> tuple[list, list]:
    """``(train, heldout)``: a seeded split, ``round(fraction * n)`` held out (>= 1 if ``fraction > 0`` and n >= 2)."""
    if fraction <= 0 or len(rows) < 2:
        return list(rows), []
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    n = max(1, int(round(fraction * len(rows))))
    held = set(order[:n])
    return [r for i, r in enumerate(rows) if i not in held], [r for i, r in enumerate(rows) if i in held]


def require(examples: list[dict], what: str) -> list[dict]:
    if not examples:
        raise UsageError(f"no training examples: {what}")
    return examples
