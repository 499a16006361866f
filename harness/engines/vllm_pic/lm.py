"""``vllm-pic``: lm-eval's vLLM model with PIC (naive, NTK-aware, Dynamic), serving every request type of our tasks.

PIC runs as ``Pic<Arch>`` (:mod:`harness.pic.vllm.model`), vLLM's own class for the model's architecture
whose full-attention RoPE layers rotate at PIC's positions (sliding-window and no-RoPE layers keep theirs, as on
hf-pic), selected by ``hf_overrides`` (:func:`harness.pic.vllm.config.pic_overrides`). Dynamic PIC also
re-rotates the cached keys whose id moved at every step, and runs eagerly (or, with ``enforce_eager=False``, compiled
with full CUDA graphs of decode steps only), prefix caching and chunked prefill off, ``max_num_batched_tokens >= max_model_len`` and no preemption (docs/vllm.md says why; a
contradicting arg is refused in one line).

Request types: lm-eval's own (``loglikelihood``, ``loglikelihood_rolling``, ``generate_until``, inherited)
and ours from the engine core (:mod:`harness.engines.core`), with hf-pic's options and responses, over this
adapter's primitives:

* final hidden states from a second engine with vLLM's pooling runner beside the generating one, built on the
  first scoring request (:mod:`harness.engines.vllm_pic.scoring`), and the generating engine's head: ``token_logprobs``
  in ``O(chunk x vocab)`` memory whatever the length (texts longer than ``max_model_len`` in half-overlapping
  windows) and ``lsm``; under data parallelism (no pooling engine), ``token_logprobs`` from vLLM's
  ``prompt_logprobs`` in windows of ``max_model_len - 1`` tokens;
* batched generation: ``generate_long``'s ``ended_with_eos`` is ``finish_reason == "stop"`` (EOS or a stop string).

Finished responses of our request types are stored in lm-eval's ``--use_cache`` database as they come.
"""

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
from harness.engines.registry import lch_model
from harness.engines.requests import LongGenerationOptions
from harness.engines.vllm_pic.imports import lm_eval_vllm_class, unavailable
from harness.engines.vllm_pic.env import with_cpu_runtime_defaults
from harness.pic.inference import Inference

log = logging.getLogger(__name__)

_VLLM, _VLLM_ERROR = lm_eval_vllm_class()
if _VLLM is not None:
    _Base = _VLLM
else:  # no vLLM (the project's CPU venv): the class still imports and explains itself
    from lm_eval.api.model import LM as _Base

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
    """``hf_overrides`` that make vLLM apply ``inference``'s PIC method (``{}`` for ``none``): ``Pic<Arch>`` with
    the settings (:func:`harness.pic.vllm.config.pic_overrides`)."""
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
    """lm-eval runs each data-parallel replica as a Ray task that asks for ``tensor_parallel_size`` GPUs; a
    machine without GPUs (the CPU build of vLLM) has none, so the tasks would wait forever. There, start Ray
    with that many logical GPU slots (Ray resources are labels; vLLM's CPU build never uses a GPU). lm-eval
    shuts Ray down after every call, so this runs before each one. (Done here, not by patching lm-eval: its
    data-parallel path offers no hook for Ray's resources.)"""
    if torch.cuda.is_available():
        return
    import ray

    if not ray.is_initialized():
        ray.init(num_gpus=slots, include_dashboard=False)


def generated(completion: Any) -> Generated:
    """The :class:`~harness.engines.core.Generated` of a vLLM ``CompletionOutput``, counted as hf-pic counts.

    vLLM keeps the token it stopped on in ``token_ids`` when that is EOS or another stop token (``stop_reason``
    None or the token id); hf-pic counts neither. The core decodes the counted tokens itself and cuts the text at
    the first stop string, as hf-pic's text is made, rather than taking vLLM's incremental ``text``: that one
    holds back the bytes of a character cut by ``max_tokens``, where a whole decode writes U+FFFD, so the two would
    differ on the same token ids. (A stop string ends vLLM's generation where it appears; hf-pic generates on and
    the text is cut there, so its ``n_tokens`` may be larger.)"""
    stopped = completion.finish_reason == "stop"
    on_stop_token = stopped and (completion.stop_reason is None or isinstance(completion.stop_reason, int))
    tokens = list(completion.token_ids)
    if on_stop_token and tokens:
        tokens = tokens[:-1]
    return Generated(tokens, stopped)


def _is_validation_error(err: BaseException) -> bool:
    """Whether ``err`` is pydantic's ``ValidationError`` (vLLM's check of its engine args)."""
    try:
        from pydantic import ValidationError
    except ImportError:
        return False
    return isinstance(err, ValidationError)


def scores_from_hidden(data_parallel_size: int, moves_cached_keys: bool) -> bool:
    """Whether vllm-pic scores from a pooling engine's hidden states (else from ``prompt_logprobs``): with one
    replica (lm-eval's data-parallel replicas hold the generating engine only) and a method a plain forward
    applies (Dynamic PIC's model class runs in the generating engine only)."""
    return data_parallel_size == 1 and not moves_cached_keys


def lsm_refusal(data_parallel_size: int, moves_cached_keys: bool) -> str | None:
    """Under which settings vllm-pic serves ``lsm``, and what to do instead, when these are not them (None: it
    serves it): LSM needs the pooling engine."""
    if moves_cached_keys:
        return "without pic=dynamic only (its pooling engine has no Dynamic PIC): use --model hf-pic"
    if data_parallel_size > 1:
        return ("with data_parallel_size=1 only (a pooling engine runs beside the generating one): use "
                "tensor_parallel_size, or --model hf-pic")
    return None


