"""The settings of a soft-prompt compressor (the EPL paper) and of its training as option dataclasses: the one home of
their defaults (the EPL paper, Table 8) and domains. Torch-free."""

from __future__ import annotations

from dataclasses import dataclass

from harness.compressor.positions import CARRIERS, LAYOUTS
from harness.core.errors import UsageError
from harness.core.options import MAX_SAMPLES, MAX_SEED, MAX_TOKENS, check_domains, flag_name, option


@dataclass
class CompressorConfig:
    """``carrier`` icae|500x, ``layout`` dpl|upl|epl, chunk size L, memory count |M|, LoRA settings
    (the EPL paper: rank 128, alpha 256 on q and v)."""

    carrier: str = option("icae", "carrier of the compressed context", choices=CARRIERS)
    layout: str = option("epl", "position layout", choices=LAYOUTS)
    chunk_size: int = option(510, "L: tokens per chunk", low=1, high=MAX_TOKENS)
    n_memory: int = option(102, "|M|: memory tokens per chunk", low=1, high=MAX_TOKENS)
    lora_r: int = option(128, "LoRA rank", low=1)
    lora_alpha: int = option(256, "LoRA alpha", low=1)
    lora_dropout: float = option(0.0, "LoRA dropout", low=0.0, high=1.0)

    def __post_init__(self) -> None:
        check_domains(self)


@dataclass
class TrainSettings:
    """``lch train-compressor``'s training settings (the EPL paper's); a value outside its domain names its flag."""

    stage: str = option("pretrain", "pretrain (AE + LM) or finetune (QA)", choices=("pretrain", "finetune"))
    steps: int = option(20000, "optimiser steps", low=1)
    batch_size: int = option(16, "examples per step", low=1, high=MAX_SAMPLES)
    lr: float | None = option(None, "default: 1e-4 pretrain, 5e-5 finetune", low=0.0)
    warmup: int = option(300, "warm-up steps", low=0)
    weight_decay: float = option(0.1, "weight decay", low=0.0)
    clip_norm: float = option(2.0, "gradient clipping norm", low=0.0)
    alpha: float = option(0.5, "weight of the AE loss against the LM loss", low=0.0, high=1.0)
    min_length: int = option(510, "|X|: fewest tokens of a pretraining window", low=2, high=MAX_TOKENS)
    max_length: int = option(2040, "|X|: most tokens of a pretraining window", low=2, high=MAX_TOKENS)
    seed: int = option(0, "random seed", low=0, high=MAX_SEED)

    def __post_init__(self) -> None:
        check_domains(self, flag_name)
        if self.max_length < self.min_length:
            raise UsageError(
                f"--max-length {self.max_length} is below --min-length {self.min_length}: give "
                "--max-length >= --min-length"
            )
