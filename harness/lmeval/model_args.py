"""Checks of our models' ``--model_args``, run before anything is loaded: by the model classes themselves,
and by ``lch eval`` before lm-eval indexes the tasks (so a typo fails in a second, not after the indexing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.data.variants import INFERENCE_KEYS, parse_inference, read_variant, standard_inference
from harness.errors import MissingDataError, UsageError
from harness.models.pic import IMPLEMENTATIONS


def check_model_path(value: Any, arg: str = "pretrained", local: bool = False) -> None:
    """A model arg that names a local folder (``local``, or a path rather than a hub id like ``org/name``)
    must exist."""
    if not isinstance(value, str):
        return
    looks_local = local or value.startswith(("/", ".", "~")) or value.count("/") > 1
    if looks_local and not Path(value).expanduser().exists():
        raise MissingDataError(f"{arg}={value} does not exist: give a model folder or a hub name (offline: "
                               "`lch models fetch NAME`, then pretrained=$(lch models path NAME))")


def check_hf_pic_args(args: dict) -> dict[str, Any]:
    """Validate hf-pic's inference args (then the model folder) and resolve them against the variant file
    (``lch_variant.json``) of the adapter (``peft=``) or the model folder: explicit args win, key by key,
    then the variant's, then the standard inference. Returns ``{"inference": {...}, "variant": Variant |
    None, "overrides": ["pic=none (variant: dynamic)", ...]}``; ``inference`` has the keys of
    :data:`harness.data.variants.INFERENCE_KEYS` plus ``pic_impl``."""
    explicit = parse_inference({k: args[k] for k in INFERENCE_KEYS if args.get(k) is not None})  # before any file
    impl = args.get("pic_impl", "cached")
    if impl not in IMPLEMENTATIONS:
        raise UsageError(f"pic_impl {impl!r} is unknown; allowed: {', '.join(IMPLEMENTATIONS)}")
    for key in ("pretrained", "peft"):
        check_model_path(args.get(key), key)
    variant = read_variant(args.get("peft")) or read_variant(args.get("pretrained"))
    base = variant.inference if variant else standard_inference()
    inference = {**base, **explicit}  # each key valid on its own (the file is checked when read)
    overrides = [f"{k}={explicit[k]} (variant: {base[k]})" for k in explicit
                 if variant is not None and explicit[k] != base[k]]
    return {"inference": {**inference, "pic_impl": impl}, "variant": variant, "overrides": overrides}


COMPRESSOR_ARGS = {"pretrained", "checkpoint", "dtype", "device", "max_gen_toks", "batch_size", "context_field"}
COMPRESSOR_OVERRIDES = {"chunk_size": int, "n_memory": int, "lora_r": int, "lora_alpha": int, "carrier": str, "layout": str}


def check_compressor_args(args: dict) -> None:
    """Unknown compressor args, and model / checkpoint folders that do not exist."""
    unknown = set(args) - COMPRESSOR_ARGS - set(COMPRESSOR_OVERRIDES)
    if unknown:
        raise UsageError(f"compressor: unknown model args {sorted(unknown)}")
    check_model_path(args.get("pretrained"))
    if args.get("checkpoint"):
        check_model_path(args["checkpoint"], "checkpoint", local=True)


PREFLIGHT = {"hf-pic": check_hf_pic_args, "compressor": check_compressor_args}
