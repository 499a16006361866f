"""``vllm-pic``: lm-eval's vLLM model with naive or NTK-aware PIC, serving every request type of our tasks.

vLLM builds RoPE from the HF config, so PIC is expressed as config overrides (``hf_overrides``):

* naive PIC  -> linear RoPE scaling with factor ``s_cr`` (position ``m`` rotates as ``m / s_cr``);
* NTK-aware  -> ``rope_theta`` multiplied by ``s_rr`` (paper Eq. 8).

* Dynamic PIC  -> an out-of-tree model class, ``Pic<Arch>`` (:mod:`harness.models.vllm_dynamic_pic`, Llama
  models on vLLM's CPU backend), which re-rotates the cached keys whose id moved at every step, selected by
  ``hf_overrides`` with ``pic_ratio`` / ``pic_initial`` / ``pic_recent`` / ``pic_layout``; the engine runs
  with ``enforce_eager=True``, prefix caching and chunked prefill off and ``max_num_batched_tokens >=
  max_model_len`` (docs/vllm.md says why; a contradicting arg is refused in one line).

Request types: lm-eval's own (``loglikelihood``, ``loglikelihood_rolling``, ``generate_until``, inherited)
and ours, with the options and responses of ``hf-pic`` (:mod:`harness.lmeval.request_options`):

* ``token_logprobs`` from vLLM's ``prompt_logprobs`` (:mod:`harness.models.vllm_scoring`). A text longer
  than the engine's ``max_model_len - 1`` tokens is scored in windows of that many tokens advancing by
  half a window (:mod:`harness.positions.windows`): each token is scored once, from at least half a
  window of context, and never at a position past the engine's length (pass a larger ``max_model_len``
  to score a long text in one pass, as hf-pic does);
* ``lsm`` on a second engine with vLLM's pooling runner (final hidden states) and this engine's LM head;
  built on the first ``lsm`` request, and not available with ``data_parallel_size`` > 1;
* ``generate_long``: ``ended_with_eos`` is ``finish_reason == "stop"`` (EOS or a stop string).

Finished responses of our request types are stored in lm-eval's ``--use_cache`` database as they come,
as in hf-pic (:mod:`harness.lmeval.response_cache`).
"""

from __future__ import annotations

import logging
import os
from typing import Any, Callable, Sequence

import torch
from tqdm import tqdm

from harness.data.variants import results_info
from harness.errors import LchError, UsageError
from harness.lmeval.model_args import (
    check_hf_pic_args,
    check_dynamic_on_vllm,
    check_vllm_pic_args,
    local_config,
    moving_keys_on_vllm,
)
from harness.lmeval.request_options import (
    GENERATE_LONG,
    LSM,
    TOKEN_LOGPROBS,
    LongGenerationResponse,
    LsmResponse,
    TokenLogprobsResponse,
    encode_for_scoring,
    first_stop,
)
from harness.lmeval.response_cache import CacheOwner, ClaimsResponseCache, answer_with_cache, library_versions
from harness.models.identity import model_identity
from harness.lmeval.vllm_import import lm_eval_vllm_class, unavailable
from harness.models.lsm import lsm_direct, lsm_overlap
from harness.models.vllm_env import with_cpu_runtime_defaults
from harness.positions.inference import Inference
from harness.positions.windows import scoring_windows

log = logging.getLogger(__name__)

import lm_eval.models  # noqa: E402,F401  (the built-in models register before ours)
from lm_eval.api.registry import register_model  # noqa: E402

_VLLM, _VLLM_ERROR = lm_eval_vllm_class()
if _VLLM is not None:
    _Base = _VLLM
else:  # no vLLM (the project's CPU venv): the class still imports and explains itself
    from lm_eval.api.model import LM as _Base

DOCS_PER_CALL = 16  # documents per vLLM call of our scoring requests: responses are stored as each call ends


