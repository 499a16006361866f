"""``lch train <recipe>`` (trained variants; ``merge``) and ``lch train-compressor`` (EPL soft-prompt compressors)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli.options import add_options, given_options
from harness.core.errors import DataFormatError


def add(sub: argparse._SubParsersAction) -> None:
    from harness.compressor.config import CompressorConfig, TrainSettings
    from harness.train.config import RECIPE_HELP, config_class

    train = sub.add_parser(
        "train",
        help="train a variant (pic-sft, sft, longce, lsm-reg, longrecipe) or merge",
        description="Writes an adapter (or full model) with lch_variant.json, which `lch eval "
        "--model hf-pic` applies. Recipes and defaults: docs/training.md.",
    )
    recipes = train.add_subparsers(dest="recipe", metavar="RECIPE", required=True)
    for name, text in RECIPE_HELP.items():
        cls = config_class(name)
        p = recipes.add_parser(
            name,
            help=text,
            description=text + ". Unset optimiser options take the recipe's paper defaults (docs/training.md).",
        )
        add_options(p, cls, cls.optimiser_help())
        p.set_defaults(handler=run_train)
    merge = recipes.add_parser("merge", help="merge a tuned model with its original (the LongRecipe paper, Eq. 8)")
    merge.add_argument("--base", required=True, help="the original model")
    merge.add_argument("--tuned", required=True, help="the tuned adapter or checkpoint folder")
    merge.add_argument("--output", required=True)
    merge.add_argument(
        "--weights",
        type=float,
        nargs=2,
        default=[0.5, 0.5],
        metavar=("L1", "L2"),
        help="weights of the original and the tuned model (default 0.5 0.5)",
    )
    merge.add_argument("--dtype", default="float32")
    merge.set_defaults(handler=run_merge)
    trainer = sub.add_parser(
        "train-compressor",
        help="pretrain (AE+LM) or fine-tune (QA) a soft-prompt compressor",
        description="Unset options take the EPL paper's values (Table 8; L 510, |M| 102, LoRA 128/256) "
        "or, with --init, the checkpoint's.",
    )
    trainer.add_argument("--base", required=True, help="base HF model (name or folder)")
    trainer.add_argument("--output", required=True, help="checkpoint folder to write")
    trainer.add_argument("--init", help="checkpoint to start from (e.g. the pretrained one for fine-tuning)")
    # the compressor's and the training's settings: flags generated from their dataclasses (defaults written there)
    add_options(trainer, CompressorConfig)
    add_options(trainer, TrainSettings)
    trainer.add_argument("--data-files", help="pretraining texts (.jsonl/.json/.txt or folder); default synthetic")
    trainer.add_argument("--text-field", default="text")
    trainer.add_argument("--mrqa-data", help="fine-tuning data: an MRQA-format .jsonl file")
    trainer.add_argument("--dtype", default="float32")
    trainer.add_argument("--device", default="cpu")
    trainer.set_defaults(handler=run)


def run_train(args: argparse.Namespace) -> int:
    from harness.train.config import TrainConfig, config_class
    from harness.train.trainer import train_recipe

    summary = train_recipe(TrainConfig.for_recipe(**given_options(config_class(args.recipe), args)))
    before, after = summary["heldout_loss_before"], summary["heldout_loss_after"]
    heldout = (
        f"held-out loss {before:.4f} -> {after:.4f}"
        if before is not None and after is not None
        else "held-out loss no number after training"
        if before is not None
        else "no held-out rows"
    )
    print(
        f"{summary['variant']}: {summary['steps']} steps in {summary['train_seconds']:.0f} s, {heldout}; "
        f"saved {summary['output']}"
    )
    if summary.get("warning") and before is not None and after is None:  # NaN / inf: nothing usable was trained
        raise DataFormatError(f"{summary['warning']} (its output {summary['output']} is not kept)")
    if summary.get("warning"):
        print(f"lch: warning: {summary['warning']}", file=sys.stderr)
    return 0


def run_merge(args: argparse.Namespace) -> int:
    from harness.train.merge import merge

    out = merge(args.base, args.tuned, args.output, tuple(args.weights), args.dtype)
    print(f"merged {args.weights[0]:g} x {args.base} + {args.weights[1]:g} x {args.tuned} -> {out}")
    return 0


def run(args: argparse.Namespace) -> int:
    from harness.compressor.config import CompressorConfig, TrainSettings
    from harness.compressor.train import train_from_files
    from harness.tasks.mrqa.dataset import read_mrqa_jsonl

    settings = TrainSettings(**given_options(TrainSettings, args))
    mrqa_rows = (
        read_mrqa_jsonl(args.mrqa_data, Path(args.mrqa_data).stem)
        if args.mrqa_data and settings.stage != "pretrain"
        else None
    )
    losses = train_from_files(
        args.base,
        args.output,
        settings,
        given_options(CompressorConfig, args),
        init=args.init,
        data_files=args.data_files,
        mrqa_rows=mrqa_rows,
        text_field=args.text_field,
        dtype=args.dtype,
        device=args.device,
    )
    print(f"{settings.stage}: {len(losses)} steps, loss {losses[0]:.4f} -> {losses[-1]:.4f}; saved {args.output}")
    return 0
