"""``vllm-pic``: lm-eval's vLLM model with PIC (naive, NTK-aware, Dynamic), serving every request type of our tasks.

PIC runs as ``Pic<Arch>`` (:mod:`harness.pic.vllm.model`), selected by ``hf_overrides``; Dynamic PIC needs engine
settings (docs/vllm.md; a contradicting arg is refused in one line). Our request types come from the engine core over
final hidden states of a pooling engine beside the generating one (:mod:`harness.engines.vllm_pic.scoring`) and the
generating engine's head; under data parallelism ``token_logprobs`` comes from vLLM's ``prompt_logprobs``."""

from __future__ import annotations

import logging
import os
from typing import Any

import lm_eval.models  # noqa: F401  (the built-in models register before ours)
import torch

from harness.core.errors import LchError, UsageError
from harness.engines.core import EngineCore, Generated
from harness.engines.model_args import (
    VLLM_PIC_ARGS,
    check_pic_on_vllm,
    check_vllm_pic_args,
    local_config,
    resolve_model_args,
)
from harness.engines.registry import check_model_args, lch_model
from harness.engines.requests import LongGenerationOptions
from harness.engines.vllm_pic.env import with_cpu_runtime_defaults
from harness.engines.vllm_pic.imports import lm_eval_vllm_class, unavailable
from harness.pic.inference import Inference

log = logging.getLogger(__name__)

_VLLM, _VLLM_ERROR = lm_eval_vllm_class()
_Base: Any  # lm-eval's VLLM when it imports, else its LM
if _VLLM is not None:
    _Base = _VLLM
else:  # no vLLM (the project's CPU venv): the class still imports and explains itself
    from lm_eval.api import model as _lm_model

    _Base = _lm_model.LM

DOCS_PER_CALL = 16  # rows / prompts per vLLM call of our requests: responses are stored as each call ends
POOLED_GPU_MEMORY = 0.45  # each of vllm-pic's two engines (generating, pooling) when a run scores from hidden states


def rope_parameters(hf_config: dict) -> dict:
    """The RoPE parameters of an HF config dict, in the transformers>=5 ``rope_parameters`` form."""
    params = dict(hf_config.get("rope_parameters") or {})
    if not params:  # configs written by transformers 4.x
        params = dict(hf_config.get("rope_scaling") or {})
        params.setdefault("rope_theta", hf_config.get("rope_theta", 10000.0))
    params.setdefault("rope_type", params.pop("type", "default"))
    return params


def vllm_pic_overrides(hf_config: dict, inference: Inference) -> dict:
    """``hf_overrides`` that make vLLM apply ``inference``'s PIC method as ``Pic<Arch>`` (``{}`` for ``none``)."""
    from harness.pic.vllm.config import pic_overrides

    return pic_overrides(hf_config, inference)


def _read_hf_config(pretrained: str) -> dict:
    local = local_config(pretrained)
    if local is not None:
        return local
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(pretrained).to_dict()


def with_rope_base(hf_config: dict, base: float | None) -> dict:
    """The config dict with RoPE base ``base`` (unchanged for ``None``)."""
    if base is None:
        return hf_config
    return {**hf_config, "rope_parameters": {**rope_parameters(hf_config), "rope_theta": float(base)}}


def _ray_with_gpu_slots(slots: int) -> None:
    """On a machine without GPUs, start Ray with ``slots`` logical GPU slots: lm-eval's data-parallel replicas ask Ray
    for GPUs and would otherwise wait forever. lm-eval shuts Ray down after every call, so this runs before each (its
    data-parallel path offers no hook for Ray's resources)."""
    if torch.cuda.is_available():
        return
    import ray

    if not ray.is_initialized():
        ray.init(num_gpus=slots, include_dashboard=False)


def generated(completion: Any) -> Generated:
    """The :class:`~harness.engines.core.Generated` of a vLLM ``CompletionOutput``, counted as hf-pic counts: the EOS or
    stop token vLLM keeps in ``token_ids`` dropped. The core decodes the tokens itself, not vLLM's incremental
    ``text`` (which holds back a character cut by ``max_tokens`` where a whole decode writes U+FFFD)."""
    stopped = completion.finish_reason == "stop"
    on_stop_token = stopped and (completion.stop_reason is None or isinstance(completion.stop_reason, int))
    tokens = list(completion.token_ids)
    if on_stop_token and tokens:
        tokens = tokens[:-1]
    return Generated(tokens, stopped)


def scores_from_hidden(data_parallel_size: int, moves_cached_keys: bool) -> bool:
    """Whether vllm-pic scores from a pooling engine's hidden states (else from ``prompt_logprobs``): with one replica
    and a method a plain forward applies (not one that moves cached keys)."""
    return data_parallel_size == 1 and not moves_cached_keys


