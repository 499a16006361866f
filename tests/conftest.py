"""Shared fixtures: tiny random-init models built in code (no hub), seeded."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

# Offline before anything imports datasets / huggingface_hub (they read these at import time).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def tiny_causal_lm(arch: str = "llama", seed: int = 0, **overrides):
    """A 2-layer model of the given architecture with random weights, in eval mode, fp32."""
    from harness.tiny import tiny_config
    from transformers import AutoModelForCausalLM

    config = tiny_config(arch, vocab_size=97, hidden=64, layers=2, heads=4, kv_heads=2, max_positions=4096)
    for key, value in overrides.items():
        setattr(config, key, value)
    config._attn_implementation = overrides.get("_attn_implementation", "sdpa")
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config).eval()


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    """Tiny models built by harness.tiny go to a per-session folder, never the user's cache."""
    os.environ["LCH_CACHE"] = str(tmp_path_factory.mktemp("lch-cache"))


@pytest.fixture(scope="session")
def tiny_model_dir(_isolated_cache) -> Path:
    from harness.tiny import build_tiny_model

    return build_tiny_model(max_positions=4096, train_steps=150)
