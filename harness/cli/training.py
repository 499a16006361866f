"""``lch train <recipe>`` (trained variants: PIC-SFT, LongCE, LSM-regularised, LongRecipe; ``merge``) and
``lch train-compressor`` (paper 003's soft-prompt compressors)."""

from __future__ import annotations

import argparse

RECIPE_HELP = {
    "pic-sft": "SFT with Position ID Compression (paper 000): --pic naive|ntk|dynamic, or none for plain SFT",
    "sft": "plain SFT on instruction data (the control of PIC-SFT)",
    "longce": "LongCE (paper 004): CE re-weighted by the model's own long-context gain",
    "lsm-reg": "CE + lambda * long-short misalignment (paper 001)",
    "longrecipe": "LongRecipe (paper 002): impactful sentences at skip positions; --stage replay; then `merge`",
}


def add(sub: argparse._SubParsersAction) -> None:
    add_train(sub)
    # Defaults (None here) come from CompressorConfig / TrainSettings (paper 003, Table 8), not repeated.
    trainer = sub.add_parser("train-compressor", help="pretrain (AE+LM) or fine-tune (QA) a soft-prompt compressor",
                             description="Unset options take paper 003's values (Table 8; L 510, |M| 102, LoRA 128/256) "
                                         "or, with --init, the checkpoint's.")
    trainer.add_argument("--base", required=True, help="base HF model (name or folder)")
    trainer.add_argument("--output", required=True, help="checkpoint folder to write")
    trainer.add_argument("--stage", default="pretrain", choices=["pretrain", "finetune"])
    trainer.add_argument("--init", help="checkpoint to start from (e.g. the pretrained one for fine-tuning)")
    trainer.add_argument("--carrier", choices=["icae", "500x"])
    trainer.add_argument("--layout", choices=["dpl", "upl", "epl"])
    trainer.add_argument("--chunk-size", type=int)
    trainer.add_argument("--n-memory", type=int)
    trainer.add_argument("--lora-r", type=int)
    trainer.add_argument("--lora-alpha", type=int)
    trainer.add_argument("--steps", type=int)
    trainer.add_argument("--batch-size", type=int)
    trainer.add_argument("--lr", type=float, default=None, help="default 1e-4 (pretrain) / 5e-5 (finetune)")
    trainer.add_argument("--warmup", type=int)
    trainer.add_argument("--min-length", type=int)
    trainer.add_argument("--max-length", type=int)
    trainer.add_argument("--data-files", help="pretraining texts (.jsonl/.json/.txt or folder); default synthetic")
    trainer.add_argument("--text-field", default="text")
    trainer.add_argument("--mrqa-data", help="fine-tuning data: an MRQA-format .jsonl file")
    trainer.add_argument("--dtype", default="float32")
    trainer.add_argument("--device", default="cpu")
    trainer.add_argument("--seed", type=int)
    trainer.set_defaults(handler=run)


def _default(name: str) -> str:
    """``(default X)`` for help, read from :class:`TrainConfig` (where every default is written, once)."""
    from dataclasses import MISSING, fields

    from harness.train.config import TrainConfig

    field = next(f for f in fields(TrainConfig) if f.name == name)
    return "" if field.default is MISSING or field.default is None else f" (default {field.default})"


