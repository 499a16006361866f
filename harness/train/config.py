"""What ``lch train <recipe>`` is asked to do: the shared options (:class:`TrainConfig`), one dataclass per recipe
(:data:`RECIPE_CONFIGS`), the inference each variant expects. Fields are the command line (docs/training.md); field
metadata ``flag``: the flag if not ``--field-name`` (``False``: none); ``record``: whether the variant's ``settings``
record it (a bool or a predicate of the config; unset: a recipe's own fields only). Free of torch: ``lch`` reads it."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

from harness.core.errors import MissingDataError, UsageError, check_known
from harness.core.options import MAX_SAMPLES, MAX_SEED, MAX_TOKENS, check_domains, flag_name, option
from harness.longppl.formulas import KEY_TOKEN_DEFAULTS, SOFT_GAMMA
from harness.pic.inference import VARIANT_KEYS, Inference, options_class
from harness.pic.methods import NO_PIC, PIC_METHODS

# Dynamic PIC-SFT: the PIC paper, §4 trains with l_ic = 10 and l_rc = 600 (its inference sweeps use 4 / 200).
PIC_SFT_INITIAL, PIC_SFT_RECENT = 10, 600
NTK_SFT_RATIO = 16.0  # the PIC paper: NTK-aware PIC-SFT uses s_rr = 16
# Not given by the PIC paper (our defaults, documented): s_cr of naive / Dynamic PIC-SFT and the segment length.
PIC_SFT_RATIO = 2.0
SEGMENT_LENGTH = 256
STAGES = ("extend", "replay")  # LongRecipe's stages


def _lora(cfg: TrainConfig) -> bool:
    return not cfg.full


@dataclass
class _Run:
    recipe: str = option(flag=False)
    model: str = option(help="base HF model (folder or hub name)")
    data: str = option(help="local .jsonl / .json / .txt / folder, or an HF dataset name", record=True)
    output: str = option(help="folder for the adapter, checkpoints and loss log")


# the inference the variant expects: Inference's settings under the model args' names, with training's help and
# defaults where they differ (None: the recipe's default, by check_config); made at run time from Inference's fields,
# so a type checker knows none of them
_PicOptions: Any = options_class(
    "_PicOptions",
    _Run,
    {
        "method": dict(help="PIC while training"),
        "ratio": dict(
            default=None,
            help=f"s_cr (naive/dynamic, default {PIC_SFT_RATIO:g}) or s_rr (ntk, default {NTK_SFT_RATIO:g})",
        ),
        "initial": dict(
            default=None, high=MAX_TOKENS, help=f"l_ic (default {PIC_SFT_INITIAL}, the PIC paper's PIC-SFT)"
        ),
        "recent": dict(default=None, high=MAX_TOKENS, help=f"l_rc (default {PIC_SFT_RECENT}, the PIC paper's PIC-SFT)"),
        "rope_base": dict(help="train (and evaluate) at this RoPE base"),
    },
)


@dataclass
class TrainConfig(_PicOptions):
    """The options every recipe shares; a recipe's subclass adds its own and ``OPTIMISER`` (the papers' ``lr`` /
    ``warmup`` / ``epochs`` / ``weight_decay`` / ``betas`` when not given). Build one with :meth:`for_recipe`."""

    OPTIMISER: ClassVar[dict[str, Any]] = {}

    # data
    split: str = option("train", "split of an HF dataset")
    text_field: str = option("text", "field of the texts")
    max_length: int | None = option(
        None, "tokens per example (longer ones are cut)", record=True, low=1, high=MAX_TOKENS
    )
    seq_len: int = option(1024, "text chunk length (longce, replay)", low=1, high=MAX_TOKENS)  # lsm-reg uses L + delta
    heldout: float = option(0.1, "fraction of rows held out for the loss before/after", record=True, low=0.0, high=0.99)
    # optimisation (None: the recipe's OPTIMISER value)
    lr: float | None = option(None, "learning rate", record=True, low=0.0)
    warmup: float | None = option(None, "< 1: ratio of the steps; >= 1: steps", record=True, low=0.0)
    epochs: float | None = option(None, "epochs", record=True, low=0.0)
    max_steps: int = option(-1, "stop after this many optimiser steps; -1: the epochs decide", record=True, low=-1)
    batch_size: int = option(1, "examples per step", record=True, low=1, high=MAX_SAMPLES)
    grad_accum: int = option(1, "gradient accumulation steps", record=True, low=1, high=MAX_SAMPLES)
    weight_decay: float | None = option(None, "weight decay", record=True, low=0.0)
    full: bool = option(False, "full fine-tuning instead of LoRA", record=True)
    lora_r: int = option(8, "LoRA rank", record=_lora, low=1)
    lora_alpha: int = option(16, "LoRA alpha", record=_lora, low=1)
    lora_targets: str = option("q_proj,k_proj,v_proj,o_proj", "LoRA target modules", record=_lora)
    save_steps: int = option(50, "checkpoint every this many steps", low=1)
    log_steps: int = option(1, "log the loss every this many steps", low=1)
    seed: int = option(0, "random seed", record=True, low=0, high=MAX_SEED)
    dtype: str = option("float32", "weights dtype", record=True)
    resume: bool = option(False, "continue from the last checkpoint in --output")
    progress: bool = option(True, "no progress bars", flag="--quiet")

    def __post_init__(self) -> None:
        if not isinstance(self, config_class(self.recipe)):  # e.g. TrainConfig(recipe="longce", ...) itself
            raise TypeError(
                f"the config of recipe {self.recipe!r} is {config_class(self.recipe).__name__}: "
                "build it with TrainConfig.for_recipe"
            )

    @classmethod
    def for_recipe(cls, recipe: str, **options: Any) -> TrainConfig:
        """The config of ``recipe`` with ``options``; an unknown recipe or option is a one-line :class:`UsageError`."""
        klass = config_class(recipe)
        unknown = [name for name in options if name not in {f.name for f in fields(klass)}]
        if unknown:
            raise UsageError(f"{flag_name(unknown[0])} is not an option of `lch train {recipe}`")
        return klass(recipe=recipe, **options)

    def optimiser(self) -> dict[str, Any]:
        """The recipe's optimiser defaults for this config."""
        return self.OPTIMISER

    @classmethod
    def optimiser_help(cls) -> dict[str, str]:
        """The optimiser defaults as ``lch train <recipe> --help`` shows them."""
        return {name: str(value) for name, value in cls.OPTIMISER.items()}

    def default(self, name: str) -> Any:
        """An optimiser option: the value given, else the recipe's default."""
        value = getattr(self, name, None)
        return self.optimiser()[name] if value is None else value

    def records(self, name: str) -> bool:
        """Whether the variant file's ``settings`` record field ``name`` (its ``record`` metadata)."""
        f = next(f for f in fields(self) if f.name == name)
        rule = f.metadata.get("record", name not in _COMMON)
        return rule(self) if callable(rule) else bool(rule)

    def settings(self) -> dict[str, Any]:
        """The variant file's ``settings``: the fields :meth:`records` keeps, optimiser defaults resolved."""
        return {
            f.name: self.default(f.name) if f.name in self.optimiser() else getattr(self, f.name)
            for f in fields(self)
            if self.records(f.name)
        }

    def check(self) -> None:
        """Refuse this recipe's contradictory options and fill its own derived defaults (one line each)."""