def lsm_refusal(data_parallel_size: int, moves_cached_keys: bool) -> str | None:
    """Why vllm-pic cannot serve ``lsm`` (it needs the pooling engine) under these settings and what to do, or None."""
    if moves_cached_keys:
        return "without pic=dynamic only (its pooling engine has no Dynamic PIC): use --model hf-pic"
    if data_parallel_size > 1:
        return (
            "with data_parallel_size=1 only (a pooling engine runs beside the generating one): use "
            "tensor_parallel_size, or --model hf-pic"
        )
    return None


class EngineStartError(LchError, RuntimeError):
    """vLLM's engine failed to start (an engine process's log, or vLLM's ``ValueError`` in this process, says why)."""


@lch_model("vllm-pic", preflight=check_vllm_pic_args)
class VLLMPicLM(EngineCore, _Base):
    """lm-eval ``vllm`` with hf-pic's PIC / RoPE model args (but ``pic_impl``), their defaults from a variant file in
    ``lora_local_path`` or ``pretrained``; serves our request types too (module docstring)."""

    LIBRARIES = ("torch", "transformers", "vllm")

    def __init__(self, **model_args: Any) -> None:
        if _VLLM_ERROR is None:  # every check, Dynamic PIC's included
            resolved = check_model_args(self.ENGINE_NAME, model_args)
        else:  # the inference args' errors first, then the import error below
            resolved = resolve_model_args(model_args, "lora_local_path", VLLM_PIC_ARGS)
            check_pic_on_vllm(resolved, model_args)
        self.adopt(resolved)
        inference, pretrained, kwargs = resolved.inference, resolved.pretrained, dict(resolved.engine_args)
        config = with_rope_base(_read_hf_config(pretrained), inference.rope_base)
        overrides = vllm_pic_overrides(config, inference)
        if inference.rope_base is not None:  # the base the weights expect, on every layer (PIC's layers start there)
            overrides["rope_parameters"] = config["rope_parameters"]
        if _VLLM_ERROR is not None:
            raise unavailable(_VLLM_ERROR) from _VLLM_ERROR
        if overrides:
            kwargs["hf_overrides"] = {**(kwargs.get("hf_overrides") or {}), **overrides}
        if not torch.cuda.is_available():  # vLLM's CPU build: the settings `lch vllm-env` documents, unless set
            with_cpu_runtime_defaults(os.environ)
        if inference.entry.acts:  # PIC's classes registered; Dynamic PIC: the engine settings it needs
            from harness.pic.vllm.config import engine_settings
            from harness.pic.vllm.model import check_vllm_version, register

            check_vllm_version()
            register(config["architectures"][0])
            if inference.entry.moves_cached_keys:
                kwargs = engine_settings(kwargs, config)
        self._given_dtype = str(kwargs.get("dtype", "auto"))
        self._pooling = None  # the pooling engine of the scoring requests, built on the first one
        try:
            super().__init__(**kwargs)
        except (RuntimeError, ValueError) as err:
            # an engine in another process: a bare RuntimeError, the cause in its log above; in this process: vLLM's
            # own error (bad engine args: pydantic's, which lch translates per field; vLLM requires pydantic)
            from pydantic import ValidationError

            if isinstance(err, (LchError, ValidationError)):
                raise
            raise EngineStartError(
                f"vLLM's engine did not start for pretrained={pretrained}: {str(err).splitlines()[0]} (vLLM's log "
                "above has the details; on CPU often memory: VLLM_CPU_KVCACHE_SPACE=<GiB> sets the KV cache)"
            ) from err
        if inference.entry.moves_cached_keys and self.data_parallel_size == 1:
            from harness.pic.vllm.config import check_no_preemption

            engine = self.model.llm_engine.vllm_config
            check_no_preemption(
                engine.scheduler_config.max_num_seqs,
                engine.model_config.max_model_len,
                engine.cache_config.block_size,
                engine.cache_config.num_gpu_blocks,
            )

    def engine_dtype(self) -> str:
        if self.data_parallel_size == 1:  # the dtype the engine resolved (`auto` is the folder's)
            return str(self.model.llm_engine.model_config.dtype).removeprefix("torch.")
        return self._given_dtype

    def run_device(self) -> str:
        return "cuda" if torch.cuda.is_available() else "cpu"  # vLLM's CUDA build, or its CPU build

    @classmethod
    def check_request(cls, task: str, request_type: str, model_args: dict) -> None:
        """Requests answered from hidden states run a pooling engine beside the generating one: on a GPU both
        must fit (each takes its ``gpu_memory_utilization`` share); ``lsm`` needs that pooling engine."""
        replicas = int(model_args.get("data_parallel_size", 1))
        moves_keys = resolve_model_args(model_args, "lora_local_path", VLLM_PIC_ARGS).inference.entry.moves_cached_keys
        if request_type == "lsm":
            refusal = lsm_refusal(replicas, moves_keys)
            if refusal:
                raise UsageError(f"{task} sends lsm requests, which vllm-pic serves {refusal}")
        pooled = request_type == "lsm" or (
            request_type == "token_logprobs" and scores_from_hidden(replicas, moves_keys)
        )
        share = float(model_args.get("gpu_memory_utilization", 0.9))
        if pooled and torch.cuda.is_available() and share > POOLED_GPU_MEMORY:
            raise UsageError(
                f"{task} sends {request_type} requests, for which vllm-pic starts a second (pooling) "
                f"engine on the same GPU: pass gpu_memory_utilization={POOLED_GPU_MEMORY} (or less) in "
                f"--model_args so that both fit (now {share:g})"
            )

    # ------------------------------------------------------------------ running the engine

    def _model_generate(self, requests: list, generate: bool = False, sampling_params: Any = None) -> list:
        if self.data_parallel_size > 1:
            _ray_with_gpu_slots(self.data_parallel_size * self.tensor_parallel_size)
        return super()._model_generate(requests=requests, generate=generate, sampling_params=sampling_params)

    def _run(self, prompts: list[list[int]], params: list) -> list:
        """``RequestOutput`` of each token prompt (from lm-eval's replicas when ``data_parallel_size`` > 1)."""
        if self.data_parallel_size > 1:
            return self._model_generate(requests=prompts, generate=True, sampling_params=params)
        from vllm import TokensPrompt

        return self.model.generate(
            [TokensPrompt(prompt_token_ids=p) for p in prompts],
            sampling_params=params,
            use_tqdm=False,
            lora_request=self.lora_request,
        )

    # ------------------------------------------------------------------ the engine core's primitives

    def score_batch_size(self) -> int:
        return DOCS_PER_CALL

    def generation_batch_size(self) -> int:
        return 10**9 if self.data_parallel_size > 1 else DOCS_PER_CALL  # replicas are started per call

    def score_window(self) -> int:
        # prompt_logprobs keeps room for one generated token; the pooling engine uses the same windows
        return self.max_length - 1

    def score_hidden(self, rows: list[list[int]]) -> list[torch.Tensor]:
        from harness.engines.vllm_pic.scoring import pooled_hidden

        return pooled_hidden(self._pooling_engine(), rows, self.lora_request)

    def score_head(self, hidden: torch.Tensor) -> torch.Tensor:
        from harness.engines.vllm_pic.scoring import head_logits

        return head_logits(self.model, hidden)

    def row_logprobs(self, rows: list[list[int]]) -> list[torch.Tensor]:
        """From hidden states and the head, else (:func:`scores_from_hidden`) from vLLM's ``prompt_logprobs``."""
        if scores_from_hidden(self.data_parallel_size, self.inference.entry.moves_cached_keys):
            return super().row_logprobs(rows)
        from vllm import SamplingParams

        from harness.engines.vllm_pic.scoring import prompt_token_logprobs

        params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0, detokenize=False, flat_logprobs=True)
        outputs = self._run(rows, [params] * len(rows))
        return [torch.tensor(prompt_token_logprobs(out, row), dtype=torch.float32) for row, out in zip(rows, outputs)]

    def check_lsm(self, context_length: int) -> None:
        refusal = lsm_refusal(self.data_parallel_size, self.inference.entry.moves_cached_keys)
        if refusal:
            raise UsageError(f"vllm-pic serves lsm {refusal}")
        if context_length > self.max_length:
            raise UsageError(
                f"lsm context_length {context_length} is longer than this engine's max_model_len "
                f"{self.max_length}: pass max_model_len={context_length} in --model_args"
            )

    def prompt_limit(self, budget: int) -> int:
        return self.max_length - budget

    def generate_tokens(self, prompts: list[list[int]], options: LongGenerationOptions, budget: int) -> list[Generated]:
        from vllm import SamplingParams

        params = SamplingParams(
            max_tokens=budget,
            temperature=options.temperature if options.do_sample else 0.0,
            top_p=options.top_p if options.do_sample else 1.0,
            stop=list(options.until),
        )
        return [generated(out.outputs[0]) for out in self._run(prompts, [params] * len(prompts))]

    def _pooling_engine(self) -> Any:
        if self._pooling is None:
            from vllm import LLM

            from harness.engines.vllm_pic.scoring import pooling_engine_args

            log.info("starting a pooling engine beside the generating one (final hidden states for scoring)")
            args = pooling_engine_args({**self.model_args, "max_model_len": self.max_length})
            if self.lora_request is not None:
                args.update(enable_lora=True, max_lora_rank=self.model_args.get("max_lora_rank", 16))
            self._pooling = LLM(**args)
        return self._pooling