def add_train(sub: argparse._SubParsersAction) -> None:
    from harness.positions.defaults import LAYOUTS, PIC_METHODS

    train = sub.add_parser("train", help="train a variant (pic-sft, sft, longce, lsm-reg, longrecipe) or merge",
                           description="Writes an adapter (or full model) with lch_variant.json, which `lch eval "
                                       "--model hf-pic` applies. Recipes and defaults: docs/training.md.")
    recipes = train.add_subparsers(dest="recipe", metavar="RECIPE", required=True)
    for name, text in RECIPE_HELP.items():
        # an option not given stays out of the namespace: TrainConfig's default applies (not repeated here)
        p = recipes.add_parser(name, help=text, argument_default=argparse.SUPPRESS,
                               description=text + ". Unset optimiser options take the recipe's paper defaults "
                                                  "(docs/training.md).")
        _common_options(p, PIC_METHODS, LAYOUTS)
        if name in ("pic-sft", "sft"):
            p.add_argument("--segment-length", type=int, help="Dynamic PIC-SFT segment (tokens)" + _default("segment_length"))
            p.add_argument("--prompt-field", help="field of the prompt" + _default("prompt_field"))
            p.add_argument("--response-field", help="field of the response" + _default("response_field"))
            p.add_argument("--no-chat-template", dest="chat_template", action="store_false",
                           help="plain 'prompt\\n\\nanswer' instead of the tokenizer's chat template")
        if name == "longce":
            p.add_argument("--gamma", type=float, help="cap of the LongCE weights" + _default("gamma"))
            p.add_argument("--short-context", type=int, help="K: tokens of the short context" + _default("short_context"))
            p.add_argument("--sliding-window", type=int, help="d: step of the short windows" + _default("sliding_window"))
        if name == "lsm-reg":
            p.add_argument("--lam", type=float, help="lambda of the misalignment term" + _default("lam"))
            p.add_argument("--context-length", type=int, help="L: window length" + _default("context_length"))
            p.add_argument("--delta", type=int, help="offset of the second window (default L/4)")
        if name == "longrecipe":
            p.add_argument("--stage", choices=["extend", "replay"], help="LongRecipe stage" + _default("stage"))
            p.add_argument("--target-length", type=int, help="L^: the context the positions cover")
            p.add_argument("--train-length", type=int, help="tokens kept per example (default 30%% of L^)")
            p.add_argument("--max-skip", type=int, help="M: skips drawn from 0..M (default: spread over L^)")
            p.add_argument("--top-fraction", type=float, help="impactful tokens per position" + _default("top_fraction"))
            p.add_argument("--extended-model", help="H' of the impactful-token analysis (default: base at --rope-base)")
            p.add_argument("--init", help="adapter to continue (the replay stage)")
        p.set_defaults(handler=run_train)
    merge = recipes.add_parser("merge", help="merge a tuned model with its original (paper 002 Eq. 8)")
    merge.add_argument("--base", required=True, help="the original model")
    merge.add_argument("--tuned", required=True, help="the tuned adapter or checkpoint folder")
    merge.add_argument("--output", required=True)
    merge.add_argument("--weights", type=float, nargs=2, default=[0.5, 0.5], metavar=("L1", "L2"),
                       help="weights of the original and the tuned model (default 0.5 0.5)")
    merge.add_argument("--dtype", default="float32")
    merge.set_defaults(handler=run_merge)