def rope_parameters(hf_config: dict) -> dict:
    """The RoPE parameters of an HF config dict, in the transformers>=5 ``rope_parameters`` form."""
    params = dict(hf_config.get("rope_parameters") or {})
    if not params:  # configs written by transformers 4.x
        params = dict(hf_config.get("rope_scaling") or {})
        params.setdefault("rope_theta", hf_config.get("rope_theta", 10000.0))
    params.setdefault("rope_type", params.pop("type", "default"))
    return params


def vllm_pic_overrides(hf_config: dict, inference: Inference) -> dict:
    """``hf_overrides`` that make vLLM apply ``inference``'s PIC method (``{}`` for ``none``), from its registry
    entry: a ``base`` method sets ``rope_theta`` to the entry's base of it (NTK: ``b * s_rr``), a
    ``linear_scaling`` one (naive: ``m / s_cr``) is linear RoPE scaling by the ratio. A method that
    re-positions cached keys, or whose positions vLLM's RoPE settings cannot express, is refused."""
    entry, method = inference.entry, inference.method
    if entry.moves_cached_keys:
        if method != "dynamic":
            raise UsageError(moving_keys_on_vllm(method))
        from harness.models.vllm_dynamic_pic import hf_overrides

        return hf_overrides(hf_config, inference)
    if not entry.acts:
        return {}
    params = rope_parameters(hf_config)
    if entry.ids is not None:
        if not entry.linear_scaling:
            raise UsageError(f"pic={method} is not available on vLLM (its RoPE settings cannot express these "
                             "positions); use --model hf-pic")
        if params["rope_type"] != "default":
            raise UsageError(
                f"{method} PIC on vLLM needs a model with plain RoPE; this one uses {params['rope_type']!r} "
                "scaling (use --model hf-pic, which composes both)"
            )
        params = {**params, "rope_type": "linear", "factor": inference.ratio}
    if entry.base is not None:
        params = {**params, "rope_theta": entry.base(float(params["rope_theta"]), inference)}
    return {"rope_parameters": params}


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


def long_generation_response(completion: Any, decode: Callable[[list[int]], str],
                             until: Sequence[str]) -> LongGenerationResponse:
    """``{"text", "ended_with_eos", "n_tokens"}`` of a vLLM ``CompletionOutput``, as hf-pic counts them.

    vLLM keeps the token it stopped on in ``token_ids`` when that is EOS or another stop token
    (``stop_reason`` None or the token id); hf-pic counts neither. The text is ``decode`` of the counted
    tokens, cut at the first stop string, as hf-pic makes it, not vLLM's incremental ``text``: that one holds
    back the bytes of a character cut by ``max_tokens``, where a whole decode writes U+FFFD, so the two would
    differ on the same token ids. (A stop string ends vLLM's generation where it appears; hf-pic generates
    on and cuts the text there, so its ``n_tokens`` may be larger.)"""
    ended = completion.finish_reason == "stop"
    on_stop_token = ended and (completion.stop_reason is None or isinstance(completion.stop_reason, int))
    tokens = list(completion.token_ids)
    if on_stop_token and tokens:
        tokens = tokens[:-1]
    text = decode(tokens)
    cut = first_stop(text, until)
    return {"text": text if cut < 0 else text[:cut], "ended_with_eos": ended, "n_tokens": len(tokens)}


def _is_validation_error(err: BaseException) -> bool:
    """Whether ``err`` is pydantic's ``ValidationError`` (vLLM's check of its engine args)."""
    try:
        from pydantic import ValidationError
    except ImportError:
        return False
    return isinstance(err, ValidationError)


class EngineStartError(LchError, RuntimeError):
    """vLLM's engine failed to start (a ``RuntimeError`` from an engine process, whose log has the cause, or
    vLLM's ``ValueError`` from an engine in this process, e.g. not enough memory for the KV cache)."""


