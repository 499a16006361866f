"""Scoring on vLLM: per-token log-probabilities from ``prompt_logprobs``, and the LSM runner.

* ``token_logprobs``: one request per window (:mod:`harness.positions.windows`) with
  ``SamplingParams(max_tokens=1, prompt_logprobs=0)``; vLLM returns, for every prompt token but the first,
  the log-probability of that token given the ones before it (fp32 log-softmax in vLLM's sampler), which is
  exactly the ``logprobs`` list of the request.
* ``lsm`` needs whole next-token distributions at many positions (the symmetric cross-entropy of two of
  them), which ``prompt_logprobs`` cannot return at a sane cost (a vocabulary-sized dict per position).
  vLLM runs one runner per engine, so a second engine with the pooling runner (``token_embed``, ``ALL``
  pooling, no activation) returns the final hidden states of each window, and the generating engine's own
  LM head (``compute_logits``: its vocabulary-parallel head, soft-capping and scaling included) turns the
  rows the estimator needs into logits, through ``LLM.apply_model``. Both engines get the same model,
  dtype, length and RoPE / PIC overrides, so positions are those of the evaluated variant.
"""

from __future__ import annotations

from typing import Any

import torch

from harness.models.lsm import LsmRunner

POOLING_ARGS = {"runner": "pooling", "convert": "embed",
                "pooler_config": {"task": "token_embed", "tok_pooling_type": "ALL", "use_activation": False}}
# engine args of the generating engine that a pooling engine does not take
_GENERATION_ONLY = ("enable_lora", "max_lora_rank", "max_num_seqs", "enable_prefix_caching", "logits_processors",
                    "max_logprobs")


def prompt_token_logprobs(output: Any, token_ids: list[int]) -> list[float]:
    """``log P(token_ids[i + 1] | token_ids[: i + 1])`` for every prompt token but the first, from a vLLM
    ``RequestOutput`` of ``token_ids`` with ``prompt_logprobs=0``."""
    entries = output.prompt_logprobs
    if entries is None or len(entries) != len(token_ids):
        raise RuntimeError(f"vLLM returned {0 if entries is None else len(entries)} prompt log-probabilities for "
                           f"{len(token_ids)} prompt tokens")
    return [float(entries[i][token_ids[i]].logprob) for i in range(1, len(token_ids))]


def pooling_engine_args(model_args: dict) -> dict:
    """Engine args of the pooling engine beside a generating engine built from ``model_args``."""
    args = {k: v for k, v in model_args.items() if k not in _GENERATION_ONLY and v is not None}
    return {**args, **POOLING_ARGS}


def vllm_lsm_runner(generating: Any, pooling: Any, lora_request: Any = None) -> LsmRunner:
    """The :class:`~harness.models.lsm.LsmRunner` of a generating ``vllm.LLM`` (its LM head) and a pooling
    one (final hidden states)."""
    from vllm import TokensPrompt

    def hidden(windows: torch.Tensor) -> torch.Tensor:
        prompts = [TokensPrompt(prompt_token_ids=row.tolist()) for row in windows]
        outputs = pooling.encode(prompts, pooling_task="token_embed", use_tqdm=False, lora_request=lora_request)
        return torch.stack([out.outputs.data.float() for out in outputs])

    def logits(rows: torch.Tensor) -> torch.Tensor:
        def head(model: Any) -> torch.Tensor | None:
            device = next(model.parameters()).device
            out = model.compute_logits(rows.to(device=device, dtype=next(model.parameters()).dtype))
            return None if out is None else out.float().cpu()

        # under tensor parallelism every rank runs the head and the first rank holds the gathered logits
        return next(out for out in generating.apply_model(head) if out is not None)

    return LsmRunner(hidden, logits)
