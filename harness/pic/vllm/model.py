"""PIC on vLLM: ``Pic<Arch>``, vLLM's own ``<Arch>`` class with the ``rotary_emb`` of its full-attention RoPE layers
replaced by a :class:`PicRotary` rotating in the same layout at PIC's positions (docs/vllm.md). The one module on
vLLM's internals (imported inside functions; versions: :func:`check_vllm_version`); registered for every
``*ForCausalLM`` by :func:`register` (vllm-pic and the ``vllm.general_plugins`` entry point)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from harness.core.errors import UsageError
from harness.pic.inference import Inference
from harness.pic.vllm.config import PREFIX, check_no_preemption, config_inference
from harness.pic.vllm.positions import (
    PicPlan,
    empty_plan,
    key_places,
    locate_keys,
    move_rotation,
    rerotate_cached_keys,
    rotate,
    rotation,
    step_plan,
)

log = logging.getLogger(__name__)

# vLLM minors whose internals this was checked against (docs/vllm.md, "Versions"); pyproject's [vllm] extra agrees
VLLM_VERSIONS = ((0, 26), (0, 33))  # oldest, newest (inclusive)
TRANSFORMERS_BACKEND = "vllm.model_executor.models.transformers"  # vLLM's generic backend: transformers' own code
CHECK_POSITIONS = 4096  # integer positions at which a rotary module is compared with what PIC computes
PLAN_METADATA = ("query_start_loc", "seq_lens", "block_table")  # what Dynamic PIC's plan reads of a backend's metadata


# ---------------------------------------------------------------------------------------------- version guard


def vllm_version() -> str:
    import vllm

    return vllm.__version__


def check_vllm_version(version: str | None = None) -> None:
    """Refuse, in one line, a vLLM outside :data:`VLLM_VERSIONS` (``version``: this process's by default); within the
    range, differences are left to the checks the model class makes as it loads, not to version branches."""
    text = vllm_version() if version is None else version
    try:
        found = tuple(int(part) for part in text.split("+")[0].split(".")[:2])
    except ValueError:
        raise UsageError(f"PIC on vLLM: cannot read vLLM's version {text!r}; use --model hf-pic") from None
    oldest, newest = VLLM_VERSIONS
    if not oldest <= found <= newest:
        words = f"{'.'.join(map(str, oldest))} to {'.'.join(map(str, newest))}"
        raise UsageError(
            f"PIC on vLLM runs on vLLM {words} (the versions it is checked against); this is {text}: "
            f"pip install 'vllm>={oldest[0]}.{oldest[1]},<{newest[0]}.{newest[1] + 1}' or use --model hf-pic"
        )


# ---------------------------------------------------------------------------------------------- the rotary module


def check_rotary(rope: Any, where: str) -> None:
    """``rope`` (a layer's ``rotary_emb``) rotates as PIC's rotary does, else a one-line ``ValueError``: a plain
    ``RotaryEmbedding`` (or a subclass changing only ``inv_freq``, Llama 3) whose cos / sin cache is ``position x
    inv_freq`` and whose rotation of a probe is :func:`~harness.pic.vllm.positions.rotate`'s in its layout."""
    from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbedding, RotaryEmbeddingBase

    kind = type(rope)
    plain = (
        isinstance(rope, RotaryEmbedding)
        and kind._compute_cos_sin_cache is RotaryEmbeddingBase._compute_cos_sin_cache
        and kind.forward_static is RotaryEmbedding.forward_static
        and kind.forward_native is RotaryEmbedding.forward_native
    )
    if not plain:
        raise ValueError(
            f"PIC on vLLM: {where} rotates with {kind.__name__}, not plain RoPE (position x inv_freq); "
            "use --model hf-pic"
        )
    cache = rope.cos_sin_cache
    n = min(cache.shape[0], CHECK_POSITIONS)
    positions = torch.arange(n, device=cache.device)
    inv_freq = rope._compute_inv_freq(rope.base).float().to(cache.device)
    expected = torch.cat(rotation(positions, inv_freq), dim=-1).to(cache.dtype).float()  # rounded as the cache is
    tolerance = max(1e-5, 2 * torch.finfo(cache.dtype).eps)
    if (cache[:n].float() - expected).abs().max().item() > tolerance:
        raise ValueError(
            f"PIC on vLLM: {where}'s {kind.__name__} cache is not cos / sin of position x inv_freq; use --model hf-pic"
        )
    cos, sin = expected.chunk(2, dim=-1)
    # vLLM builds under its device and dtype as defaults: draw the probe on the CPU in fp32, then move it
    probe = torch.randn(
        n, 2 * rope.head_size, generator=torch.Generator().manual_seed(0), device="cpu", dtype=torch.float32
    ).to(cache.device)
    theirs, _ = RotaryEmbedding.forward_static(
        positions, probe.clone(), None, rope.head_size, rope.rotary_dim, cache.float(), rope.is_neox_style
    )
    ours = rotate(probe.view(n, 2, rope.head_size), cos, sin, rope.rotary_dim, rope.is_neox_style).view(n, -1)
    kernel = apply_table(probe.clone(), None, torch.cat((cos, sin), dim=-1), rope.head_size, rope.is_neox_style)[0]
    if max((theirs - ours).abs().max().item(), (theirs - kernel).abs().max().item()) > 1e-5:
        raise ValueError(
            f"PIC on vLLM: {where}'s {kind.__name__} does not rotate in the layout it declares "
            f"(rotary_dim {rope.rotary_dim}, neox {rope.is_neox_style}); use --model hf-pic"
        )


def apply_table(
    query: torch.Tensor,
    key: torch.Tensor | None,
    table: torch.Tensor,
    head_size: int,
    neox: bool,
    rows: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``query`` / ``key`` (``[n, heads * head_size]``) rotated in place by vLLM's own rotary kernel, token ``i``
    by row ``rows[i]`` (default ``i``) of ``table`` (``[>= n, rotary_dim]``: cos then sin, as rotary caches are)."""
    from vllm import _custom_ops as ops

    if rows is None:
        rows = torch.arange(query.shape[0], device=query.device)
    ops.rotary_embedding(rows, query, key, head_size, table.to(query.dtype).contiguous(), neox)
    return query, key


class PicRotary(nn.Module):
    """A full-attention layer's ``rotary_emb`` under PIC, in the replaced module's layout and base (NTK-aware: the
    method's base of it). Naive / NTK-aware PIC compute ids from ``positions`` alone (traceable); Dynamic PIC takes the
    step's plan from ``step`` and re-rotates this layer's moved cached keys before rotating the new tokens."""

    inv_freq: torch.Tensor  # a buffer (register_buffer below)

    def __init__(self, rope: Any, attn: nn.Module, inference: Inference, step: DynamicStep | None) -> None:
        super().__init__()
        entry = inference.entry
        self.head_size, self.rotary_dim, self.neox = rope.head_size, rope.rotary_dim, bool(rope.is_neox_style)
        self.base = entry.base(float(rope.base), inference) if entry.base is not None else float(rope.base)
        device = rope.cos_sin_cache.device
        self.register_buffer("inv_freq", rope._compute_inv_freq(self.base).float().to(device), persistent=False)
        self.inference = inference
        self.step = step
        self._attn = (attn,)  # the layer's Attention, whose KV cache Dynamic PIC moves keys in (not a submodule)
        self.op_key = f"{attn.layer_name}@{id(self)}"  # this layer in dynamic_rotary's calls
        if step is not None:
            _DYNAMIC_LAYERS[self.op_key] = self

    def extra_repr(self) -> str:
        return (
            f"{self.inference.label()}, head_size={self.head_size}, rotary_dim={self.rotary_dim}, "
            f"base={self.base:g}, neox={self.neox}"
        )

    def forward(
        self, positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        positions = positions.flatten()
        if self.step is None:
            ids = positions.float()
            if self.inference.entry.ids is not None:
                ids = self.inference.entry.ids(ids, None, self.inference)
            table = torch.cat(rotation(ids, self.inv_freq), dim=-1)
            return apply_table(query, key, table, self.head_size, self.neox)
        torch.ops.lch_pic.dynamic_rotary(positions, query, key, self.op_key)
        return query, key

    def rotate_dynamic(self, positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor) -> None:
        """Dynamic PIC's step in this layer, in place: the moved cached keys re-rotated, then ``query`` / ``key``
        rotated at the step's ids."""
        assert self.step is not None  # dynamic_rotary calls the layers of a Dynamic PIC step only
        table, rows = self.step.rotate_cache_and_ids(self._attn[0], self, query.dtype)
        apply_table(query, key, table, self.head_size, self.neox, rows[: positions.shape[0]])


_DYNAMIC_LAYERS: dict[str, PicRotary] = {}


@torch.library.custom_op("lch_pic::dynamic_rotary", mutates_args=("query", "key"))
def dynamic_rotary(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor, layer: str) -> None:
    """Dynamic PIC's rotary step of one layer as one opaque operator (it moves keys in the KV cache, which torch.compile
    cannot trace); its sizes are fixed by the batch's shape, so a full CUDA graph of a decode step captures it."""
    _DYNAMIC_LAYERS[layer].rotate_dynamic(positions, query, key)


@dynamic_rotary.register_fake
def _dynamic_rotary_fake(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor, layer: str) -> None:
    return None


# ---------------------------------------------------------------------------------------------- Dynamic PIC's step


def _step_metadata() -> dict | None:
    """This step's attention metadata by layer name (None or empty in a dummy / profile run)."""
    from vllm.forward_context import get_forward_context

    metadata = get_forward_context().attn_metadata
    if isinstance(metadata, list):  # micro-batches: one dict each
        metadata = metadata[0] if metadata else None
    return metadata


def _layer_metadata(layer_name: str) -> Any:
    """The attention metadata of ``layer_name`` in this step (None in a step without metadata: a profile run); a
    step whose metadata leaves this layer out is refused (planning no key moves there would not be Dynamic PIC)."""
    metadata = _step_metadata()
    if not metadata:
        return None
    if metadata.get(layer_name) is None:
        raise RuntimeError(
            f"Dynamic PIC on vLLM: this step's attention metadata has none for {layer_name} (it has "
            f"{len(metadata)} other layers'), so its cached keys cannot be moved; use --model hf-pic"
        )
    return metadata[layer_name]


class DynamicStep:
    """Dynamic PIC's state of one engine step, shared by one model's PIC layers: the plan of each KV cache group and
    the rotations of its ids and moves per RoPE base, computed once per step."""

    def __init__(self, inference: Inference) -> None:
        self.inference = inference
        self.positions: torch.Tensor | None = None
        self._plans: dict[int, PicPlan] = {}
        self._rotations: dict[tuple, Any] = {}

    def begin(self, positions: torch.Tensor) -> None:
        self.positions, self._plans, self._rotations = positions.flatten(), {}, {}

    def end(self) -> None:
        self.positions, self._plans, self._rotations = None, {}, {}

    def plan(self, attn: Any) -> PicPlan:
        """This step's plan for ``attn``'s KV cache group: no key moves without attention metadata (a profile run)
        or cache (empty); a cache that is not ``[blocks, kv_heads, block_size, values]`` is refused."""
        if self.positions is None:
            raise RuntimeError("Dynamic PIC: a PIC layer was called outside its model's forward (no step)")
        metadata = _layer_metadata(attn.layer_name)
        kv_cache = attn.kv_cache
        if metadata is None or (isinstance(kv_cache, torch.Tensor) and kv_cache.numel() == 0):
            return self._plans.setdefault(0, empty_plan(self.positions.to(torch.float32)))
        if not (isinstance(kv_cache, torch.Tensor) and kv_cache.dim() == 4):
            shape = tuple(kv_cache.shape) if isinstance(kv_cache, torch.Tensor) else type(kv_cache).__name__
            raise RuntimeError(
                f"Dynamic PIC on vLLM: {attn.layer_name}'s KV cache is {shape}, not [blocks, kv_heads, "
                "block_size, values] as the attention backends it was checked against lay it out; "
                "pass attention_backend=FLASH_ATTN (GPU) or use --model hf-pic"
            )
        key = id(metadata)
        if key not in self._plans:
            missing = [name for name in PLAN_METADATA if not isinstance(getattr(metadata, name, None), torch.Tensor)]
            if missing:
                raise RuntimeError(
                    f"Dynamic PIC on vLLM: the {type(metadata).__name__} of this attention backend has no "
                    f"{', '.join(missing)} to plan the key moves from; pass attention_backend=FLASH_ATTN "
                    "(GPU) or use --model hf-pic"
                )
            self._plans[key] = step_plan(
                self.positions,
                metadata.query_start_loc,
                metadata.seq_lens,
                metadata.block_table,
                kv_cache.shape[2],
                self.inference,
            )
        return self._plans[key]

    def rotate_cache_and_ids(
        self, attn: Any, rotary: PicRotary, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Re-rotate ``attn``'s moved cached keys in place in ``rotary``'s layout; return the cos / sin table
        (:func:`apply_table`, in ``dtype``) of the step's ids at ``rotary``'s base and its row of each token."""
        plan = self.plan(attn)
        tag = (id(plan), rotary.base, rotary.rotary_dim)  # one group's plan at one base and rotary size
        if tag not in self._rotations:
            table = torch.cat(rotation(plan.ids, rotary.inv_freq), dim=-1).to(dtype).contiguous()
            self._rotations[tag] = table, torch.arange(table.shape[0], device=table.device)
            self._rotations[tag + ("move",)] = move_rotation(plan.old_ids, plan.new_ids, rotary.inv_freq)
        if plan.old_ids.numel():
            kv_cache = attn.kv_cache
            where = (id(plan), tuple(kv_cache.shape), kv_cache.dtype)  # the moved keys' place: once per group
            if where not in self._rotations:
                self._rotations[where] = key_places(cache_layout(attn, kv_cache), plan)
            rerotate_cached_keys(
                kv_cache, self._rotations[where], self._rotations[tag + ("move",)], rotary.rotary_dim, rotary.neox
            )
        return self._rotations[tag]


def cache_layout(attn: Any, kv_cache: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Where ``attn``'s backend keeps each key element of a block (:func:`~harness.pic.vllm.positions.locate_keys`),
    probed once per backend, cache shape and dtype with the backend's own writer (``impl.do_kv_cache_update``)."""
    tag = (type(attn.impl).__qualname__, tuple(kv_cache.shape[1:]), kv_cache.dtype, str(kv_cache.device))
    if tag not in _LAYOUTS:
        if kv_cache.is_cuda and torch.cuda.is_current_stream_capturing():
            raise RuntimeError(
                "Dynamic PIC on vLLM: a CUDA graph is being captured before the layer's first eager "
                "step (the cache layout's probe reads values back); set compilation_config "
                "cudagraph_num_of_warmups >= 1 or pass enforce_eager=True"
            )
        if not hasattr(attn.impl, "do_kv_cache_update"):
            raise RuntimeError(
                f"Dynamic PIC on vLLM: the {type(attn.impl).__name__} attention backend has no cache "
                "writer of its own (do_kv_cache_update) to locate the keys with; pass "
                "attention_backend=FLASH_ATTN (GPU) or use --model hf-pic"
            )
        write = functools.partial(attn.impl.do_kv_cache_update, attn)  # (key, value, cache, slots)
        _LAYOUTS[tag] = locate_keys(
            write, tuple(kv_cache.shape), int(kv_cache.shape[1]), attn.head_size, kv_cache.dtype, kv_cache.device
        )
    return _LAYOUTS[tag]


_LAYOUTS: dict[tuple, tuple[torch.Tensor, ...]] = {}


def check_engine(vllm_config: Any) -> None:
    """Dynamic PIC's engine settings (:mod:`harness.pic.vllm.config`), checked again where the model is
    built (also for engines not built by vllm-pic)."""
    from vllm.platforms import current_platform

    cache, scheduler = vllm_config.cache_config, vllm_config.scheduler_config
    problems = [
        (not (current_platform.is_cpu() or current_platform.is_cuda()), "runs on vLLM's CPU and CUDA platforms only"),
        (bool(cache.enable_prefix_caching), "needs enable_prefix_caching=False"),
        (
            bool(scheduler.enable_chunked_prefill) or scheduler.long_prefill_token_threshold > 0,
            "needs enable_chunked_prefill=False (one-shot prefill)",
        ),
        (vllm_config.speculative_config is not None, "does not support speculative decoding"),
        (str(cache.cache_dtype).startswith("fp8"), "needs an unquantized KV cache"),
    ]
    for bad, why in problems:
        if bad:
            raise ValueError(f"Dynamic PIC on vLLM {why}")


def check_cuda_graphs(vllm_config: Any) -> None:
    """Dynamic PIC under CUDA graphs, checked once vLLM has resolved its graph mode: a piecewise graph is captured
    without attention metadata and would replay a step with no key moves, so it is refused (only ``FULL_DECODE_ONLY``
    graphs capture the plan)."""
    mode = getattr(vllm_config.compilation_config, "cudagraph_mode", None)
    if mode is not None and not vllm_config.model_config.enforce_eager and mode.has_piecewise_cudagraphs():
        raise ValueError(
            f"Dynamic PIC on vLLM cannot run under piecewise CUDA graphs (vLLM chose cudagraph_mode "
            f"{mode.name} for this attention backend); pass enforce_eager=True"
        )


def profiling_cache(vllm_config: Any) -> bool:
    """Whether the KV cache is the V1 runner's CUDA-graph probe (before the real one): one block per captured sequence,
    ``min(max_num_seqs, max_cudagraph_capture_size)`` (an override of that very size goes unchecked)."""
    compilation = vllm_config.compilation_config
    if vllm_config.model_config.enforce_eager or getattr(compilation, "cudagraph_mode", None) is None:
        return False
    probe = (
        min(
            vllm_config.scheduler_config.max_num_seqs,
            getattr(compilation, "max_cudagraph_capture_size", None) or vllm_config.scheduler_config.max_num_seqs,
        )
        or 1
    )
    return vllm_config.cache_config.num_gpu_blocks == probe


def check_started_engine(model: Any) -> None:
    """Dynamic PIC's checks of the started engine (:func:`check_no_preemption`, :func:`check_cuda_graphs`), once, at the
    first step with attention metadata after the KV cache is allocated (``model``: a ``Pic<Arch>``); memory-profile
    runs carry metadata before the cache's size is known (V2 runner) or on a probe cache (:func:`profiling_cache`)."""
    config = model.pic_vllm_config
    if (
        model.pic_checked_cache
        or config.cache_config.num_gpu_blocks is None
        or not _step_metadata()
        or profiling_cache(config)
    ):
        return
    check_no_preemption(
        config.scheduler_config.max_num_seqs,
        config.model_config.max_model_len,
        config.cache_config.block_size,
        config.cache_config.num_gpu_blocks,
    )
    check_cuda_graphs(config)
    model.pic_checked_cache = True


# ---------------------------------------------------------------------------------------------- the model class


def install(model: nn.Module, hf_config: Any, inference: Inference, step: DynamicStep | None) -> tuple[int, ...]:
    """Replace the ``rotary_emb`` of every full-attention RoPE layer of ``model`` (a vLLM model just built) by a
    :class:`PicRotary`; returns those layers. Refused in one line: no attention module with ``rotary_emb`` and ``attn``,
    no layer PIC changes, a PIC layer with a sliding window, a rotary module :func:`check_rotary` refuses."""
    from vllm.model_executor.layers.attention import Attention
    from vllm.model_executor.models.utils import extract_layer_index

    from harness.pic.hf.rope_layout import kept_layers

    arch = type(model).__name__.removeprefix(PREFIX)
    found: dict[int, Any] = {}  # vLLM's attention modules (vLLM ships no types)
    for module in model.modules():
        attn = getattr(module, "attn", None)
        if isinstance(attn, Attention) and isinstance(getattr(module, "rotary_emb", None), nn.Module):
            found[extract_layer_index(attn.layer_name)] = module
    if not found:
        raise ValueError(
            f"PIC on vLLM: {arch}'s attention modules hold no rotary_emb beside their Attention, so PIC "
            "cannot reach its positions; use --model hf-pic"
        )
    kept = kept_layers(hf_config)
    layers = tuple(sorted(index for index in found if index not in kept))
    if not layers:
        raise ValueError(
            f"PIC on vLLM: {arch} has no full-attention RoPE layer ({', '.join(sorted(set(kept.values())))}"
            "); PIC would change nothing"
        )
    for index in layers:
        module = found[index]
        if module.attn.sliding_window is not None:
            raise ValueError(
                f"PIC on vLLM: layer {index} of {arch} attends through a sliding window of "
                f"{module.attn.sliding_window} that its config does not declare; use --model hf-pic"
            )
        check_rotary(module.rotary_emb, f"layer {index} of {arch}")
        module.rotary_emb = PicRotary(module.rotary_emb, module.attn, inference, step)
    return layers


def native_class(arch: str) -> type:
    """vLLM's class for ``arch``, or a one-line refusal: an architecture this vLLM does not know, or one it runs
    through its Transformers backend (transformers' own attention code, no vLLM rotary module per layer)."""
    from vllm import ModelRegistry

    base = ModelRegistry._try_load_model_cls(arch)
    if base is None:
        raise UsageError(f"PIC on vLLM: this vLLM has no model class for {arch}; use --model hf-pic")
    if base.__module__.startswith(TRANSFORMERS_BACKEND):
        raise UsageError(
            f"PIC on vLLM: vLLM runs {arch} through its Transformers backend (transformers' attention "
            "code, without vLLM's rotary module per layer that PIC replaces); use --model hf-pic"
        )
    return base


@functools.cache
def pic_model_class(name: str) -> type:
    """``Pic<Arch>``: vLLM's class for ``<Arch>`` (:func:`native_class`) whose full-attention RoPE layers rotate at
    the positions of the inference in its HF config's ``pic_inference`` (:func:`install`)."""
    if not name.startswith(PREFIX):
        raise AttributeError(name)
    check_vllm_version()
    base: Any = native_class(name[len(PREFIX) :])  # a vLLM model class (vLLM ships no types)

    def __init__(self: Any, *, vllm_config: Any, prefix: str = "", **kwargs: Any) -> None:
        inference = config_inference(vllm_config.model_config.hf_config)
        if inference.entry.moves_cached_keys:
            check_engine(vllm_config)
        base.__init__(self, vllm_config=vllm_config, prefix=prefix, **kwargs)
        self.pic_step = DynamicStep(inference) if inference.entry.moves_cached_keys else None
        self.pic_layers = install(self, vllm_config.model_config.hf_text_config, inference, self.pic_step)
        self.pic_vllm_config, self.pic_checked_cache = vllm_config, False

    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        step = self.pic_step
        if step is None:
            return base.forward(self, *args, **kwargs)
        positions = kwargs["positions"] if "positions" in kwargs else args[1]
        check_started_engine(self)
        step.begin(positions)
        try:
            return base.forward(self, *args, **kwargs)
        finally:
            step.end()

    doc = f"vLLM's {base.__name__} with PIC on its full-attention RoPE layers (harness.pic.vllm.model)."
    return type(
        name,
        (base,),
        {"__init__": __init__, "forward": forward, "__module__": __name__, "__qualname__": name, "__doc__": doc},
    )


def register(arch: str | None = None) -> None:
    """Register ``Pic<Arch>`` with vLLM's ``ModelRegistry`` for every ``*ForCausalLM`` architecture it knows, lazily by
    module path (idempotent). ``arch``: that one also registered as a class, which vLLM inspects in this process (a
    lazily registered class is inspected in a subprocess, about 10 s on 2 CPU cores)."""
    from vllm import ModelRegistry

    if arch is not None:
        from vllm.model_executor.models.registry import _RegisteredModel

        name = PREFIX + arch
        ModelRegistry.models[name] = _RegisteredModel.from_model_cls(pic_model_class(name))
    known = set(ModelRegistry.get_supported_archs())
    for arch in sorted(known):
        name = PREFIX + arch
        if arch.endswith("ForCausalLM") and not arch.startswith(PREFIX) and name not in known:
            ModelRegistry.register_model(name, f"{__name__}:{name}")


def __getattr__(name: str) -> Callable[..., Any]:
    """``harness.pic.vllm.model.Pic<Arch>``: the lazy registration's target."""
    if name.startswith(PREFIX) and name.endswith("ForCausalLM"):
        return pic_model_class(name)
    raise AttributeError(name)
