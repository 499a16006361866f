"""Variant metadata: the small JSON file saved with every checkpoint or adapter ``lch train`` writes.

``lch_variant.json`` says what the weights are and how they must be evaluated::

    {
      "lch_variant": 1,
      "base_model": "/path/or/hub-name",
      "recipe": "pic-sft",
      "settings": {"pic": "dynamic", "segment_length": 256, "lr": 5e-05, ...},
      "inference": {"pic": "dynamic", "pic_ratio": 2.0, "pic_initial": 10, "pic_recent": 600,
                    "pic_layout": "paper", "rope_base": null}
    }

``inference`` uses the names of ``hf-pic``'s model args (``rope_base``: the RoPE base the weights were
trained with, ``null`` for the model's own), so ``hf-pic`` applies it key by key and an explicit model arg
overrides one key. ``settings`` is free-form (recorded, shown, never applied). The file can be written
by hand for checkpoints trained elsewhere (e.g. a PIC-SFT model from LLaMA-Factory).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import DataFormatError, UsageError
from harness.positions.defaults import PIC_DEFAULTS, check_pic_args

VARIANT_FILE = "lch_variant.json"
FORMAT_VERSION = 1
INFERENCE_KEYS = ("pic", "pic_ratio", "pic_initial", "pic_recent", "pic_layout", "rope_base")

_METHOD_WORDS = {"none": "", "naive": "Naive PIC", "ntk": "NTK-aware PIC", "dynamic": "Dynamic PIC"}


def standard_inference() -> dict[str, Any]:
    """The inference of an untouched model: no PIC, the model's own RoPE base."""
    return {"pic": PIC_DEFAULTS["method"], "pic_ratio": PIC_DEFAULTS["ratio"], "pic_initial": PIC_DEFAULTS["initial"],
            "pic_recent": PIC_DEFAULTS["recent"], "pic_layout": PIC_DEFAULTS["layout"], "rope_base": None}


@dataclass
class Variant:
    """What a trained checkpoint is (base model, recipe, its settings) and the inference it expects."""

    base_model: str
    recipe: str
    settings: dict[str, Any] = field(default_factory=dict)
    inference: dict[str, Any] = field(default_factory=standard_inference)

    def to_json(self) -> dict[str, Any]:
        return {"lch_variant": FORMAT_VERSION, **asdict(self)}

    def describe(self) -> str:
        """The variant in words, e.g. ``Dynamic PIC-SFT (s_cr 2, l_ic 10, l_rc 600)``."""
        return describe(self.recipe, self.inference, self.settings)


def _number(value: float) -> str:
    return f"{value:g}"


def inference_words(inference: dict[str, Any]) -> str:
    """``Dynamic PIC (s_cr 2, l_ic 10, l_rc 600)``, ``NTK-aware PIC (s_rr 16)``, ``RoPE base 1e+06``, or
    ``standard inference``."""
    parts = []
    method = inference.get("pic", "none")
    if method == "naive":
        parts.append(f"Naive PIC (s_cr {_number(inference['pic_ratio'])})")
    elif method == "ntk":
        parts.append(f"NTK-aware PIC (s_rr {_number(inference['pic_ratio'])})")
    elif method == "dynamic":
        layout = "" if inference.get("pic_layout", "paper") == "paper" else f", {inference['pic_layout']} layout"
        parts.append(f"Dynamic PIC (s_cr {_number(inference['pic_ratio'])}, l_ic {inference['pic_initial']}, "
                     f"l_rc {inference['pic_recent']}{layout})")
    if inference.get("rope_base") is not None:
        parts.append(f"RoPE base {_number(inference['rope_base'])}")
    return ", ".join(parts) or "standard inference"


def describe(recipe: str, inference: dict[str, Any], settings: dict[str, Any] | None = None) -> str:
    """A recipe and its inference in words (the leaderboard's ``variant`` column), e.g. ``Dynamic PIC-SFT
    (s_cr 2, l_ic 10, l_rc 600)``, ``LongRecipe, RoPE base 40000, merged 0.5 / 0.5 with the original``."""
    settings = settings or {}
    method = inference.get("pic", "none")
    inference_text = inference_words(inference)
    if recipe == "pic-sft" and method != "none":
        text = _METHOD_WORDS[method] + "-SFT" + inference_text[len(_METHOD_WORDS[method]):]
    else:
        names = {"sft": "SFT", "pic-sft": "SFT", "longce": "LongCE", "lsm-reg": "LSM-regularised", "longrecipe": "LongRecipe"}
        text = names.get(recipe, recipe)
        if inference_text != "standard inference":
            text += f", {inference_text}"
    merged = settings.get("merged")
    if isinstance(merged, dict) and merged.get("weights"):
        text += f", merged {' / '.join(_number(w) for w in merged['weights'])} with the original"
    return text


