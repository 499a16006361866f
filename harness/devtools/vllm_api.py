"""What vllm-pic uses of vLLM, checked against the vLLM installed beside it: ``python -m harness.devtools.vllm_api``
prints each check and exits 1 when one fails. It needs vLLM's Python only (``vllm._C`` need not load), and catches a
renamed or moved name before any model loads."""

from __future__ import annotations

import dataclasses
import importlib
import sys
from collections.abc import Callable

# (what, check): each check returns None when it holds, else why not
CHECKS: list[tuple[str, Callable[[], str | None]]] = []


def check(what: str) -> Callable[[Callable[[], str | None]], Callable[[], str | None]]:
    def register(function: Callable[[], str | None]) -> Callable[[], str | None]:
        CHECKS.append((what, function))
        return function

    return register


@check("the version is in vllm-pic's range")
def _version() -> str | None:
    from harness.core.errors import UsageError
    from harness.pic.vllm.model import check_vllm_version

    try:
        check_vllm_version()
    except UsageError as err:
        return str(err)
    return None


@check("RotaryEmbedding's cos / sin cache, inverse frequencies and PyTorch rotation")
def _rotary() -> str | None:
    from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbedding, RotaryEmbeddingBase

    missing = [
        name
        for name in ("_compute_cos_sin_cache", "_compute_inv_freq", "forward_static", "forward_native")
        if not hasattr(RotaryEmbedding, name)
    ]
    if not hasattr(RotaryEmbeddingBase, "_compute_cos_sin_cache"):
        missing.append("RotaryEmbeddingBase._compute_cos_sin_cache")
    return f"missing {', '.join(missing)}" if missing else None


@check("the rotary kernel and the cache writers are Python functions of _custom_ops")
def _ops() -> str | None:
    ops = importlib.import_module("vllm._custom_ops")
    missing = [
        name
        for name in ("rotary_embedding", "reshape_and_cache_flash", "cpu_attn_reshape_and_cache")
        if not callable(getattr(ops, name, None))
    ]
    return f"missing {', '.join(missing)}" if missing else None


@check("Attention: the module class, its cache writer and its layer index")
def _attention() -> str | None:
    import inspect

    from vllm.model_executor.layers.attention import Attention
    from vllm.model_executor.models.utils import extract_layer_index

    source = inspect.getsource(sys.modules[Attention.__module__])  # the class and the cache-update op beside it
    missing = [
        name
        for name in ("self.layer_name", "self.sliding_window", "self.head_size", "self.kv_cache", "do_kv_cache_update")
        if name not in source
    ]
    if extract_layer_index("model.layers.7.self_attn.attn") != 7:
        missing.append("extract_layer_index")
    return f"missing {', '.join(missing)}" if missing else None


@check("attention backends: metadata with query_start_loc / seq_lens / block_table, a cache writer")
def _backends() -> str | None:
    problems = []
    for module, metadata, _impl in (
        ("flash_attn", "FlashAttentionMetadata", "FlashAttentionImpl"),
        ("triton_attn", "TritonAttentionMetadata", "TritonAttentionImpl"),
        ("cpu_attn", "CPUAttentionMetadata", "CPUAttentionBackendImpl"),
    ):
        try:
            found = importlib.import_module(f"vllm.v1.attention.backends.{module}")
        except Exception as err:  # a backend whose module does not import here is named, not fatal to the rest
            problems.append(f"{module}: {type(err).__name__}: {err}")
            continue
        cls = getattr(found, metadata, None)
        fields = {field.name for field in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
        from harness.pic.vllm.model import PLAN_METADATA

        if not set(PLAN_METADATA) <= fields:
            problems.append(f"{metadata} lacks {', '.join(sorted(set(PLAN_METADATA) - fields))}")
        impls = [value for name, value in vars(found).items() if name.endswith("Impl") and isinstance(value, type)]
        if not any(hasattr(value, "do_kv_cache_update") for value in impls):
            problems.append(f"no do_kv_cache_update in {module}")
    return "; ".join(problems) or None


@check("the forward context, the platform, CUDA graph modes")
def _runtime() -> str | None:
    from vllm.config.compilation import CUDAGraphMode
    from vllm.forward_context import get_forward_context  # noqa: F401
    from vllm.platforms import current_platform

    if not (hasattr(current_platform, "is_cpu") and hasattr(current_platform, "is_cuda")):
        return "current_platform lacks is_cpu / is_cuda"
    if (
        CUDAGraphMode.FULL_DECODE_ONLY.has_piecewise_cudagraphs()
        or not CUDAGraphMode.FULL_AND_PIECEWISE.has_piecewise_cudagraphs()
    ):
        return "CUDAGraphMode.has_piecewise_cudagraphs says otherwise"
    return None


@check("Pic<Arch> classes: registered and made from vLLM's own classes")
def _classes() -> str | None:
    from vllm import ModelRegistry

    from harness.pic.vllm.model import pic_model_class, register

    register("LlamaForCausalLM")
    for arch in ("LlamaForCausalLM", "Gemma3ForCausalLM", "Qwen2ForCausalLM"):
        cls = pic_model_class("Pic" + arch)
        if cls.__mro__[1].__name__ != arch:
            return f"Pic{arch} is not made from vLLM's {arch}"
    if not any(name == "PicGemma3ForCausalLM" for name in ModelRegistry.get_supported_archs()):
        return "the lazy registration did not register PicGemma3ForCausalLM"
    return None


def main() -> int:
    import vllm

    print(f"vLLM {vllm.__version__} ({vllm.__file__})")
    failed = 0
    for what, function in CHECKS:
        try:
            why = function()
        except Exception as err:  # a check that cannot run is a failed check, named
            why = f"{type(err).__name__}: {err}"
        failed += why is not None
        print(f"{'ok  ' if why is None else 'FAIL'} {what}" + (f": {why}" if why else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