def _common_options(p: argparse.ArgumentParser, methods: tuple[str, ...], layouts: tuple[str, ...]) -> None:
    p.add_argument("--model", required=True, help="base HF model (folder or hub name)")
    p.add_argument("--data", required=True, help="local .jsonl / .json / .txt / folder, or an HF dataset name")
    p.add_argument("--output", required=True, help="folder for the adapter, checkpoints and loss log")
    p.add_argument("--split", help="split of an HF dataset" + _default("split"))
    p.add_argument("--text-field", help="field of the texts" + _default("text_field"))
    p.add_argument("--pic", choices=methods, help="PIC while training" + _default("pic"))
    p.add_argument("--pic-ratio", type=float, help="s_cr (naive/dynamic, default 2) or s_rr (ntk, default 16)")
    p.add_argument("--pic-initial", type=int, help="l_ic (default 10, paper 000's PIC-SFT)")
    p.add_argument("--pic-recent", type=int, help="l_rc (default 600, paper 000's PIC-SFT)")
    p.add_argument("--pic-layout", choices=layouts, help="Dynamic PIC layout" + _default("pic_layout"))
    p.add_argument("--rope-base", type=float, help="train (and evaluate) at this RoPE base")
    p.add_argument("--max-length", type=int, help="tokens per example (longer ones are cut)")
    p.add_argument("--seq-len", type=int, help="text chunk length (longce, replay)" + _default("seq_len"))
    p.add_argument("--heldout", type=float, help="fraction of rows held out for the loss before/after" + _default("heldout"))
    p.add_argument("--lr", type=float, help="learning rate (default: the recipe's)")
    p.add_argument("--warmup", type=float, help="< 1: ratio of the steps; >= 1: steps (default: the recipe's)")
    p.add_argument("--epochs", type=float, help="epochs (default: the recipe's)")
    p.add_argument("--max-steps", type=int, help="stop after this many optimiser steps (-1: the epochs decide)")
    p.add_argument("--batch-size", type=int, help="examples per step" + _default("batch_size"))
    p.add_argument("--grad-accum", type=int, help="gradient accumulation steps" + _default("grad_accum"))
    p.add_argument("--weight-decay", type=float, help="weight decay (default: the recipe's)")
    p.add_argument("--full", action="store_true", help="full fine-tuning instead of LoRA")
    p.add_argument("--lora-r", type=int, help="LoRA rank" + _default("lora_r"))
    p.add_argument("--lora-alpha", type=int, help="LoRA alpha" + _default("lora_alpha"))
    p.add_argument("--lora-targets", help="LoRA target modules" + _default("lora_targets"))
    p.add_argument("--save-steps", type=int, help="checkpoint every this many steps" + _default("save_steps"))
    p.add_argument("--log-steps", type=int, help="log the loss every this many steps" + _default("log_steps"))
    p.add_argument("--seed", type=int, help="random seed" + _default("seed"))
    p.add_argument("--dtype", help="weights dtype" + _default("dtype"))
    p.add_argument("--resume", action="store_true", help="continue from the last checkpoint in --output")
    p.add_argument("--quiet", dest="progress", action="store_false", help="no progress bars")


def run_train(args: argparse.Namespace) -> int:
    from dataclasses import fields

    from harness.train.config import TrainConfig
    from harness.train.run import train_recipe

    names = {f.name for f in fields(TrainConfig)}
    cfg = TrainConfig(**{k: v for k, v in vars(args).items() if k in names})
    summary = train_recipe(cfg)
    before, after = summary["heldout_loss_before"], summary["heldout_loss_after"]
    heldout = f"held-out loss {before:.4f} -> {after:.4f}" if before is not None else "no held-out rows"
    print(f"{summary['variant']}: {summary['steps']} steps in {summary['train_seconds']:.0f} s, {heldout}; "
          f"saved {summary['output']}")
    return 0


def run_merge(args: argparse.Namespace) -> int:
    from harness.train.merge import merge

    out = merge(args.base, args.tuned, args.output, tuple(args.weights), args.dtype)
    print(f"merged {args.weights[0]:g} x {args.base} + {args.weights[1]:g} x {args.tuned} -> {out}")
    return 0


def run(args: argparse.Namespace) -> int:
    from harness.train.compressor import TrainSettings, train_from_files

    given = lambda names: {n: getattr(args, n) for n in names if getattr(args, n) is not None}  # noqa: E731
    settings = TrainSettings(stage=args.stage, **given(["steps", "batch_size", "lr", "warmup", "min_length",
                                                        "max_length", "seed"]))
    losses = train_from_files(args.base, args.output, settings,
                              given(["carrier", "layout", "chunk_size", "n_memory", "lora_r", "lora_alpha"]),
                              init=args.init, data_files=args.data_files, mrqa_data=args.mrqa_data,
                              text_field=args.text_field, dtype=args.dtype, device=args.device)
    print(f"{args.stage}: {len(losses)} steps, loss {losses[0]:.4f} -> {losses[-1]:.4f}; saved {args.output}")
    return 0