def effective(inference: dict[str, Any]) -> dict[str, Any]:
    """Only the keys that change the model: no ratio / l_ic / l_rc / layout without PIC, no l_ic / l_rc /
    layout for naive or NTK-aware PIC."""
    out = {k: v for k, v in inference.items() if k in INFERENCE_KEYS}
    if out.get("pic", "none") == "none":
        for k in ("pic_ratio", "pic_initial", "pic_recent", "pic_layout"):
            out.pop(k, None)
    elif out["pic"] in ("naive", "ntk"):
        for k in ("pic_initial", "pic_recent", "pic_layout"):
            out.pop(k, None)
    return out


def evaluated_as(variant: Variant | None, applied: dict[str, Any]) -> str:
    """What a run evaluated, in words: the variant (and the inference, when it is not the variant's own,
    e.g. ``Dynamic PIC-SFT (...), evaluated with standard inference``), or the inference of a plain model."""
    if variant is None:
        words = inference_words(applied)
        return "base model" if words == "standard inference" else words
    if effective(applied) == effective(variant.inference):
        return variant.describe()
    return f"{variant.describe()}, evaluated with {inference_words(applied)}"


def parse_inference(values: dict[str, Any]) -> dict[str, Any]:
    """The given inference values converted (ratio float, l_ic / l_rc int, ``rope_base`` float or ``None``
    from ``"none"``) and checked; raises :class:`UsageError` naming the key. Used for the variant file and
    for ``hf-pic`` / ``vllm-pic`` model args alike."""
    out = dict(values)
    for key, kind, what in (("pic_ratio", float, "a number"), ("pic_initial", int, "an integer"),
                            ("pic_recent", int, "an integer"), ("rope_base", float, "a number or none")):
        if key not in out or out[key] is None:
            continue
        if key == "rope_base" and str(out[key]).lower() == "none":
            out[key] = None
            continue
        try:
            out[key] = kind(out[key])
        except (TypeError, ValueError):
            raise UsageError(f"{key} must be {what}; got {out[key]!r}") from None
    if out.get("rope_base") is not None and out["rope_base"] <= 0:
        raise UsageError(f"rope_base must be > 0, got {out['rope_base']}")
    full = {**standard_inference(), **out}
    check_pic_args(full["pic"], full["pic_ratio"], full["pic_initial"], full["pic_recent"], full["pic_layout"])
    return out


def check_inference(inference: Any, where: str) -> dict[str, Any]:
    """A complete, validated ``inference`` block of a variant file (missing keys take the standard values)."""
    if not isinstance(inference, dict):
        raise DataFormatError(f"{where}: 'inference' must be an object with keys {', '.join(INFERENCE_KEYS)}")
    unknown = set(inference) - set(INFERENCE_KEYS)
    if unknown:
        raise DataFormatError(f"{where}: unknown inference keys {sorted(unknown)}; allowed: {', '.join(INFERENCE_KEYS)}")
    try:
        return {**standard_inference(), **parse_inference(inference)}
    except ValueError as err:
        raise DataFormatError(f"{where}: bad inference settings ({err})") from None


def results_info(variant: Variant | None, applied: dict[str, Any]) -> dict[str, Any]:
    """What a model class adds to lm-eval's results ``config``: ``lch_inference`` (the PIC / RoPE settings
    in force), ``lch_variant`` (the checkpoint's variant file, if any), ``lch_evaluated_as`` (words)."""
    return {"lch_inference": dict(applied), "lch_variant": variant.to_json() if variant is not None else None,
            "lch_evaluated_as": evaluated_as(variant, applied)}


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
        raise DataFormatError(f"{path}: not a variant file of format {FORMAT_VERSION} "
                              "(needs \"lch_variant\": 1; see docs/training.md)")
    missing = [k for k in ("base_model", "recipe") if not data.get(k)]
    if missing:
        raise DataFormatError(f"{path}: missing {', '.join(missing)}")
    settings = data.get("settings") or {}
    if not isinstance(settings, dict):
        raise DataFormatError(f"{path}: 'settings' must be an object")
    return Variant(str(data["base_model"]), str(data["recipe"]), settings,
                   check_inference(data.get("inference") or {}, str(path)))


def write_variant(folder: str | Path, variant: Variant) -> Path:
    """Write ``folder/lch_variant.json`` (the folder is created); returns its path."""
    check_inference(variant.inference, f"variant of {folder}")
    path = variant_path(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(variant.to_json(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path
