"""Variant metadata: ``lch_variant.json``, saved with every checkpoint or adapter ``lch train`` writes
(docs/training.md). It holds ``base_model``, ``recipe``, free-form ``settings`` (recorded, never applied) and
``inference``: an :class:`~harness.pic.inference.Inference` under ``hf-pic``'s model-arg names (``rope_base``
``null``: the model's own), applied key by key, so an explicit model arg overrides one key. May be written by hand."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core import results as keys
from harness.core.errors import DataFormatError, UsageError
from harness.core.files import write_json_atomic
from harness.pic.inference import VARIANT_KEYS, Inference

LAYER = "data"  # harness/devtools/layers.py

VARIANT_FILE = "lch_variant.json"
FORMAT_VERSION = 1


@dataclass
class Variant:
    """What a trained checkpoint is (base model, recipe, its settings) and the inference it expects."""

    base_model: str
    recipe: str
    settings: dict[str, Any] = field(default_factory=dict)
    inference: Inference = field(default_factory=Inference)

    def to_json(self) -> dict[str, Any]:
        return {
            "lch_variant": FORMAT_VERSION,
            "base_model": self.base_model,
            "recipe": self.recipe,
            "settings": copy.deepcopy(self.settings),
            "inference": self.inference.to_variant_json(),
        }

    def describe(self) -> str:
        """The variant in words, e.g. ``Dynamic PIC-SFT (s_cr 2, l_ic 10, l_rc 600)``."""
        return describe(self.recipe, self.inference, self.settings)


def describe(recipe: str, inference: Inference, settings: dict[str, Any] | None = None) -> str:
    """A recipe and its inference in words (the leaderboard's ``variant`` column), e.g. ``Dynamic PIC-SFT
    (s_cr 2, l_ic 10, l_rc 600)``, ``LongRecipe, RoPE base 40000, merged 0.5 / 0.5 with the original``."""
    settings = settings or {}
    method_words = inference.entry.label
    inference_text = inference.label()
    if recipe == "pic-sft" and inference.entry.acts:
        text = method_words + "-SFT" + inference_text[len(method_words) :]
    else:
        names = {
            "sft": "SFT",
            "pic-sft": "SFT",
            "longce": "LongCE",
            "lsm-reg": "LSM-regularised",
            "longrecipe": "LongRecipe",
        }
        text = names.get(recipe, recipe)
        if inference_text != "standard inference":
            text += f", {inference_text}"
    merged = settings.get("merged")
    if isinstance(merged, dict) and merged.get("weights"):
        text += f", merged {' / '.join(f'{w:g}' for w in merged['weights'])} with the original"
    return text


def evaluated_as(variant: Variant | None, applied: Inference) -> str:
    """What a run evaluated, in words: the variant (and the inference, when it is not the variant's own,
    e.g. ``Dynamic PIC-SFT (...), evaluated with standard inference``), or the inference of a plain model."""
    if variant is None:
        words = applied.label()
        return "base model" if words == "standard inference" else words
    if applied.effective() == variant.inference.effective():
        return variant.describe()
    return f"{variant.describe()}, evaluated with {applied.label()}"


def check_inference(inference: Any, where: str) -> Inference:
    """The ``inference`` block of a variant file as an :class:`Inference` (missing keys take the standard
    values); a bad block raises :class:`DataFormatError` naming ``where``."""
    if not isinstance(inference, dict):
        raise DataFormatError(f"{where}: 'inference' must be an object with keys {', '.join(VARIANT_KEYS)}")
    unknown = set(inference) - set(VARIANT_KEYS)
    if unknown:
        raise DataFormatError(f"{where}: unknown inference keys {sorted(unknown)}; allowed: {', '.join(VARIANT_KEYS)}")
    try:
        return Inference.from_variant_json(inference)
    except UsageError as err:
        raise DataFormatError(f"{where}: bad inference settings ({err})") from None


def results_info(variant: Variant | None, applied: Inference) -> dict[str, Any]:
    """What a model class adds to lm-eval's results ``config``: ``lch_inference`` (the settings in force, as model
    args), ``lch_variant`` (the checkpoint's variant file, if any), ``lch_evaluated_as`` (words)."""
    return {
        keys.INFERENCE: applied.to_model_args(),
        keys.VARIANT: variant.to_json() if variant is not None else None,
        keys.EVALUATED_AS: evaluated_as(variant, applied),
    }


def variant_path(folder: str | Path) -> Path:
    return Path(folder).expanduser() / VARIANT_FILE


def read_variant(folder: str | Path | None) -> Variant | None:
    """The variant saved in ``folder`` (a checkpoint or adapter folder), or ``None`` if it has none
    (or ``folder`` is not a local folder, e.g. a hub name)."""
    if not folder or not isinstance(folder, (str, Path)):
        return None
    path = variant_path(folder)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise DataFormatError(f"{path}: not readable JSON ({err})") from None
    if not isinstance(data, dict) or data.get("lch_variant") != FORMAT_VERSION:
        raise DataFormatError(
            f'{path}: not a variant file of format {FORMAT_VERSION} (needs "lch_variant": 1; see docs/training.md)'
        )
    missing = [k for k in ("base_model", "recipe") if not data.get(k)]
    if missing:
        raise DataFormatError(f"{path}: missing {', '.join(missing)}")
    settings = data.get("settings") or {}
    if not isinstance(settings, dict):
        raise DataFormatError(f"{path}: 'settings' must be an object")
    return Variant(
        str(data["base_model"]), str(data["recipe"]), settings, check_inference(data.get("inference") or {}, str(path))
    )


def write_variant(folder: str | Path, variant: Variant) -> Path:
    """Write ``folder/lch_variant.json`` (the folder is created); returns its path."""
    if not isinstance(variant.inference, Inference):
        raise DataFormatError(
            f"variant of {folder}: 'inference' must be an Inference, got {type(variant.inference).__name__}"
        )
    return write_json_atomic(variant_path(folder), variant.to_json(), indent=2, sort_keys=True)
