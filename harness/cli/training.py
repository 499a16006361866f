"""``lch train-compressor``: pretrain (AE + LM) or fine-tune (QA) a soft-prompt compressor (paper 003)."""

from __future__ import annotations

import argparse


def add(sub: argparse._SubParsersAction) -> None:
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
