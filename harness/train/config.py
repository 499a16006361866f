"""What ``lch train <recipe>`` is asked to do: one dataclass, the recipes' paper defaults, and the
inference each trained variant expects (written to its ``lch_variant.json``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import MissingDataError, UsageError
from harness.metrics.longppl import KEY_TOKEN_DEFAULTS, SOFT_GAMMA
from harness.positions.inference import Inference

RECIPES = ("sft", "pic-sft", "longce", "lsm-reg", "longrecipe")

# Optimiser defaults per recipe, from the papers where they say (docs/training.md lists the sources):
# paper 000 (PIC-SFT, LLaMA-Factory): lr 5e-5, warmup ratio 0.1, 3 epochs; paper 004 A.2 (LongCE): lr 2e-5,
# 20 warmup steps, no weight decay, AdamW betas (0.9, 0.95); paper 002 Table 6 (LongRecipe): lr 5e-5, and
# its replay stage lr 5e-6 with decay 0.1. Paper 001 (LSM) gives no optimiser; LongCE's are used.
_SFT = {"lr": 5e-5, "warmup": 0.1, "epochs": 3.0, "weight_decay": 0.0, "betas": (0.9, 0.999)}
RECIPE_DEFAULTS: dict[str, dict[str, Any]] = {
    "sft": _SFT,
    "pic-sft": _SFT,
    "longce": {"lr": 2e-5, "warmup": 20, "epochs": 1.0, "weight_decay": 0.0, "betas": (0.9, 0.95)},
    "lsm-reg": {"lr": 2e-5, "warmup": 20, "epochs": 1.0, "weight_decay": 0.0, "betas": (0.9, 0.95)},
    "longrecipe": {"lr": 5e-5, "warmup": 0.1, "epochs": 1.0, "weight_decay": 0.0, "betas": (0.9, 0.999)},
    "longrecipe-replay": {"lr": 5e-6, "warmup": 0.1, "epochs": 1.0, "weight_decay": 0.1, "betas": (0.9, 0.999)},
}

# Dynamic PIC-SFT: paper 000 §4 trains with l_ic = 10 and l_rc = 600 (its inference sweeps use 4 / 200).
PIC_SFT_INITIAL, PIC_SFT_RECENT = 10, 600
NTK_SFT_RATIO = 16.0  # paper 000: NTK-aware PIC-SFT uses s_rr = 16
# Not given by paper 000 (our defaults, documented): s_cr of naive / Dynamic PIC-SFT and the segment length.
PIC_SFT_RATIO = 2.0
SEGMENT_LENGTH = 256


@dataclass
class TrainConfig:
    """Every option of ``lch train``; ``None`` means "the recipe's default" (:data:`RECIPE_DEFAULTS`)."""

    recipe: str
    model: str
    data: str
    output: str
    # positions during training = the inference the variant expects
    pic: str = "none"
    pic_ratio: float | None = None
    pic_initial: int | None = None
    pic_recent: int | None = None
    pic_layout: str = "paper"
    rope_base: float | None = None
    # data
    split: str = "train"
    prompt_field: str = "instruction"
    response_field: str = "response"
    text_field: str = "text"
    chat_template: bool = True
    max_length: int | None = None  # tokens per instruction example (answer truncated at its end)
    segment_length: int = SEGMENT_LENGTH  # Dynamic PIC-SFT
    seq_len: int = 1024  # text chunk length (longce, longrecipe replay); lsm-reg uses L + delta
    heldout: float = 0.1  # fraction of rows held out for the before / after loss
    # longce (paper 004): gamma, short context K, sliding window d (weights re-estimated by the model every step);
    # LongPPL's defaults, written once in harness.metrics.longppl
    gamma: float = SOFT_GAMMA
    short_context: int = KEY_TOKEN_DEFAULTS["trunc_len"]
    sliding_window: int = KEY_TOKEN_DEFAULTS["sliding_window"]
    # lsm-reg (paper 001)
    lam: float = 0.1
    context_length: int = 512
    delta: int | None = None
    # longrecipe (paper 002)
    stage: str = "extend"  # extend | replay
    target_length: int | None = None  # L^
    train_length: int | None = None  # tokens kept per example (paper: 30 % of L^)
    max_skip: int | None = None  # M; None: spread the segments over L^ (harness.positions.training.auto_max_skip)
    top_fraction: float = 0.2
    extended_model: str | None = None  # H' for the impactful-token analysis; default: the base at rope_base
    init: str | None = None  # an adapter to continue from (the replay stage)
    # optimisation
    lr: float | None = None
    warmup: float | None = None  # < 1: ratio of the steps; >= 1: steps
    epochs: float | None = None
    max_steps: int = -1
    batch_size: int = 1
    grad_accum: int = 1
    weight_decay: float | None = None
    full: bool = False  # full fine-tuning instead of LoRA
    lora_r: int = 8
    lora_alpha: int = 16
    lora_targets: str = "q_proj,k_proj,v_proj,o_proj"
    save_steps: int = 50
    log_steps: int = 1
    seed: int = 0
    dtype: str = "float32"
    resume: bool = False
    progress: bool = True

    def default(self, name: str) -> Any:
        """An optimiser option: the value given, else the recipe's default."""
        value = getattr(self, name, None)
        key = "longrecipe-replay" if self.recipe == "longrecipe" and self.stage == "replay" else self.recipe
        return RECIPE_DEFAULTS[key][name] if value is None else value

    def settings(self) -> dict[str, Any]:
        """What the variant file records as the recipe's settings: the data, the optimiser (defaults
        resolved) and the options of this recipe only."""
        common = ["data", "max_length", "heldout", "max_steps", "batch_size", "grad_accum", "full", "seed", "dtype"]
        own = {"sft": ["chat_template", "prompt_field", "response_field"],
               "pic-sft": ["chat_template", "prompt_field", "response_field"]
                          + (["segment_length"] if self.pic == "dynamic" else []),
               "longce": ["seq_len", "gamma", "short_context", "sliding_window"],
               "lsm-reg": ["lam", "context_length", "delta"],
               "longrecipe": ["stage"] + (["seq_len"] if self.stage == "replay" else
                                          ["target_length", "train_length", "max_skip", "top_fraction", "extended_model"])}
        out = {k: getattr(self, k) for k in common + own[self.recipe]}
        if not self.full:
            out.update(lora_r=self.lora_r, lora_alpha=self.lora_alpha, lora_targets=self.lora_targets)
        for name in ("lr", "warmup", "epochs", "weight_decay"):
            out[name] = self.default(name)
        return out


