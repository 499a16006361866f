"""The memory a vllm-pic run takes, from the model's config alone (``lch plan``): per engine the weights, the KV cache
and the larger of its profile run's two peaks (a prefill chunk's work, the sampler's dummy run); two engines when the
run scores from hidden states. On a GPU each engine must fit its ``gpu_memory_utilization`` share; on the CPU both
share one process, with the KV space ``VLLM_CPU_KVCACHE_SPACE`` gives and vLLM's own overhead."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.core.sizes import GIB, in_words
from harness.engines.vllm_pic.env import CPU_RUNTIME_ENV

LAYER = "models"  # harness/devtools/layers.py

# vLLM 0.32's defaults for its LLM class (engine/arg_utils.py): (max_num_batched_tokens, max_num_seqs)
CPU_DEFAULTS = (4096, 256)
GPU_DEFAULTS = (8192, 256)
LARGE_GPU_DEFAULTS = (16384, 1024)  # a GPU of 70 GiB or more other than an A100
LARGE_GPU = 70 * GIB
# measured (benchmarks/plan_memory_cpu.py --engine vllm-pic): what a vllm-pic CPU process holds beyond an hf-pic run's,
# and the bytes per logit of the sampler's dummy run (logits, log-softmax, probabilities, sorted values, indices)
CPU_OVERHEAD = int(0.8 * GIB)
SAMPLER_BYTES_PER_LOGIT = 40


@dataclass(frozen=True)
class EngineShape:
    """What sizes one vLLM engine of a model: bytes of its weights, a function of its KV cache bytes per sequence
    length, its hidden size, its vocabulary, and the work of a pass over ``n`` tokens."""

    weights: int
    cache: Callable[[int], int]
    hidden: int
    vocab: int
    work: Callable[[int], int]


def engine_defaults(model_args: Mapping[str, Any], kind: str, device_size: int) -> tuple[int, int]:
    """``(max_num_batched_tokens, max_num_seqs)`` of an engine: the model args', else vLLM's default on the device."""
    default = CPU_DEFAULTS if kind == "cpu" else LARGE_GPU_DEFAULTS if device_size >= LARGE_GPU else GPU_DEFAULTS
    return (
        int(model_args.get("max_num_batched_tokens") or default[0]),
        int(model_args.get("max_num_seqs") or default[1]),
    )


def cpu_kv_space() -> int:
    """Bytes of KV cache vLLM's CPU backend is given (``VLLM_CPU_KVCACHE_SPACE`` GiB, ours by default)."""
    return int(os.environ.get("VLLM_CPU_KVCACHE_SPACE") or CPU_RUNTIME_ENV["VLLM_CPU_KVCACHE_SPACE"]) << 30


def vllm_need(
    shape: EngineShape,
    model_args: Mapping[str, Any],
    kind: str,
    device_size: int,
    prompt: int,
    budget: int,
    scores: bool,
    pooled: bool,
) -> int:
    """Bytes of one request of ``prompt`` tokens (and ``budget`` generated): on a GPU one engine's (against its share),
    on the CPU the whole process's less what an hf-pic run holds before its model loads (the plan's runtime)."""
    chunk, seqs = engine_defaults(model_args, kind, device_size)
    length = int(model_args.get("max_model_len") or prompt + budget)
    cache = shape.cache(length) if kind == "cuda" else max(shape.cache(length), cpu_kv_space())
    profile = max(shape.work(min(prompt, chunk)), min(seqs, chunk) * shape.vocab * SAMPLER_BYTES_PER_LOGIT)
    pooled_rows = prompt * shape.hidden * 4 if scores and pooled else 0  # the final hidden states the core reads
    if kind == "cuda":
        return shape.weights + cache + profile + pooled_rows
    return CPU_OVERHEAD + (2 if pooled else 1) * (shape.weights + cache + profile) + pooled_rows


def cpu_cache_short(shape: EngineShape, model_args: Mapping[str, Any], tokens: int) -> str | None:
    """Why vLLM's CPU KV space cannot hold one sequence of ``max_model_len`` (else ``tokens``) tokens, or None."""
    length = int(model_args.get("max_model_len") or tokens)
    cache, space = shape.cache(length), cpu_kv_space()
    if cache <= space:
        return None
    return (
        f"one sequence of {length:,} tokens needs {in_words(cache)} of KV cache, vLLM's CPU backend is given "
        f"{in_words(space)}: set VLLM_CPU_KVCACHE_SPACE={-(-cache // GIB)} (GiB)"
    )