@register_model("vllm-pic")  # the name of our lm_eval.models entry point (harness.lmeval.plugin)
class VLLMPicLM(ClaimsResponseCache, _Base):
    """lm-eval ``vllm`` with ``pic=none|naive|ntk|dynamic``, ``pic_ratio`` (``pic_initial`` / ``pic_recent`` /
    ``pic_layout`` for Dynamic PIC) and ``rope_base`` in ``--model_args``;
    a variant file (``lch_variant.json``) in ``lora_local_path`` or ``pretrained`` sets their defaults as
    in ``hf-pic``. Serves our request types too (module docstring)."""

    def __init__(self, pretrained: str, pic: str | None = None, pic_ratio: float | None = None,
                 rope_base: float | str | None = None, pic_initial: int | None = None, pic_recent: int | None = None,
                 pic_layout: str | None = None, **kwargs: Any) -> None:
        given = {k: v for k, v in (("pic", pic), ("pic_ratio", pic_ratio), ("rope_base", rope_base),
                                   ("pic_initial", pic_initial), ("pic_recent", pic_recent),
                                   ("pic_layout", pic_layout)) if v is not None}
        if _VLLM_ERROR is None:  # every check, Dynamic PIC's included
            resolved = check_vllm_pic_args({"pretrained": pretrained, **given, **kwargs})
        else:  # the inference args' errors first, then the import error below
            resolved = check_hf_pic_args({"pretrained": pretrained, "peft": kwargs.get("lora_local_path"), **given})
            check_dynamic_on_vllm(resolved, {"pretrained": pretrained, **kwargs})
        inference, variant = resolved["inference"], resolved["variant"]
        for override in resolved["overrides"]:
            log.warning("model_arg %s overrides the variant file (%s)", override, variant.describe())
        config = with_rope_base(_read_hf_config(pretrained), inference.rope_base)
        overrides = vllm_pic_overrides(config, inference)
        if inference.entry.moves_cached_keys and inference.rope_base is not None:
            overrides["rope_parameters"] = config["rope_parameters"]
        if not overrides and inference.rope_base is not None:
            overrides = {"rope_parameters": config["rope_parameters"]}
        if _VLLM_ERROR is not None:
            raise unavailable(_VLLM_ERROR) from _VLLM_ERROR
        if overrides:
            kwargs["hf_overrides"] = {**(kwargs.get("hf_overrides") or {}), **overrides}
        if not torch.cuda.is_available():  # vLLM's CPU build: the settings `lch vllm-env` documents, unless set
            with_cpu_runtime_defaults(os.environ)
        if inference.entry.moves_cached_keys:  # Dynamic PIC: its class registered, the engine settings it needs
            from harness.models.vllm_dynamic_pic import engine_settings, register

            register()
            kwargs = engine_settings(kwargs, config)
        self.pic, self.inference, self.variant = inference.method, inference, variant
        self._sources = (pretrained, kwargs.get("lora_local_path"), str(kwargs.get("dtype", "auto")))
        self._pooling = None  # the pooling engine of `lsm` requests, built on the first one
        try:
            super().__init__(pretrained=pretrained, **kwargs)
        except (RuntimeError, ValueError) as err:  # an engine in another process: a bare RuntimeError, the
            if isinstance(err, LchError) or _is_validation_error(err):  # cause in its log above; in this
                raise  # process: vLLM's own error (bad engine args: pydantic's, which lch translates per field)
            raise EngineStartError(
                f"vLLM's engine did not start for pretrained={pretrained}: {str(err).splitlines()[0]} (vLLM's log "
                "above has the details; on CPU often memory: VLLM_CPU_KVCACHE_SPACE=<GiB> sets the KV cache)") from err
        if inference.entry.moves_cached_keys and self.data_parallel_size == 1:
            from harness.models.vllm_dynamic_pic import check_no_preemption

            engine = self.model.llm_engine.vllm_config
            check_no_preemption(engine.scheduler_config.max_num_seqs, engine.model_config.max_model_len,
                                engine.cache_config.block_size, engine.cache_config.num_gpu_blocks)

    def get_model_info(self) -> dict:
        """As :meth:`harness.lmeval.hf_pic.HFPicLM.get_model_info`."""
        base = super().get_model_info() if hasattr(super(), "get_model_info") else {}
        return {**base, **results_info(self.variant, self.inference)}

    def cache_owner(self) -> CacheOwner:
        """What this model's responses depend on (:mod:`harness.lmeval.response_cache`)."""
        pretrained, lora, dtype = self._sources
        if self.data_parallel_size == 1:  # the dtype the engine resolved (`auto` is the folder's)
            dtype = str(self.model.llm_engine.model_config.dtype).removeprefix("torch.")
        return CacheOwner(engine="vllm-pic", model=model_identity(pretrained), adapter=model_identity(lora) if lora
                          else None, inference=self.inference.words(), dtype=dtype,
                          libraries=library_versions("torch", "transformers", "vllm"))

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

    # ------------------------------------------------------------------ token_logprobs

    def token_logprobs(self, requests: list, disable_tqdm: bool = False) -> list[TokenLogprobsResponse]:
        """:meth:`harness.lmeval.hf_pic.HFPicLM.token_logprobs` on vLLM (windows past ``max_model_len``:
        module docstring)."""
        return answer_with_cache(self, TOKEN_LOGPROBS.name, requests,
                                 lambda todo, done: self._token_logprobs(todo, done, disable_tqdm))

    def _token_logprobs(self, requests: list, done: Callable[[int, dict], None], disable_tqdm: bool) -> None:
        from vllm import SamplingParams

        from harness.models.vllm_scoring import prompt_token_logprobs

        params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0, detokenize=False, flat_logprobs=True)
        window = self.max_length - 1  # vLLM keeps room for one generated token
        encoded = [encode_for_scoring(self.tokenizer, *TOKEN_LOGPROBS.parse(req.args)) for req in requests]
        windows = [scoring_windows(len(enc["token_ids"]), window) for enc in encoded]
        for enc, cut in zip(encoded, windows):
            if len(cut) > 1:
                log.warning("token_logprobs: a text of %d tokens is longer than max_model_len - 1 = %d tokens: scored in "
                            "%d windows", len(enc["token_ids"]), window, len(cut))
        pbar = tqdm(total=len(requests), disable=disable_tqdm, desc="Scoring tokens (vLLM)")
        for chunk in self._chunks(len(requests)):
            jobs = [(i, w) for i in chunk for w in windows[i]]
            prompts = [encoded[i]["token_ids"][w.start : w.stop] for i, w in jobs]
            outputs = self._run(prompts, [params] * len(prompts)) if prompts else []
            logprobs: dict[int, list[float]] = {i: [] for i in chunk}
            for (i, w), prompt, output in zip(jobs, prompts, outputs):
                values = prompt_token_logprobs(output, prompt)  # targets w.start + 1 .. w.stop - 1
                logprobs[i].extend(values[w.first_target - w.start - 1 :])
            for i in chunk:
                done(i, {**encoded[i], "logprobs": logprobs[i]})
            pbar.update(len(chunk))
        pbar.close()

    def _chunks(self, n: int) -> list[range]:
        """Request indices in calls of :data:`DOCS_PER_CALL` (each call's responses are stored as it ends);
        one call under data parallelism, whose replicas lm-eval starts anew for every call."""
        size = n if self.data_parallel_size > 1 else DOCS_PER_CALL
        return [range(start, min(n, start + size)) for start in range(0, n, max(1, size))]

    # ------------------------------------------------------------------ lsm

    def lsm(self, requests: list, disable_tqdm: bool = False) -> list[LsmResponse]:
        """:meth:`harness.lmeval.hf_pic.HFPicLM.lsm` on vLLM (a pooling engine beside this one: module
        docstring); the same draws as hf-pic for the same seed."""
        return answer_with_cache(self, LSM.name, requests, lambda todo, done: self._lsm(todo, done, disable_tqdm))

    def _lsm(self, requests: list, done: Callable[[int, dict], None], disable_tqdm: bool) -> None:
        from harness.models.vllm_scoring import vllm_lsm_runner

        if self.inference.entry.moves_cached_keys:
            raise UsageError("lsm on vllm-pic is not available with pic=dynamic yet (its pooling engine has no Dynamic "
                             "PIC): use --model hf-pic")
        if self.data_parallel_size > 1:
            raise UsageError("lsm on vllm-pic needs data_parallel_size=1 (it runs a pooling engine beside the "
                             "generating one); use tensor_parallel_size, or --model hf-pic")
        runner = vllm_lsm_runner(self.model, self._pooling_engine(), self.lora_request)
        estimators = {"overlap": lsm_overlap, "direct": lsm_direct}
        for j, req in enumerate(tqdm(requests, disable=disable_tqdm, desc="Long-short misalignment (vLLM)")):
            text, options = LSM.parse(req.args)
            if options.context_length > self.max_length:
                raise UsageError(f"lsm context_length {options.context_length} is longer than this engine's "
                                 f"max_model_len {self.max_length}: pass max_model_len={options.context_length} in "
                                 "--model_args")
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"][: options.max_tokens]
            done(j, {"sce": estimators[options.estimator](runner, torch.tensor(ids), options.context_length,
                                                          options.n_samples, seed=options.seed)})

    def _pooling_engine(self) -> Any:
        if self._pooling is None:
            from vllm import LLM

            from harness.models.vllm_scoring import pooling_engine_args

            log.info("lsm: starting a pooling engine beside the generating one (final hidden states)")
            args = pooling_engine_args({**self.model_args, "max_model_len": self.max_length})
            if self.lora_request is not None:
                args.update(enable_lora=True, max_lora_rank=self.model_args.get("max_lora_rank", 16))
            self._pooling = LLM(**args)
        return self._pooling

    # ------------------------------------------------------------------ generate_long

    def generate_long(self, requests: list, disable_tqdm: bool = False) -> list[LongGenerationResponse]:
        """The ``generate_long`` request of :class:`harness.lmeval.hf_pic.HFPicLM` on vLLM:
        ``ended_with_eos`` is ``finish_reason == "stop"`` (EOS or a stop string), False on ``"length"``.
        A prompt longer than ``max_model_len`` minus its budget is cut from the left as lm-eval's
        ``generate_until`` does (with a warning); the task's ``over_length`` counts it."""
        return answer_with_cache(self, GENERATE_LONG.name, requests,
                                 lambda todo, done: self._generate_long(todo, done, disable_tqdm))

    def _generate_long(self, requests: list, done: Callable[[int, dict], None], disable_tqdm: bool) -> None:
        from lm_eval.models.utils import maybe_truncate
        from vllm import SamplingParams

        prompts, params = [], []
        parsed = [GENERATE_LONG.parse(req.args) for req in requests]
        for (_, options), encoded in zip(parsed, self.tok_encode([text for text, _ in parsed])):
            budget = self.max_gen_toks if options.max_gen_toks is None else options.max_gen_toks
            prompt, budget = maybe_truncate(encoded, max_gen_toks=budget, max_model_len=self.max_length, side="left",
                                            verbose=True)
            prompts.append(prompt)
            params.append(SamplingParams(
                max_tokens=budget,
                temperature=options.temperature if options.do_sample else 0.0,
                top_p=options.top_p if options.do_sample else 1.0,
                stop=list(options.until),
            ))
        def decode(tokens: list[int]) -> str:
            return self.tokenizer.decode(tokens, skip_special_tokens=True)

        pbar = tqdm(total=len(requests), disable=disable_tqdm, desc="Generating (long, vLLM)")
        for chunk in self._chunks(len(requests)):
            outputs = self._run([prompts[i] for i in chunk], [params[i] for i in chunk])
            for i, out in zip(chunk, outputs):
                done(i, long_generation_response(out.outputs[0], decode, parsed[i][1].until))
            pbar.update(len(chunk))
        pbar.close()

    if _VLLM_ERROR is not None:  # abstract methods of LM, never reached: __init__ raises first

        def loglikelihood(self, requests):  # pragma: no cover
            raise NotImplementedError

        def loglikelihood_rolling(self, requests):  # pragma: no cover
            raise NotImplementedError

        def generate_until(self, requests):  # pragma: no cover
            raise NotImplementedError
