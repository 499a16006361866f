"""PIC on vLLM before anything loads (no vLLM import): the ``hf_overrides`` that name ``Pic<Arch>`` and carry the
inference (``pic_inference``; naive / NTK-aware also raise ``max_position_embeddings`` by their ratio), the checks of a
model's config, and Dynamic PIC's engine settings (docs/vllm.md, "What must be off, and why"): eager or
``FULL_DECODE_ONLY`` CUDA graphs; no prefix caching, chunked prefill, preemption, speculative decoding, fp8 KV cache."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from harness.core.errors import UsageError
from harness.core.options import convert
from harness.pic.inference import VARIANT_KEYS, Inference

PREFIX = "Pic"  # Pic<Arch>: the PIC class of vLLM's <Arch>
INFERENCE_KEY = "pic_inference"  # the HF config attribute that carries the inference to the model class
INFERENCE_FIELDS = tuple(key for key in VARIANT_KEYS if key != "rope_base")  # the model's own base: rope_parameters
# RoPE types whose cos / sin are position x inv_freq (the model class checks the module it finds against this)
ROPE_TYPES = ("default", "llama3")
VLLM_MAX_NUM_SEQS = 1024  # the largest max_num_seqs vLLM picks by default (large GPUs; throughput mode doubles it)
CPU_BLOCK_SIZE = 128  # vLLM's CPU backend's KV cache block size unless block_size is given (vllm/platforms/cpu.py)
# engine args the mechanism needs, and what the refusal of a contradicting value says
FORCED = {
    "enable_prefix_caching": (False, "a cached prefix's keys are rotated for another length"),
    "enable_chunked_prefill": (False, "a prompt prefilled in chunks is not hf-pic's one-shot prefill"),
}


# ---------------------------------------------------------------------------------------------- the overrides


def architecture(hf_config: Mapping[str, Any]) -> str:
    """The model's architecture (the first of ``architectures``; a multimodal config's text model's is not
    looked at), or a one-line refusal."""
    archs = hf_config.get("architectures") or []
    if not archs:
        raise UsageError("PIC on vLLM needs the model's architecture: its config.json names none")
    return str(archs[0])


def pic_layer_rope_type(hf_config: Mapping[str, Any]) -> str:
    """The RoPE type of the full-attention layers: ``rope_parameters`` (transformers 5; per layer type, Gemma 3,
    its ``full_attention`` entry) or ``rope_scaling`` (4.x), ``default`` when neither names one."""
    params = hf_config.get("rope_parameters") or hf_config.get("rope_scaling") or {}
    if isinstance(params.get("full_attention"), Mapping):
        params = params["full_attention"]
    return str(params.get("rope_type", params.get("type", "default")) or "default")


def check_pic_config(hf_config: Mapping[str, Any], inference: Inference) -> str:
    """A model config PIC can run on vLLM, else a one-line refusal: an architecture, a full-attention RoPE layer
    (:func:`~harness.pic.hf.rope_layout.kept_layers`), :data:`ROPE_TYPES` RoPE on those. Returns the architecture."""
    from harness.pic.hf.rope_layout import kept_layers

    arch = architecture(hf_config)
    if arch.startswith(PREFIX):
        raise UsageError(f"architectures names {arch}, a PIC class: give the model's own config (vllm-pic adds it)")
    layers = int(hf_config.get("num_hidden_layers") or 0)
    kept = kept_layers(dict(hf_config))
    if layers and len(kept) >= layers:
        reasons = ", ".join(sorted(set(kept.values())))
        raise UsageError(
            f"{inference.entry.label} on vLLM would change nothing: no layer of this {arch} has full "
            f"attention with RoPE ({reasons})"
        )
    rope_type = pic_layer_rope_type(hf_config)
    if rope_type not in ROPE_TYPES:
        raise UsageError(
            f"{inference.entry.label} on vLLM needs {' or '.join(ROPE_TYPES)} RoPE on the full-attention "
            f"layers; this {arch} uses {rope_type!r} RoPE: use --model hf-pic, which composes both"
        )
    return arch


def pic_overrides(hf_config: Mapping[str, Any], inference: Inference) -> dict:
    """``hf_overrides`` that run ``inference``'s PIC method on vLLM (``{}`` for ``none``): ``Pic<Arch>``, the inference
    under ``pic_inference``, and for a method that reaches ``ratio`` x the window, that window."""
    if not inference.entry.acts:
        return {}
    arch = check_pic_config(hf_config, inference)
    block = inference.to_variant_json()
    out: dict[str, Any] = {
        "architectures": [PREFIX + arch],
        INFERENCE_KEY: {key: block[key] for key in INFERENCE_FIELDS},
    }
    window = hf_config.get("max_position_embeddings")
    if inference.entry.extends_window and window:
        out["max_position_embeddings"] = int(int(window) * inference.ratio)
    return out


def config_inference(hf_config: Any) -> Inference:
    """The inference a PIC class runs, from its HF config's ``pic_inference`` (:func:`pic_overrides`), checked."""
    block = getattr(hf_config, INFERENCE_KEY, None)
    if not isinstance(block, Mapping):
        raise ValueError(
            f"a {PREFIX}<Arch> model needs hf_overrides with {INFERENCE_KEY} (the PIC settings, e.g. "
            '{"pic": "naive", "pic_ratio": 2}); vllm-pic sets it'
        )
    unknown = set(block) - set(INFERENCE_FIELDS)
    if unknown:
        raise ValueError(f"{INFERENCE_KEY}: unknown keys {sorted(unknown)}; allowed: {', '.join(INFERENCE_FIELDS)}")
    return Inference.from_variant_json(block)