_COMMON = frozenset(f.name for f in fields(TrainConfig))


def trains_in_segments(cfg: Any) -> bool:
    """Whether ``cfg``'s PIC method moves cached keys, so trains on ``segment_length`` segments (Dynamic PIC-SFT)."""
    method = PIC_METHODS.get(getattr(cfg, "pic", NO_PIC))
    return method is not None and method.moves_cached_keys


@dataclass
class SftConfig(TrainConfig):
    """``sft`` and ``pic-sft`` (the PIC paper): instruction rows; ``pic-sft`` with PIC while training."""

    # the PIC paper, §4 (PIC-SFT, trained with LLaMA-Factory): lr 5e-5, warmup ratio 0.1, 3 epochs
    OPTIMISER: ClassVar[dict[str, Any]] = {
        "lr": 5e-5,
        "warmup": 0.1,
        "epochs": 3.0,
        "weight_decay": 0.0,
        "betas": (0.9, 0.999),
    }

    chat_template: bool = option(True, "plain 'prompt\\n\\nanswer' instead of the tokenizer's chat template")
    prompt_field: str = option("instruction", "field of the prompt")
    response_field: str = option("response", "field of the response")
    segment_length: int = option(
        SEGMENT_LENGTH,
        "Dynamic PIC-SFT segment (tokens)",
        record=lambda cfg: trains_in_segments(cfg),
        low=1,
        high=MAX_TOKENS,
    )


