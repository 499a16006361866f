"""Checks of our models' ``--model_args``, run before anything is loaded: by the model classes themselves,
and by ``lch eval`` before lm-eval indexes the tasks (so a typo fails in a second, not after the indexing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.errors import MissingDataError, UsageError
from harness.models.pic import IMPLEMENTATIONS
from harness.positions.defaults import PIC_DEFAULTS
from harness.positions.pic import check_pic_args


def check_model_path(value: Any, arg: str = "pretrained", local: bool = False) -> None:
    """A model arg that names a local folder (``local``, or a path rather than a hub id like ``org/name``)
    must exist."""
    if not isinstance(value, str):
        return
    looks_local = local or value.startswith(("/", ".", "~")) or value.count("/") > 1
    if looks_local and not Path(value).expanduser().exists():
        raise MissingDataError(f"{arg}={value} does not exist: give a model folder or a hub name (offline: "
                               "`lch models fetch NAME`, then pretrained=$(lch models path NAME))")


def check_hf_pic_args(args: dict) -> tuple[float, int, int]:
    """Validate hf-pic's PIC args (then the model folder); returns ``(ratio, initial, recent)`` as numbers."""
    ratio, initial, recent = (args.get(k, PIC_DEFAULTS[d]) for k, d in
                              (("pic_ratio", "ratio"), ("pic_initial", "initial"), ("pic_recent", "recent")))
    try:
        ratio, initial, recent = float(ratio), int(initial), int(recent)
    except (TypeError, ValueError):
        raise UsageError(f"pic_ratio must be a number and pic_initial / pic_recent integers; got {ratio!r}, "
                         f"{initial!r}, {recent!r}") from None
    check_pic_args(args.get("pic", PIC_DEFAULTS["method"]), ratio, initial, recent, args.get("pic_layout", PIC_DEFAULTS["layout"]))
    impl = args.get("pic_impl", "cached")
    if impl not in IMPLEMENTATIONS:
        raise UsageError(f"pic_impl {impl!r} is unknown; allowed: {', '.join(IMPLEMENTATIONS)}")
    check_model_path(args.get("pretrained"))
    return ratio, initial, recent


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
