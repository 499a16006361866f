"""``lch train <recipe>``: build the recipe's examples, train with transformers' ``Trainer`` (LoRA or full) at the
inference the variant expects (PIC and RoPE base applied as ``hf-pic`` does), save weights, variant file, loss log."""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from transformers import PrinterCallback, Trainer, TrainerCallback, TrainingArguments

from harness.core.errors import DataFormatError, UsageError
from harness.core.files import append_line, staged_files, write_json_atomic
from harness.pic.hf import apply_pic, set_rope_base
from harness.pic.variants import Variant, read_variant, write_variant
from harness.train.batches import collate
from harness.train.config import TrainConfig, check_config, expected_inference, trains_in_segments
from harness.train.examples import (
    dynamic_sft_examples,
    encode_instruction,
    require,
    split_heldout,
    text_chunks,
)
from harness.train.heldout import heldout_loss, heldout_warning
from harness.train.losses import longce_loss, lsm_regularized_loss, masked_nll

LOSS_LOG = "loss_log.jsonl"
SUMMARY = "training_summary.json"


def recipe_loss(cfg: TrainConfig) -> Callable[[Any, dict], tuple[torch.Tensor, dict[str, float]]]:
    """The recipe's training loss on a collated batch: ``(loss, parts to log)``."""
    if cfg.recipe == "longce":
        return lambda model, b: (
            longce_loss(model, b["input_ids"], cfg.short_context, cfg.sliding_window, cfg.gamma),
            {},
        )
    if cfg.recipe == "lsm-reg":
        return lambda model, b: lsm_regularized_loss(model, b["input_ids"], cfg.context_length, cfg.delta, cfg.lam)

    def ce(model, b):
        total, count = masked_nll(model, b["input_ids"], b["attention_mask"], b["loss_mask"], b["position_ids"])
        return total / count.clamp(min=1), {}

    return ce


