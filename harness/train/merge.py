"""``lch train merge`` (the LongRecipe paper, Eq. 8): ``Theta = l1 * Theta_orig + l2 * Theta_tuned``. An adapter with
``l1 + l2 = 1`` stays one, ``lora_B`` scaled by ``l2`` (``l1 W + l2 (W + dW) = W + l2 dW``); else the float tensors
are averaged into a full model. The tuned variant file is kept, with ``settings.merged``."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from harness.core.errors import UsageError
from harness.core.files import staged_files
from harness.models.folders import check_model_folder
from harness.pic.variants import Variant, read_variant, write_variant


def is_adapter(folder: str | Path) -> bool:
    return (Path(folder).expanduser() / "adapter_config.json").is_file()


def scale_lora(state: dict[str, torch.Tensor], factor: float) -> dict[str, torch.Tensor]:
    """The adapter state with every ``lora_B`` weight multiplied by ``factor`` (so ``dW -> factor * dW``)."""
    return {k: (v * factor if "lora_B" in k else v) for k, v in state.items()}


def average_states(
    a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], wa: float, wb: float
) -> dict[str, torch.Tensor]:
    """``wa * a + wb * b`` for floating tensors (computed in fp32, stored in ``a``'s dtype); others from ``a``."""
    if a.keys() != b.keys():
        missing = sorted(set(a) ^ set(b))[:3]
        raise UsageError(
            f"the two models have different weights (e.g. {missing}): merge checkpoints of one architecture"
        )
    return {k: (wa * v.float() + wb * b[k].float()).to(v.dtype) if v.is_floating_point() else v for k, v in a.items()}


def merge(
    base: str, tuned: str, output: str, weights: tuple[float, float] = (0.5, 0.5), dtype: str = "float32"
) -> Path:
    """Merge ``tuned`` (an adapter over ``base``, or a full checkpoint) into ``base``; returns ``output``."""
    l1, l2 = weights
    tuned_path, out = Path(tuned).expanduser(), Path(output).expanduser()
    if not tuned_path.is_dir():
        raise UsageError(f"{tuned_path} is not a checkpoint or adapter folder")
    if not isinstance(getattr(torch, dtype, None), torch.dtype):
        raise UsageError(f"lch train merge: --dtype {dtype!r} is not a torch dtype (e.g. float32, bfloat16)")
    check_model_folder(base, "--base", tokenizer=True)
    check_model_folder(tuned_path, "--tuned")
    variant = read_variant(tuned_path) or Variant(base_model=base, recipe="unknown")
    with staged_files(out) as staged:  # each merged file appears whole; the variant file, written last, marks it done
        kind = _merge_into(staged, base, tuned_path, l1, l2, dtype)
    variant.settings = {
        **variant.settings,
        "merged": {"weights": [l1, l2], "original": base, "tuned": str(tuned_path), "kind": kind},
    }
    write_variant(out, variant)
    return out


def _merge_into(out: Path, base: str, tuned_path: Path, l1: float, l2: float, dtype: str) -> str:
    """Write the merged adapter or model into the empty folder ``out``; returns what was merged (in words)."""
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if is_adapter(tuned_path) and abs(l1 + l2 - 1.0) < 1e-9:
        weights_file = tuned_path / "adapter_model.safetensors"
        if not weights_file.is_file():
            raise UsageError(f"{tuned_path} has no adapter_model.safetensors")
        for f in tuned_path.iterdir():  # adapter config, tokenizer files (not the training's own records)
            if f.is_file() and f.name not in (
                "adapter_model.safetensors",
                "lch_variant.json",
                "loss_log.jsonl",
                "training_summary.json",
                "README.md",
            ):
                shutil.copy2(f, out / f.name)
        save_file(scale_lora(load_file(str(weights_file)), l2), str(out / "adapter_model.safetensors"))
        return "adapter (lora_B scaled)"
    torch_dtype = getattr(torch, dtype)
    original = AutoModelForCausalLM.from_pretrained(base, dtype=torch_dtype)
    if is_adapter(tuned_path):
        from peft import PeftModel

        tuned_model = PeftModel.from_pretrained(
            AutoModelForCausalLM.from_pretrained(base, dtype=torch_dtype), str(tuned_path)
        ).merge_and_unload()
    else:
        tuned_model = AutoModelForCausalLM.from_pretrained(str(tuned_path), dtype=torch_dtype)
    original.load_state_dict(average_states(original.state_dict(), tuned_model.state_dict(), l1, l2))
    original.save_pretrained(str(out))
    AutoTokenizer.from_pretrained(base).save_pretrained(str(out))
    return "full model"