@dataclass
class LongCEConfig(TrainConfig):
    """``longce`` (the LongPPL paper): CE re-weighted by the model's own long-context gain, on ``seq_len`` chunks."""

    # the LongPPL paper App. A.2: lr 2e-5, 20 warmup steps, no weight decay, AdamW betas (0.9, 0.95)
    OPTIMISER: ClassVar[dict[str, Any]] = {
        "lr": 2e-5,
        "warmup": 20,
        "epochs": 1.0,
        "weight_decay": 0.0,
        "betas": (0.9, 0.95),
    }

    gamma: float = option(SOFT_GAMMA, "cap of the LongCE weights", low=0.0)
    short_context: int = option(
        KEY_TOKEN_DEFAULTS["trunc_len"], "K: tokens of the short context", low=1, high=MAX_TOKENS
    )
    sliding_window: int = option(
        KEY_TOKEN_DEFAULTS["sliding_window"], "d: step of the short windows", low=1, high=MAX_TOKENS
    )

    def records(self, name: str) -> bool:
        return name == "seq_len" or super().records(name)


@dataclass
class LsmRegConfig(TrainConfig):
    """``lsm-reg`` (the LSM paper): CE + lambda x the misalignment of two windows of ``L`` tokens, ``delta`` apart."""

    # the LSM paper gives no optimiser: LongCE's are used
    OPTIMISER: ClassVar[dict[str, Any]] = LongCEConfig.OPTIMISER

    lam: float = option(0.1, "lambda of the misalignment term", low=0.0)
    context_length: int = option(512, "L: window length", low=2, high=MAX_TOKENS)
    delta: int | None = option(None, "offset of the second window (default L/4)", low=1, high=MAX_TOKENS)

    def check(self) -> None:
        if self.delta is None:  # the LSM regulariser's window offset: a quarter of L (it must be <= L - ceil(L/2))
            self.delta = max(1, self.context_length // 4)


def _extending(cfg: LongRecipeConfig) -> bool:
    return cfg.stage != "replay"


@dataclass
class LongRecipeConfig(TrainConfig):
    """``longrecipe`` (the LongRecipe paper): impactful sentences at skip positions, then ``--stage replay``."""

    # the LongRecipe paper, Table 6: lr 5e-5; its replay stage (§5.3): lr 5e-6 with weight decay 0.1
    OPTIMISER: ClassVar[dict[str, Any]] = {
        "lr": 5e-5,
        "warmup": 0.1,
        "epochs": 1.0,
        "weight_decay": 0.0,
        "betas": (0.9, 0.999),
    }
    REPLAY: ClassVar[dict[str, Any]] = {
        "lr": 5e-6,
        "warmup": 0.1,
        "epochs": 1.0,
        "weight_decay": 0.1,
        "betas": (0.9, 0.999),
    }

    stage: str = option("extend", "LongRecipe stage", choices=STAGES)
    target_length: int | None = option(
        None, "L^: the context the positions cover", record=_extending, low=1, high=MAX_TOKENS
    )
    train_length: int | None = option(
        None, "tokens kept per example (default 30% of L^)", record=_extending, low=1, high=MAX_TOKENS
    )
    # M; None: spread the segments over L^ (harness.train.positions.auto_max_skip)
    max_skip: int | None = option(
        None, "M: skips drawn from 0..M (default: spread over L^)", record=_extending, low=0, high=MAX_TOKENS
    )
    top_fraction: float = option(0.2, "impactful tokens per position", record=_extending, low=0.0, high=1.0)
    extended_model: str | None = option(
        None, "H' of the impactful-token analysis (default: base at --rope-base)", record=_extending
    )
    # recorded by train_recipe as {"path", "recipe"} of the adapter continued
    init: str | None = option(None, "adapter to continue (the replay stage)", record=False)

    def optimiser(self) -> dict[str, Any]:
        return self.REPLAY if self.stage == "replay" else self.OPTIMISER

    @classmethod
    def optimiser_help(cls) -> dict[str, str]:
        replay = {name: str(value) for name, value in cls.REPLAY.items()}
        return {
            name: value if replay[name] == value else f"{value}; --stage replay: {replay[name]}"
            for name, value in super().optimiser_help().items()
        }

    def records(self, name: str) -> bool:
        return (name == "seq_len" and self.stage == "replay") or super().records(name)

    def check(self) -> None:
        if self.stage == "replay" and not self.init:
            raise UsageError("--stage replay is LongRecipe's second stage: give --init <the extended adapter>")
        if self.stage == "extend" and not self.target_length:
            raise UsageError("longrecipe needs --target-length (L^, the context the positions should cover)")
        if self.stage == "extend" and self.extended_model is None and self.rope_base is None:
            raise UsageError(
                "longrecipe's impactful-token analysis compares the base with an extended model: give "
                "--rope-base (the extended RoPE base) or --extended-model"
            )
        if self.full and self.init:
            raise UsageError("--init continues a LoRA adapter; it cannot be combined with --full")


# the recipes, in the order errors list them; sft is pic-sft with --pic none (check_config switches the two)
RECIPE_CONFIGS: dict[str, type[TrainConfig]] = {
    "sft": SftConfig,
    "pic-sft": SftConfig,
    "longce": LongCEConfig,
    "lsm-reg": LsmRegConfig,
    "longrecipe": LongRecipeConfig,
}
RECIPES = tuple(RECIPE_CONFIGS)
# one line per recipe for `lch train --help`, in the order it lists them
RECIPE_HELP = {
    "pic-sft": "SFT with Position ID Compression (the PIC paper): --pic naive|ntk|dynamic, or none for plain SFT",
    "sft": "plain SFT on instruction data (the control of PIC-SFT)",
    "longce": "LongCE (the LongPPL paper): CE re-weighted by the model's own long-context gain",
    "lsm-reg": "CE + lambda * long-short misalignment (the LSM paper)",
    "longrecipe": (
        "LongRecipe (the LongRecipe paper): impactful sentences at skip positions; --stage replay; then `merge`"
    ),
}


def config_class(recipe: str) -> type[TrainConfig]:
    """The config dataclass of ``recipe``; an unknown one is a one-line :class:`UsageError`."""
    check_known("recipe", recipe, RECIPE_CONFIGS)
    return RECIPE_CONFIGS[recipe]


def check_config(cfg: TrainConfig) -> TrainConfig:
    """``cfg`` with the recipe's PIC defaults filled; contradictory options are refused (one line each)."""
    config_class(cfg.recipe)  # an unknown recipe is refused
    check_domains(cfg, flag_name)  # every option inside its declared domain, named by its flag
    if cfg.recipe in ("sft", "pic-sft"):  # sft: plain SFT, the control of the PIC paper, Table 2
        cfg.recipe = "sft" if cfg.pic == NO_PIC else "pic-sft"
    if cfg.pic_ratio is None:
        cfg.pic_ratio = NTK_SFT_RATIO if cfg.pic == "ntk" else PIC_SFT_RATIO if cfg.pic != NO_PIC else 1.0
    if cfg.pic_initial is None:
        cfg.pic_initial = PIC_SFT_INITIAL
    if cfg.pic_recent is None:
        cfg.pic_recent = PIC_SFT_RECENT
    expected_inference(cfg)  # the PIC settings checked (one line naming the bad one)
    if cfg.recipe == "longrecipe" and cfg.pic != NO_PIC:
        raise UsageError("longrecipe sets its own position ids; use --rope-base, not --pic")
    cfg.check()
    data = Path(cfg.data).expanduser()
    if not data.exists() and (data.suffix in (".jsonl", ".json", ".txt") or cfg.data.startswith(("/", ".", "~"))):
        raise MissingDataError(f"{data} does not exist: give a .jsonl file of training rows (or an HF dataset name)")
    return cfg


def expected_inference(cfg: TrainConfig) -> Inference:
    """The inference the variant expects: its training PIC settings (none for plain SFT) and RoPE base."""
    inference = Inference.from_model_args({key: getattr(cfg, key) for key in VARIANT_KEYS})  # the model args' names
    return inference if inference.entry.acts else Inference(rope_base=cfg.rope_base)
