"""LongRecipe training examples (the LongRecipe paper): impactful-token analysis with two models, then sentences
at transformed position ids."""

from __future__ import annotations

import random
from typing import cast

import torch
from torch import nn
from tqdm import tqdm

from harness.metrics.impactful import anchor_types, select_sentences, sentence_ranges
from harness.models.head import finish_logits
from harness.models.unwrap import unwrap_model
from harness.train.positions import auto_max_skip, skip_positions


@torch.no_grad()
def actual_token_logits(model: nn.Module, ids: list[int]) -> torch.Tensor:
    """``S(x_t | x_<t)``, the unnormalised logit of the actual next token, for ``t = 1 .. n-1`` (float32
    ``[n-1]``); one row of the LM head per target, never ``[tokens x vocab]`` logits."""
    base = unwrap_model(model)
    device = cast(torch.Tensor, base.get_input_embeddings().weight).device  # the weight (a Module per torch's typing)
    x = torch.tensor([ids], device=device)
    hidden = base.get_decoder()(
        input_ids=x,
        attention_mask=torch.ones_like(x),
        position_ids=torch.arange(len(ids), device=device)[None],
        use_cache=False,
    ).last_hidden_state
    head = base.get_output_embeddings()
    rows = head.weight[x[0, 1:]]
    logits = (hidden[0, :-1].float() * rows.float()).sum(-1)
    if getattr(head, "bias", None) is not None:
        logits = logits + head.bias[x[0, 1:]].float()
    return finish_logits(base.config, logits)


def tokenized_documents(
    tokenizer, texts: list[str], max_tokens: int | None = None
) -> list[tuple[list[int], list[str]]]:
    """``(ids, token texts)`` per text (no special tokens, first ``max_tokens``); texts under 2 tokens dropped."""
    docs = []
    for text in texts:
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids, offsets = enc["input_ids"][:max_tokens], enc["offset_mapping"][:max_tokens]
        if len(ids) >= 2:
            docs.append((list(ids), [text[s:e] for s, e in offsets]))
    return docs


def document_logits(
    model: nn.Module, docs: list[tuple[list[int], list[str]]], desc: str, progress: bool = True
) -> list[torch.Tensor]:
    """:func:`actual_token_logits` of every document (one forward each)."""
    return [actual_token_logits(model, ids) for ids, _ in tqdm(docs, disable=not progress, desc=desc)]


def longrecipe_examples(
    docs: list[tuple[list[int], list[str]]],
    base_logits: list[torch.Tensor],
    extended_logits: list[torch.Tensor],
    train_length: int,
    target_length: int,
    max_skip: int | None,
    fraction: float = 0.2,
    seed: int = 0,
    anchors: dict[int, float] | None = None,
) -> tuple[list[dict], dict]:
    """``(examples, summary with "anchors")``: per document its sentences with impactful tokens (``delta_t =
    |S_H'(x_t) - S_H(x_t)|``) up to ``train_length`` tokens, spread over ``target_length`` by skips ``0..M`` drawn per
    example (``M``: :func:`~harness.train.positions.auto_max_skip` if None). Given ``anchors``: no analysis."""
    if anchors is None:
        deltas = [[0.0] + (ext - base).abs().tolist() for base, ext in zip(base_logits, extended_logits)]
        anchors = anchor_types([(ids, d) for (ids, _), d in zip(docs, deltas)], fraction)
    rng = random.Random(seed)
    examples, skips, kept_tokens = [], [], 0
    for ids, token_texts in docs:
        sentences = [ids[s:e] for s, e in sentence_ranges(token_texts)]
        chosen = [sentences[i] for i in select_sentences(sentences, anchors, train_length)]
        lengths = [len(s) for s in chosen]
        m = auto_max_skip(lengths, target_length) if max_skip is None else max_skip
        kept, positions = skip_positions(lengths, m, target_length, rng)
        tokens = [t for s in chosen[:kept] for t in s]
        if len(tokens) < 2:
            continue
        examples.append({"input_ids": tokens, "loss_mask": [1] * len(tokens), "position_ids": positions})
        skips.append(m)
        kept_tokens += len(tokens)
    return examples, {
        "anchor_types": len(anchors),
        "examples": len(examples),
        "tokens": kept_tokens,
        "max_skip": skips,
        "anchors": anchors,
    }
