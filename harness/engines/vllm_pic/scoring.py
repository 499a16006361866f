"""The engine core's scoring primitives on vLLM: final hidden states from a second engine with the pooling runner
beside the generating one (same model, dtype, length and RoPE / PIC overrides), the generating engine's own head
through ``LLM.apply_model``, and, where no pooling engine can run (data-parallel replicas), log-probabilities of given
ids from ``prompt_logprobs`` (which vLLM computes from ``[tokens x vocab]`` fp32 logits)."""

from __future__ import annotations

from typing import Any

import torch

LAYER = "models"  # harness/devtools/layers.py

POOLING_ARGS = {
    "runner": "pooling",
    "convert": "embed",
    "pooler_config": {"task": "token_embed", "tok_pooling_type": "ALL", "use_activation": False},
}
# engine args of the generating engine that a pooling engine does not take
_GENERATION_ONLY = (
    "enable_lora",
    "max_lora_rank",
    "max_num_seqs",
    "enable_prefix_caching",
    "logits_processors",
    "max_logprobs",
)


def prompt_token_logprobs(output: Any, token_ids: list[int]) -> list[float]:
    """``log P(token_ids[i + 1] | token_ids[: i + 1])`` for every prompt token but the first, from a vLLM
    ``RequestOutput`` of ``token_ids`` with ``prompt_logprobs=0``."""
    entries = output.prompt_logprobs
    if entries is None or len(entries) != len(token_ids):
        raise RuntimeError(
            f"vLLM returned {0 if entries is None else len(entries)} prompt log-probabilities for "
            f"{len(token_ids)} prompt tokens"
        )
    return [float(entries[i][token_ids[i]].logprob) for i in range(1, len(token_ids))]


def pooling_engine_args(model_args: dict) -> dict:
    """Engine args of the pooling engine beside a generating engine built from ``model_args``."""
    return {k: v for k, v in model_args.items() if k not in _GENERATION_ONLY and v is not None} | POOLING_ARGS


def pooled_hidden(pooling: Any, rows: list[list[int]], lora_request: Any = None) -> list[torch.Tensor]:
    """Final hidden states [len(row), H] (fp32, CPU) of each token row, from a pooling ``vllm.LLM``."""
    from vllm import TokensPrompt

    outputs = pooling.encode(
        [TokensPrompt(prompt_token_ids=row) for row in rows],
        pooling_task="token_embed",
        use_tqdm=False,
        lora_request=lora_request,
    )
    return [out.outputs.data.float().cpu() for out in outputs]


class _HeadOn:
    """The function ``LLM.apply_model`` runs on each rank's model: its head on the given hidden rows. A class at
    module level, not a closure: under tensor parallelism vLLM pickles it to its worker processes."""

    def __init__(self, hidden: torch.Tensor) -> None:
        self.hidden = hidden

    def __call__(self, model: Any) -> torch.Tensor | None:
        parameter = next(model.parameters())
        out = model.compute_logits(self.hidden.to(device=parameter.device, dtype=parameter.dtype))
        return None if out is None else out.float().cpu()


def head_logits(generating: Any, hidden: torch.Tensor) -> torch.Tensor:
    """fp32 logits [m, V] of hidden rows [m, H] from the generating ``vllm.LLM``'s own head."""
    # under tensor parallelism every rank runs the head and the first rank holds the gathered logits
    return next(out for out in generating.apply_model(_HeadOn(hidden)) if out is not None)