class EngineStartError(LchError, RuntimeError):
    """vLLM's engine failed to start (a ``RuntimeError`` from an engine process, whose log has the cause, or
    vLLM's ``ValueError`` from an engine in this process, e.g. not enough memory for the KV cache)."""


@lch_model("vllm-pic", preflight=check_vllm_pic_args)
class VLLMPicLM(EngineCore, _Base):
    """lm-eval ``vllm`` with ``pic=none|naive|ntk|dynamic``, ``pic_ratio`` (``pic_initial`` / ``pic_recent`` /
    ``pic_layout`` for Dynamic PIC) and ``rope_base`` in ``--model_args``;
    a variant file (``lch_variant.json``) in ``lora_local_path`` or ``pretrained`` sets their defaults as
    in ``hf-pic``. Serves our request types too (module docstring)."""

    LIBRARIES = ("torch", "transformers", "vllm")

    def __init__(self, **model_args: Any) -> None:
        if _VLLM_ERROR is None:  # every check, Dynamic PIC's included
            resolved = check_vllm_pic_args(model_args)
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
        except (RuntimeError, ValueError) as err:  # an engine in another process: a bare RuntimeError, the
            if isinstance(err, LchError) or _is_validation_error(err):  # cause in its log above; in this
                raise  # process: vLLM's own error (bad engine args: pydantic's, which lch translates per field)
            raise EngineStartError(
                f"vLLM's engine did not start for pretrained={pretrained}: {str(err).splitlines()[0]} (vLLM's log "
                "above has the details; on CPU often memory: VLLM_CPU_KVCACHE_SPACE=<GiB> sets the KV cache)") from err
        if inference.entry.moves_cached_keys and self.data_parallel_size == 1:
            from harness.pic.vllm.config import check_no_preemption

            engine = self.model.llm_engine.vllm_config
            check_no_preemption(engine.scheduler_config.max_num_seqs, engine.model_config.max_model_len,
                                engine.cache_config.block_size, engine.cache_config.num_gpu_blocks)

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
        pooled = request_type == "lsm" or (request_type == "token_logprobs"
                                           and scores_from_hidden(replicas, moves_keys))
        share = float(model_args.get("gpu_memory_utilization", 0.9))
        if pooled and torch.cuda.is_available() and share > POOLED_GPU_MEMORY:
            raise UsageError(f"{task} sends {request_type} requests, for which vllm-pic starts a second (pooling) "
                             f"engine on the same GPU: pass gpu_memory_utilization={POOLED_GPU_MEMORY} (or less) in "
                             f"--model_args so that both fit (now {share:g})")

    # ------------------------------------------------------------------ running the engine

    def _model_generate(self, requests: list, generate: bool = False, sampling_params: Any = None) -> list:
        if self.data_parallel_size > 1:
            _ray_with_gpu_slots(self.data_parallel_size * self.tensor_parallel_size)
        return super()._model_generate(requests=requests, generate=generate, sampling_params=sampling_params)

    def _run(self, prompts: list[list[int]], params: list) -> list:
        """``RequestOutput`` of each token prompt: the engine in this process, or lm-eval's data-parallel
        replicas (``_model_generate``) when ``data_parallel_size`` > 1."""
        if self.data_parallel_size > 1:
            return self._model_generate(requests=prompts, generate=True, sampling_params=params)
        from vllm import TokensPrompt

        return self.model.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], sampling_params=params,
                                   use_tqdm=False, lora_request=self.lora_request)

    # ------------------------------------------------------------------ the engine core's primitives

    def score_batch_size(self) -> int:
        return DOCS_PER_CALL

    def generation_batch_size(self) -> int:
        return 10**9 if self.data_parallel_size > 1 else DOCS_PER_CALL  # replicas are started per call

    def _pooled(self) -> bool:
        return scores_from_hidden(self.data_parallel_size, self.inference.entry.moves_cached_keys)

    def score_window(self) -> int:
        # prompt_logprobs keeps room for one generated token; the pooling engine's windows are the same, so a
        # long text is cut where it always was, whichever way it is scored
        return self.max_length - 1

    def score_hidden(self, rows: list[list[int]]) -> list[torch.Tensor]:
        from harness.engines.vllm_pic.scoring import pooled_hidden

        return pooled_hidden(self._pooling_engine(), rows, self.lora_request)

    def score_head(self, hidden: torch.Tensor) -> torch.Tensor:
        from harness.engines.vllm_pic.scoring import head_logits

        return head_logits(self.model, hidden)

    def row_logprobs(self, rows: list[list[int]]) -> list[torch.Tensor]:
        """From hidden states and the head (the core's rule), else (:func:`scores_from_hidden`) from vLLM's
        ``prompt_logprobs``."""
        if self._pooled():
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
            raise UsageError(f"lsm context_length {context_length} is longer than this engine's max_model_len "
                             f"{self.max_length}: pass max_model_len={context_length} in --model_args")

    def prompt_limit(self, budget: int) -> int:
        return self.max_length - budget

    def generate_tokens(self, prompts: list[list[int]], options: LongGenerationOptions, budget: int) -> list[Generated]:
        from vllm import SamplingParams

        params = SamplingParams(max_tokens=budget, temperature=options.temperature if options.do_sample else 0.0,
                                top_p=options.top_p if options.do_sample else 1.0, stop=list(options.until))
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

    if _VLLM_ERROR is not None:  # abstract methods of LM, never reached: __init__ raises first

        def loglikelihood(self, requests):  # pragma: no cover
            raise NotImplementedError

        def loglikelihood_rolling(self, requests):  # pragma: no cover
            raise NotImplementedError

        def generate_until(self, requests):  # pragma: no cover
            raise NotImplementedError