class RecipeTrainer(Trainer):
    """``Trainer`` whose loss is the recipe's; extra loss parts (e.g. ``ce`` / ``misalign``) are logged."""

    def __init__(self, *args: Any, loss_fn: Callable, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.loss_fn = loss_fn
        self._parts: dict[str, list[float]] = {}

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        loss, parts = self.loss_fn(model, inputs)
        for k, v in parts.items():
            self._parts.setdefault(k, []).append(float(v))
        return (loss, None) if return_outputs else loss

    def log(self, logs: dict[str, float], *args: Any, **kwargs: Any) -> None:
        if "loss" in logs:
            logs.update({k: sum(values) / len(values) for k, values in self._parts.items()})
            self._parts = {}
        super().log(logs, *args, **kwargs)


class VariantCallback(TrainerCallback):
    """Writes the loss log line by line, and the variant file into every checkpoint."""

    def __init__(self, output: Path, variant: Variant):
        self.output, self.variant = output, variant

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs and state.is_world_process_zero:
            append_line(self.output / LOSS_LOG, json.dumps({"step": state.global_step, "epoch": state.epoch, **logs}))

    def on_save(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            write_variant(self.output / f"checkpoint-{state.global_step}", self.variant)


def read_losses(path: Path) -> list[float]:
    """The logged losses at ``path`` (none when it is missing); unreadable lines are skipped."""
    if not path.exists():
        return []
    losses = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            losses.append(json.loads(line)["loss"])
        except (ValueError, KeyError, TypeError):
            continue
    return losses


def load_model(cfg: TrainConfig):
    """The model (eval mode, as loaded, at its own RoPE base) and tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.models.folders import check_model_folder

    dtype = getattr(torch, cfg.dtype, None)
    if not isinstance(dtype, torch.dtype):
        raise UsageError(f"--dtype {cfg.dtype!r} is not a torch dtype (float32, bfloat16, float16)")
    check_model_folder(cfg.model, "--model", tokenizer=True)
    model = AutoModelForCausalLM.from_pretrained(cfg.model, dtype=dtype)
    if torch.cuda.is_available():  # this process's GPU (under `accelerate launch`, one per process)
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        model.to(device)  # type: ignore[arg-type]  # transformers' @wraps(nn.Module.to) types it as unbound
    tokenizer = AutoTokenizer.from_pretrained(cfg.model)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def add_adapter(model, cfg: TrainConfig):
    if cfg.full:
        return model
    from peft import LoraConfig, PeftModel, get_peft_model

    if getattr(cfg, "init", None):  # LongRecipe's replay stage continues an adapter
        return PeftModel.from_pretrained(model, cfg.init, is_trainable=True)
    targets = [t.strip() for t in cfg.lora_targets.split(",") if t.strip()]
    return get_peft_model(
        model,
        LoraConfig(
            r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=0.0, target_modules=targets, task_type="CAUSAL_LM"
        ),
    )


def build_examples(cfg: TrainConfig, tokenizer, model) -> tuple[list[dict], list[dict], dict]:
    """``(train, heldout, summary)`` examples (rows split before cutting); ``model`` at its own RoPE base."""
    from harness.data.documents import load_documents
    from harness.data.instructions import load_rows

    info: dict[str, Any] = {}
    if cfg.recipe in ("sft", "pic-sft"):
        rows = load_rows(cfg.data, cfg.split)
        train_rows, held_rows = split_heldout(list(range(len(rows))), cfg.heldout, cfg.seed)

        def make(indices: list[int]) -> list[dict]:
            out = []
            for i in indices:
                prompt, answer = encode_instruction(
                    tokenizer, rows[i], f"{cfg.data} row {i}", cfg.chat_template, cfg.prompt_field, cfg.response_field
                )
                # plain SFT: one segment, the whole answer (cut at its end to fit --max-length)
                segment = cfg.segment_length if trains_in_segments(cfg) else max(1, len(answer))
                out += dynamic_sft_examples(prompt, answer, segment, cfg.max_length)
            return out

        train, held = make(train_rows), make(held_rows)
        info.update(rows=len(rows), heldout_rows=len(held_rows))
        return require(train, f"{cfg.data} gave no instruction example (prompts longer than --max-length?)"), held, info

    if Path(cfg.data).expanduser().exists():
        texts = [d["text"] for d in load_documents(data_files=cfg.data, text_field=cfg.text_field)]
    else:
        rows = load_rows(cfg.data, cfg.split)
        if any(not isinstance(r.get(cfg.text_field), str) for r in rows):
            raise DataFormatError(f"{cfg.data}: rows need a text field {cfg.text_field!r} (use --text-field)")
        texts = [r[cfg.text_field] for r in rows]
    train_texts, held_texts = split_heldout(texts, cfg.heldout, cfg.seed)
    info.update(rows=len(texts), heldout_rows=len(held_texts))
    enc = lambda ts: [tokenizer(t, add_special_tokens=False)["input_ids"][: cfg.max_length] for t in ts]  # noqa: E731
    if cfg.recipe == "lsm-reg":
        length = cfg.context_length + cfg.delta
    elif cfg.recipe == "longce" or cfg.stage == "replay":
        length = cfg.seq_len
    else:
        return longrecipe_split(cfg, tokenizer, model, train_texts, held_texts, info)
    train, held = text_chunks(enc(train_texts), length), text_chunks(enc(held_texts), length)
    return require(train, f"no text in {cfg.data} has {length} tokens (lower --seq-len / --context-length)"), held, info


def longrecipe_split(cfg: TrainConfig, tokenizer, model, train_texts, held_texts, info) -> tuple[list, list, dict]:
    """LongRecipe's examples: impactful tokens of H vs H' (``--extended-model``, else the base at ``--rope-base``)."""
    from harness.train.impactful import document_logits, longrecipe_examples, tokenized_documents

    train_docs = tokenized_documents(tokenizer, train_texts, cfg.max_length)
    held_docs = tokenized_documents(tokenizer, held_texts, cfg.max_length)
    docs = train_docs + held_docs
    train_length = cfg.train_length or max(2, int(0.3 * cfg.target_length))  # the LongRecipe paper: 30 % of L^
    base_logits = document_logits(model, docs, "Impactful tokens (base H)", cfg.progress)
    if cfg.extended_model:
        from transformers import AutoModelForCausalLM

        extended = AutoModelForCausalLM.from_pretrained(cfg.extended_model, dtype=next(model.parameters()).dtype)
        extended_logits = document_logits(
            extended.to(next(model.parameters()).device), docs, "Impactful tokens (extended H')", cfg.progress
        )
        del extended
    else:  # H' = the model at the extended base (which it then trains at)
        set_rope_base(model, cfg.rope_base)
        extended_logits = document_logits(model, docs, "Impactful tokens (extended H')", cfg.progress)
    n = len(train_docs)
    common = dict(
        train_length=train_length,
        target_length=cfg.target_length,
        max_skip=cfg.max_skip,
        fraction=cfg.top_fraction,
        seed=cfg.seed,
    )
    train, summary = longrecipe_examples(train_docs, base_logits[:n], extended_logits[:n], **common)
    held, _ = longrecipe_examples(
        held_docs, base_logits[n:], extended_logits[n:], anchors=summary.pop("anchors"), **common
    )
    info.update(summary, train_length=train_length)
    return require(train, "no LongRecipe example (no sentence with an impactful token fits --train-length)"), held, info


def train_recipe(cfg: TrainConfig) -> dict[str, Any]:
    """Run ``lch train``; returns (and writes as ``training_summary.json``) what happened."""
    cfg = check_config(cfg)
    output = Path(cfg.output).expanduser()
    has_checkpoint = any(output.glob("checkpoint-*"))
    if output.exists() and not cfg.resume and (has_checkpoint or (output / LOSS_LOG).exists()):
        raise UsageError(f"{output} holds an earlier training run: add --resume to continue it, or pick a new --output")
    init_variant = read_variant(cfg.init) if getattr(cfg, "init", None) else None  # only longrecipe has --init
    if init_variant is not None and cfg.rope_base is None:
        cfg.rope_base = init_variant.inference.rope_base
    torch.manual_seed(cfg.seed)
    model, tokenizer = load_model(cfg)
    train, held, info = build_examples(cfg, tokenizer, model)
    if cfg.rope_base is not None:
        set_rope_base(model, cfg.rope_base)
    model = add_adapter(model, cfg)
    inference = expected_inference(cfg)
    if inference.entry.acts:
        apply_pic(model, inference)  # the RoPE base is the model's already (set above)
    variant = Variant(base_model=cfg.model, recipe=cfg.recipe, settings=cfg.settings(), inference=inference)
    if init_variant is not None:
        variant.settings["init"] = {"path": cfg.init, "recipe": init_variant.recipe}
    pad_id = tokenizer.pad_token_id
    before = heldout_loss(model, held, pad_id, cfg.batch_size, cfg.progress)
    output.mkdir(parents=True, exist_ok=True)
    args = TrainingArguments(
        output_dir=str(output),
        per_device_train_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.grad_accum,
        learning_rate=cfg.default("lr"),
        warmup_steps=cfg.default("warmup"),
        num_train_epochs=cfg.default("epochs"),
        max_steps=cfg.max_steps,
        weight_decay=cfg.default("weight_decay"),
        adam_beta1=cfg.default("betas")[0],
        adam_beta2=cfg.default("betas")[1],
        logging_steps=cfg.log_steps,
        save_steps=cfg.save_steps,
        save_total_limit=2,
        report_to="none",
        remove_unused_columns=False,
        seed=cfg.seed,
        disable_tqdm=not cfg.progress,
        use_cpu=not torch.cuda.is_available(),
        bf16=cfg.dtype == "bfloat16" and torch.cuda.is_available(),
        dataloader_num_workers=0,
    )
    trainer = RecipeTrainer(
        model=model,
        args=args,
        train_dataset=train,
        data_collator=lambda rows: collate(rows, pad_id),
        loss_fn=recipe_loss(cfg),
        callbacks=[VariantCallback(output, variant)],
    )
    if not cfg.progress:  # --quiet: no per-step dicts on stdout either (the loss log keeps them)
        trainer.remove_callback(PrinterCallback)
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=True if cfg.resume and has_checkpoint else None)
    seconds = time.perf_counter() - start
    after = heldout_loss(model, held, pad_id, cfg.batch_size, cfg.progress)

    if trainer.is_world_process_zero():
        with staged_files(output) as staged:  # each final file appears whole; the variant file last marks it done
            model.save_pretrained(str(staged))  # the adapter, or the full model (PIC patches are never saved)
            tokenizer.save_pretrained(str(staged))
        write_variant(output, variant)
    losses = read_losses(output / LOSS_LOG)
    summary = {
        "recipe": cfg.recipe,
        "variant": variant.describe(),
        "output": str(output),
        "train_examples": len(train),
        "heldout_examples": len(held),
        "data": info,
        "steps": trainer.state.global_step,
        "train_seconds": round(seconds, 2),
        "steps_per_second": round(trainer.state.global_step / seconds, 4) if seconds else None,
        "train_loss": result.training_loss,
        "first_logged_loss": losses[0] if losses else None,
        "last_logged_loss": losses[-1] if losses else None,
        "heldout_loss_before": before,
        "warning": heldout_warning(before, after),
        "heldout_loss_after": after if after is None or math.isfinite(after) else None,  # JSON has no NaN
        "peak_memory_gb": round(torch.cuda.max_memory_allocated() / 2**30, 3) if torch.cuda.is_available() else None,
    }
    if trainer.is_world_process_zero():
        write_json_atomic(output / SUMMARY, summary, indent=2)
    return summary