# ---------------------------------------------------------------------------------------------- Dynamic PIC's engine


def engine_settings(engine_args: dict, hf_config: dict, environ: Mapping[str, str] | None = None) -> dict:
    """The engine args Dynamic PIC needs, added to ``engine_args`` (a contradicting given value is refused in one line);
    ``max_num_batched_tokens`` defaults to ``max_model_len`` (else ``max_position_embeddings``), ``max_num_seqs`` to
    :func:`preemption_free_sequences`. ``environ``: default ``os.environ``."""
    environ = os.environ if environ is None else environ
    out = dict(engine_args)
    for key, (needed, why) in FORCED.items():
        given = out.get(key)
        if given is not None and convert(given, bool, key) != needed:
            raise UsageError(f"pic=dynamic on vLLM needs {key}={needed} ({why})")
        out[key] = needed
    out.update(graph_settings(out))
    if out.get("speculative_config") not in (None, {}, "None", "none"):
        raise UsageError(
            "pic=dynamic on vLLM does not support speculative decoding (rejected drafts would leave "
            "cached keys re-positioned for a length never reached)"
        )
    if str(out.get("kv_cache_dtype") or "auto").startswith("fp8"):
        raise UsageError(
            "pic=dynamic on vLLM needs an unquantized KV cache (kv_cache_dtype=auto): it re-rotates "
            "cached keys in place"
        )
    length = out.get("max_model_len") or out.get("max_length") or hf_config.get("max_position_embeddings")
    given = out.get("max_num_batched_tokens")
    if given is not None and length is not None and int(given) < int(length):
        raise UsageError(
            f"pic=dynamic on vLLM prefills each prompt in one step: max_num_batched_tokens={given} must "
            f"be >= max_model_len ({length})"
        )
    if given is None and length is not None:
        out["max_num_batched_tokens"] = int(length)
    cap = preemption_free_sequences(out, hf_config, length, environ)
    given = out.get("max_num_seqs")
    if cap is not None:
        if given is not None and int(given) > cap:
            raise UsageError(
                f"pic=dynamic on vLLM runs at most {cap} sequences at once with this KV cache and "
                f"max_model_len={length} (more could be preempted and recomputed, which is not "
                f"Algorithm 1): set max_num_seqs<={cap}, a larger KV cache or a smaller max_model_len"
            )
        out["max_num_seqs"] = int(given) if given is not None else cap
    # vLLM refuses max_num_seqs > max_num_batched_tokens (max_model_len here): a short max_model_len would not start
    batched = out.get("max_num_batched_tokens")
    if batched is not None and given is None and int(out.get("max_num_seqs") or VLLM_MAX_NUM_SEQS) > int(batched):
        out["max_num_seqs"] = int(batched)
    return out


GRAPH_MODES = ("NONE", "FULL_DECODE_ONLY")  # vLLM's cudagraph modes whose graphs Dynamic PIC's plan can be in


def graph_settings(engine_args: dict) -> dict:
    """Dynamic PIC's ``enforce_eager`` / ``compilation_config``: eager by default, else full CUDA graphs of decode steps
    only (``cudagraph_mode=FULL_DECODE_ONLY``: a piecewise graph is captured without the step's attention metadata, so
    could not hold the plan); another given ``cudagraph_mode`` is refused in one line."""
    if convert(engine_args.get("enforce_eager", True), bool, "enforce_eager"):
        return {"enforce_eager": True}
    given = engine_args.get("compilation_config") or {}
    if isinstance(given, str):
        given = json.loads(given)
    if not isinstance(given, dict):
        raise UsageError('compilation_config must be a JSON object, e.g. {"cudagraph_mode": "FULL_DECODE_ONLY"}')
    mode = str(given.get("cudagraph_mode", "FULL_DECODE_ONLY")).upper().removeprefix("CUDAGRAPHMODE.")
    if mode not in GRAPH_MODES:
        raise UsageError(
            f"pic=dynamic on vLLM runs under cudagraph_mode {' or '.join(GRAPH_MODES)} only (a piecewise "
            f"CUDA graph is captured without the step's attention metadata); {mode} was given"
        )
    # >= 1 eager warm-up: a layer's first call probes its cache layout, reading values back (not capturable)
    warmups = max(1, int(given.get("cudagraph_num_of_warmups", 1)))
    return {
        "enforce_eager": False,
        "compilation_config": {**given, "cudagraph_mode": mode, "cudagraph_num_of_warmups": warmups},
    }