def check_config(cfg: TrainConfig) -> TrainConfig:
    """Fill the recipe-specific PIC defaults and refuse contradictory options (one line each)."""
    if cfg.recipe not in RECIPES:
        raise UsageError(f"recipe {cfg.recipe!r} is unknown; allowed: {', '.join(RECIPES)}")
    if cfg.recipe == "pic-sft" and cfg.pic == "none":
        cfg.recipe = "sft"  # plain SFT, the control of paper 000 Table 2
    if cfg.recipe == "sft" and cfg.pic != "none":
        cfg.recipe = "pic-sft"
    if cfg.pic_ratio is None:
        cfg.pic_ratio = NTK_SFT_RATIO if cfg.pic == "ntk" else PIC_SFT_RATIO if cfg.pic != "none" else 1.0
    if cfg.pic_initial is None:
        cfg.pic_initial = PIC_SFT_INITIAL
    if cfg.pic_recent is None:
        cfg.pic_recent = PIC_SFT_RECENT
    if cfg.rope_base is not None and cfg.rope_base <= 0:
        raise UsageError(f"--rope-base must be > 0, got {cfg.rope_base}")
    expected_inference(cfg)  # the PIC settings checked (one line naming the bad one)
    if cfg.recipe == "longrecipe" and cfg.pic != "none":
        raise UsageError("longrecipe sets its own position ids; use --rope-base, not --pic")
    if cfg.stage not in ("extend", "replay"):
        raise UsageError(f"--stage {cfg.stage!r} is unknown; allowed: extend, replay")
    if cfg.stage == "replay" and (cfg.recipe != "longrecipe" or not cfg.init):
        raise UsageError("--stage replay is LongRecipe's second stage: give --init <the extended adapter>")
    if cfg.recipe == "longrecipe" and cfg.stage == "extend" and not cfg.target_length:
        raise UsageError("longrecipe needs --target-length (L^, the context the positions should cover)")
    if cfg.recipe == "longrecipe" and cfg.stage == "extend" and cfg.extended_model is None and cfg.rope_base is None:
        raise UsageError("longrecipe's impactful-token analysis compares the base with an extended model: give "
                         "--rope-base (the extended RoPE base) or --extended-model")
    data = Path(cfg.data).expanduser()
    if not data.exists() and (data.suffix in (".jsonl", ".json", ".txt") or cfg.data.startswith(("/", ".", "~"))):
        raise MissingDataError(f"{data} does not exist: give a .jsonl file of training rows (or an HF dataset name)")
    if not 0 <= cfg.heldout < 1:
        raise UsageError(f"--heldout must be a fraction in [0, 1), got {cfg.heldout}")
    for name in ("batch_size", "grad_accum", "segment_length", "seq_len", "save_steps", "log_steps"):
        if getattr(cfg, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(cfg, name)}")
    if cfg.delta is None:  # the LSM regulariser's window offset: a quarter of L (it must be <= L - ceil(L/2))
        cfg.delta = max(1, cfg.context_length // 4)
    if cfg.full and cfg.init:
        raise UsageError("--init continues a LoRA adapter; it cannot be combined with --full")
    return cfg


def expected_inference(cfg: TrainConfig) -> Inference:
    """The inference the trained variant expects: the positions it was trained with (the PIC settings only
    under a PIC method: plain SFT expects standard inference) and its RoPE base."""
    inference = Inference(cfg.pic, float(cfg.pic_ratio), int(cfg.pic_initial), int(cfg.pic_recent), cfg.pic_layout,
                          cfg.rope_base)
    return inference if inference.entry.acts else Inference(rope_base=cfg.rope_base)
