"""Train a soft-prompt compressor (the EPL paper, Table 8 defaults): pretraining (joint AE + LM) on windows of |X|
tokens drawn from ``[min_length, max_length]``, the first ``floor(|X|/2)`` the context, and QA fine-tuning; AdamW,
betas (0.9, 0.95), constant after warm-up. One sequence per forward (batches accumulate gradients); only the LoRA
adapter, the memory embeddings and [AE] / [LM] train."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import torch
from tqdm import tqdm

from harness.compressor.config import TrainSettings
from harness.core.errors import UsageError
from harness.core.options import flag_name, parse_options

LAYER = "models"  # harness/devtools/layers.py


def pretrain_windows(token_lists: list[list[int]], settings: TrainSettings) -> Iterator[tuple[list[int], list[int]]]:
    """Endless ``(context, completion)`` windows: |X| uniform in [min_length, max_length] (capped by the
    text), context = first floor(|X|/2) tokens."""
    rng = random.Random(settings.seed)
    usable = [t for t in token_lists if len(t) >= 2]
    if not usable:
        raise UsageError("no training text has 2 tokens or more")
    while True:
        tokens = rng.choice(usable)
        size = min(len(tokens), rng.randint(settings.min_length, settings.max_length))
        start = rng.randint(0, len(tokens) - size)
        window = tokens[start : start + size]
        yield window[: size // 2], window[size // 2 :]


def qa_examples(rows: list[dict], tokenizer) -> list[tuple[list[int], list[int], list[int]]]:
    """MRQA rows -> ``(context, question prompt, answer)`` token lists; the prompt is what the ``mrqa``
    tasks put after the context (``"\\n\\nQuestion: ...\\nAnswer:"``), the answer the first gold answer."""
    enc = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    return [
        (enc(r["context"]), enc(f"\n\nQuestion: {r['question']}\nAnswer:"), enc(" " + r["answers"][0])) for r in rows
    ]


def train(
    compressor,
    settings: TrainSettings,
    pretrain_tokens: list[list[int]] | None = None,
    qa: list[tuple[list[int], list[int], list[int]]] | None = None,
    progress: bool = True,
) -> list[float]:
    """Runs ``settings.steps`` optimizer steps; returns the loss of every step."""
    torch.manual_seed(settings.seed)
    lr = settings.lr if settings.lr is not None else (1e-4 if settings.stage == "pretrain" else 5e-5)
    params = [p for p in compressor.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=settings.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / max(1, settings.warmup))
    )
    device = compressor.memory.device
    if settings.stage == "pretrain":
        if not pretrain_tokens:
            raise UsageError("pretraining needs texts")
        windows = pretrain_windows(pretrain_tokens, settings)
    else:  # finetune (TrainSettings allows no other stage)
        if not qa:
            raise UsageError("fine-tuning needs QA examples")
        examples = qa
        rng = random.Random(settings.seed)
    compressor.train()
    losses = []
    for _ in tqdm(range(settings.steps), disable=not progress, desc=f"Compressor {settings.stage}"):
        optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for _ in range(settings.batch_size):
            if settings.stage == "pretrain":
                context, completion = next(windows)
                loss = compressor.loss(
                    torch.tensor(context, device=device), torch.tensor(completion, device=device), alpha=settings.alpha
                )
            else:
                context, question, answer = rng.choice(examples)
                loss = compressor.loss(
                    torch.tensor(context, device=device),
                    question_ids=torch.tensor(question, device=device),
                    answer_ids=torch.tensor(answer, device=device),
                )
            (loss / settings.batch_size).backward()
            total += loss.item() / settings.batch_size
        torch.nn.utils.clip_grad_norm_(params, settings.clip_norm)
        optimizer.step()
        scheduler.step()
        losses.append(total)
    compressor.eval()
    return losses


def train_from_files(
    base: str,
    output: str | Path,
    settings: TrainSettings,
    compressor_args: dict,
    init: str | None = None,
    data_files: str | None = None,
    mrqa_rows: list[dict] | None = None,
    text_field: str = "text",
    dtype: str = "float32",
    device: str = "cpu",
) -> list[float]:
    """``lch train-compressor``: load the base model (and ``init`` checkpoint), train, save to ``output``; fine-tuning
    reads ``mrqa_rows`` (an MRQA file's rows, ``--mrqa-data``)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.compressor.model import Compressor, CompressorConfig
    from harness.data.documents import load_documents
    from harness.models.folders import check_model_folder

    if not isinstance(getattr(torch, dtype, None), torch.dtype):
        raise UsageError(f"lch train-compressor: --dtype {dtype!r} is not a torch dtype (e.g. float32, bfloat16)")
    check_model_folder(base, "--base", tokenizer=True)
    if init:
        check_model_folder(init, "--init")
    parse_options(CompressorConfig, compressor_args, label=flag_name)  # the settings given, before the model loads
    model = AutoModelForCausalLM.from_pretrained(base, dtype=getattr(torch, dtype))
    tokenizer = AutoTokenizer.from_pretrained(base)
    # options given explicitly override the init checkpoint's (e.g. its layout); unset ones keep its values
    compressor = (
        Compressor.load(model, init, **compressor_args)
        if init
        else Compressor(model, CompressorConfig(**compressor_args))
    )
    compressor.to(device)
    pretrain_tokens, qa = None, None
    if settings.stage == "pretrain":
        if data_files:
            texts = [d["text"] for d in load_documents(data_files=data_files, text_field=text_field)]
        else:
            from harness.data.synthetic import synthetic_reports

            texts = synthetic_reports(200, 800, seed=settings.seed)
        pretrain_tokens = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    else:
        if mrqa_rows is None:
            raise UsageError("fine-tuning needs --mrqa-data (an MRQA-format .jsonl file)")
        qa = qa_examples(mrqa_rows, tokenizer)
    losses = train(compressor, settings, pretrain_tokens, qa)
    compressor.save(output)
    return losses