def kv_cache_blocks(engine_args: dict, hf_config: dict, environ: Mapping[str, str]) -> int | None:
    """The number of KV cache blocks vLLM's CPU backend will allocate, known before it starts:
    ``num_gpu_blocks_override`` if given, else ``bytes // (block_size * bytes_per_token)`` with the bytes from
    ``kv_cache_memory_bytes`` or ``$VLLM_CPU_KVCACHE_SPACE`` (GiB) and ``bytes_per_token = 2 (k, v) * layers *
    kv_heads * head_dim * dtype size``; None when the size is left to vLLM's memory profiling."""
    if engine_args.get("num_gpu_blocks_override") is not None:
        return int(engine_args["num_gpu_blocks_override"])
    if engine_args.get("kv_cache_memory_bytes") is not None:
        space = int(engine_args["kv_cache_memory_bytes"])
    elif environ.get("VLLM_CPU_KVCACHE_SPACE", "") not in ("", "0"):
        space = int(environ["VLLM_CPU_KVCACHE_SPACE"]) * 2**30
    else:
        return None
    heads = hf_config.get("num_attention_heads", 1)
    head_dim = hf_config.get("head_dim") or hf_config.get("hidden_size", 0) // heads
    dtype = str(engine_args.get("dtype") or "auto")
    if dtype == "auto":
        dtype = str(hf_config.get("dtype") or hf_config.get("torch_dtype") or "float32")
    size = 4 if dtype in ("float32", "float", "torch.float32") else 2
    per_token = (
        2 * hf_config.get("num_hidden_layers", 1) * hf_config.get("num_key_value_heads", heads) * head_dim * size
    )
    return space // (kv_block_size(engine_args) * per_token)


def kv_block_size(engine_args: dict) -> int:
    """The KV cache block size the engine will use: the given one, else vLLM's CPU default."""
    return int(engine_args.get("block_size") or CPU_BLOCK_SIZE)


def preemption_free_sequences(
    engine_args: dict, hf_config: dict, length: int | None, environ: Mapping[str, str]
) -> int | None:
    """The most sequences that may run at once without vLLM ever preempting one: ``blocks // ceil(max_model_len
    / block_size)``; None when the cache size is unknown before the engine starts. (A preempted request is recomputed
    by one prefill at its final length's ids: not Algorithm 1.)"""
    blocks = kv_cache_blocks(engine_args, hf_config, environ)
    if blocks is None or length is None:
        return None
    held = sequences_held(blocks, int(length), kv_block_size(engine_args))
    if held == 0:
        raise UsageError(
            f"pic=dynamic on vLLM: a KV cache of {blocks} blocks cannot hold one sequence of "
            f"max_model_len={length}: give a larger KV cache (VLLM_CPU_KVCACHE_SPACE=<GiB>) or a "
            "smaller max_model_len"
        )
    return held


def sequences_held(num_blocks: int, max_model_len: int, block_size: int) -> int:
    """How many sequences of ``max_model_len`` tokens a cache of ``num_blocks`` blocks holds at once."""
    return num_blocks // -(-max_model_len // block_size)


def check_no_preemption(max_num_seqs: int, max_model_len: int, block_size: int, num_blocks: int | None) -> None:
    """After the engine started: its KV cache holds ``max_num_seqs`` sequences of ``max_model_len`` (vLLM never
    preempts), else a one-line error saying which ``max_num_seqs`` would."""
    held = None if num_blocks is None else sequences_held(num_blocks, max_model_len, block_size)
    if held is not None and max_num_seqs > held:
        raise UsageError(
            f"pic=dynamic on vLLM: the engine's KV cache ({num_blocks} blocks of {block_size} tokens) "
            f"holds {held} sequences of max_model_len={max_model_len}, not max_num_seqs={max_num_seqs} "
            f"(more could be preempted and recomputed, which is not Algorithm 1): set "
            f"max_num_seqs<={held}"
        )
