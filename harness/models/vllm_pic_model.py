"""PIC on vLLM: one model class per architecture, made by one factory, whose full-attention RoPE layers rotate at
PIC's positions. The one module that reaches into vLLM's internals (vLLM imported inside functions; the version
guard is :func:`check_vllm_version`).

**The seam.** Every decoder vLLM builds natively gives its attention module ``self.rotary_emb`` (from ``get_rope``:
the layer's base, ``rotary_dim`` for partial rotary, the neox or GPT-J layout) and calls ``q, k =
self.rotary_emb(positions, q, k)`` right before ``self.attn(q, k, v)``, whose ``Attention`` knows the layer's sliding
window and holds its KV cache. ``Pic<Arch>`` (:func:`pic_model_class`) is vLLM's own ``<Arch>`` class with, on each
full-attention RoPE layer (:func:`harness.models.pic.layers.kept_layers`, the rule hf-pic follows: sliding-window and
no-RoPE layers keep their positions), ``rotary_emb`` replaced by a :class:`PicRotary` that rotates in the same
layout at PIC's positions, as the method's registry entry says (:mod:`harness.positions.methods`):

* ids ``m / s_cr`` (naive), the model's positions at base ``b * s_rr`` (NTK-aware), from the positions alone;
* Dynamic PIC: ``g_{l_c}(m)`` of each scheduled token from the step's attention metadata, and first the cached keys
  whose id moved, re-rotated in place in the layer's KV cache (:mod:`harness.models.vllm_positions`; CPU backend).

Before it replaces a module it checks that the module computes what PIC assumes (its cos / sin cache is
``position x inv_freq`` and its rotation is :func:`~harness.models.vllm_positions.rotate`'s, on integer positions);
anything else is refused in one line naming what is missing. Registered with vLLM's ``ModelRegistry`` for every
``*ForCausalLM`` architecture, lazily by module path, by vllm-pic and in every vLLM process through the
``vllm.general_plugins`` entry point (:func:`register`).
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Callable

import torch
from torch import nn

from harness.errors import UsageError
from harness.models.vllm_pic_config import PREFIX, check_no_preemption, config_inference
from harness.models.vllm_positions import PicPlan, empty_plan, move_rotation, rotate, rotation, step_plan
from harness.positions.inference import Inference

log = logging.getLogger(__name__)

OLDEST_VLLM = (0, 32)  # the vLLM whose internals this module was written against (and the oldest it accepts)
TRANSFORMERS_BACKEND = "vllm.model_executor.models.transformers"  # vLLM's generic backend: transformers' own code
CHECK_POSITIONS = 4096  # integer positions at which a rotary module is compared with what PIC computes


# ---------------------------------------------------------------------------------------------- version guard


def vllm_version() -> tuple[int, int]:
    import vllm

    major, minor = (int(part) for part in vllm.__version__.split("+")[0].split(".")[:2])
    return major, minor


def check_vllm_version() -> None:
    """Refuse a vLLM older than :data:`OLDEST_VLLM` (its rotary modules, attention metadata or CPU KV cache
    layout differ); a newer one is accepted with a log line, since the structural and numeric checks of
    :func:`check_rotary` and :func:`key_index` refuse what changed."""
    found = vllm_version()
    if found < OLDEST_VLLM:
        raise ValueError(f"PIC on vLLM needs vLLM >= {'.'.join(map(str, OLDEST_VLLM))}; this is "
                         f"{'.'.join(map(str, found))}: upgrade vLLM or use --model hf-pic")
    if found > OLDEST_VLLM:
        log.info("PIC on vLLM was written against vLLM %s; running on %s (its modules are checked as they load)",
                 ".".join(map(str, OLDEST_VLLM)), ".".join(map(str, found)))


# ---------------------------------------------------------------------------------------------- the rotary module


def check_rotary(rope: Any, where: str) -> None:
    """``rope`` (a layer's ``rotary_emb``) rotates as PIC's rotary does, else a one-line ``ValueError``: a plain
    ``RotaryEmbedding`` (or a subclass that only changes ``inv_freq``, Llama 3) whose cos / sin cache is ``position
    x inv_freq`` (:func:`~harness.models.vllm_positions.rotation`) and whose rotation of a probe at integer positions
    is :func:`~harness.models.vllm_positions.rotate`'s in its layout."""
    from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbedding, RotaryEmbeddingBase

    kind = type(rope)
    plain = (isinstance(rope, RotaryEmbedding)
             and kind._compute_cos_sin_cache is RotaryEmbeddingBase._compute_cos_sin_cache
             and kind.forward_static is RotaryEmbedding.forward_static
             and kind.forward_native is RotaryEmbedding.forward_native)
    if not plain:
        raise ValueError(f"PIC on vLLM: {where} rotates with {kind.__name__}, not plain RoPE (position x inv_freq); "
                         "use --model hf-pic")
    cache = rope.cos_sin_cache
    n = min(cache.shape[0], CHECK_POSITIONS)
    positions = torch.arange(n, device=cache.device)
    inv_freq = rope._compute_inv_freq(rope.base).float().to(cache.device)
    expected = torch.cat(rotation(positions, inv_freq), dim=-1).to(cache.dtype).float()  # rounded as the cache is
    tolerance = max(1e-5, 2 * torch.finfo(cache.dtype).eps)
    if (cache[:n].float() - expected).abs().max().item() > tolerance:
        raise ValueError(f"PIC on vLLM: {where}'s {kind.__name__} cache is not cos / sin of position x inv_freq; use "
                         "--model hf-pic")
    cos, sin = expected.chunk(2, dim=-1)
    probe = torch.randn(n, 2 * rope.head_size, generator=torch.Generator().manual_seed(0)).to(cache.device)
    theirs, _ = RotaryEmbedding.forward_static(positions, probe.clone(), None, rope.head_size, rope.rotary_dim,
                                               cache.float(), rope.is_neox_style)
    ours = rotate(probe.view(n, 2, rope.head_size), cos, sin, rope.rotary_dim, rope.is_neox_style).view(n, -1)
    kernel = apply_table(probe.clone(), None, torch.cat((cos, sin), dim=-1), rope.head_size, rope.is_neox_style)[0]
    if max((theirs - ours).abs().max().item(), (theirs - kernel).abs().max().item()) > 1e-5:
        raise ValueError(f"PIC on vLLM: {where}'s {kind.__name__} does not rotate in the layout it declares "
                         f"(rotary_dim {rope.rotary_dim}, neox {rope.is_neox_style}); use --model hf-pic")


def apply_table(query: torch.Tensor, key: torch.Tensor | None, table: torch.Tensor, head_size: int,
                neox: bool, rows: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``query`` / ``key`` (``[n, heads * head_size]``) rotated in place by vLLM's own rotary kernel, token ``i``
    by row ``rows[i]`` (default ``i``) of ``table`` (``[>= n, rotary_dim]``: cos then sin, the layout of a rotary
    module's cos / sin cache): the kernel the replaced module runs, given the cos / sin of PIC's ids instead of a
    lookup by position."""
    from vllm import _custom_ops as ops

    if rows is None:
        rows = torch.arange(query.shape[0], device=query.device)
    if table.dtype != query.dtype:
        table = table.to(query.dtype)
    ops.rotary_embedding(rows, query, key, head_size, table.contiguous(), neox)
    return query, key


class PicRotary(nn.Module):
    """A full-attention layer's ``rotary_emb`` under PIC: ``forward(positions, query, key)`` as vLLM's rotary
    modules, in the replaced module's layout (``head_size``, ``rotary_dim``, neox / GPT-J) and with its base
    (NTK-aware PIC: the method's base of it). Naive / NTK-aware PIC compute their ids from ``positions`` alone
    (traceable: CUDA graphs and torch.compile keep working); Dynamic PIC takes the step's plan from ``step`` and
    re-rotates this layer's moved cached keys before rotating the new tokens."""

    def __init__(self, rope: Any, attn: nn.Module, inference: Inference, step: "DynamicStep | None") -> None:
        super().__init__()
        entry = inference.entry
        self.head_size, self.rotary_dim, self.neox = rope.head_size, rope.rotary_dim, bool(rope.is_neox_style)
        self.base = entry.base(float(rope.base), inference) if entry.base is not None else float(rope.base)
        device = rope.cos_sin_cache.device
        self.register_buffer("inv_freq", rope._compute_inv_freq(self.base).float().to(device), persistent=False)
        self.inference = inference
        self.step = step
        self._attn = (attn,)  # the layer's Attention, whose KV cache Dynamic PIC moves keys in (not a submodule)

    def extra_repr(self) -> str:
        return (f"{self.inference.words()}, head_size={self.head_size}, rotary_dim={self.rotary_dim}, "
                f"base={self.base:g}, neox={self.neox}")

    def forward(self, positions: torch.Tensor, query: torch.Tensor,
                key: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        positions = positions.flatten()
        n = positions.shape[0]
        if self.step is None:
            ids = positions.float()
            if self.inference.entry.ids is not None:
                ids = self.inference.entry.ids(ids, None, self.inference)
            table = torch.cat(rotation(ids, self.inv_freq), dim=-1)
            return apply_table(query, key, table, self.head_size, self.neox)
        table, rows = self.step.rotate_cache_and_ids(self._attn[0], self, query.dtype)
        return apply_table(query, key, table, self.head_size, self.neox, rows[:n])


# ---------------------------------------------------------------------------------------------- Dynamic PIC's step


def _step_metadata() -> dict | None:
    """This step's attention metadata by layer name (None or empty in a dummy / profile run)."""
    from vllm.forward_context import get_forward_context

    metadata = get_forward_context().attn_metadata
    if isinstance(metadata, list):  # micro-batches: one dict each
        metadata = metadata[0] if metadata else None
    return metadata


def _layer_metadata(layer_name: str) -> Any:
    """The attention metadata of ``layer_name`` in this step (None in a dummy / profile run)."""
    metadata = _step_metadata()
    return metadata.get(layer_name) if metadata else None


class DynamicStep:
    """Dynamic PIC's state of one engine step, shared by one model's PIC layers: the plan of each KV cache group
    (hybrid models keep sliding-window and full-attention layers in groups with their own block tables), and the
    rotations of its ids and moves per RoPE base, computed once per step, not once per layer."""

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
        if self.positions is None:
            raise RuntimeError("Dynamic PIC: a PIC layer was called outside its model's forward (no step)")
        metadata = _layer_metadata(attn.layer_name)
        kv_cache = attn.kv_cache
        if metadata is None or not (isinstance(kv_cache, torch.Tensor) and kv_cache.dim() == 4):
            return self._plans.setdefault(0, empty_plan(self.positions.to(torch.float32)))
        key = id(metadata)
        if key not in self._plans:
            self._plans[key] = step_plan(self.positions, metadata.query_start_loc, metadata.seq_lens,
                                         metadata.block_table, kv_cache.shape[2], self.inference)
        return self._plans[key]

    def rotate_cache_and_ids(self, attn: Any, rotary: PicRotary,
                             dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
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
                self._rotations[where] = key_places(kv_cache, plan, attn.isa)
            rerotate_cached_keys(kv_cache, self._rotations[where], self._rotations[tag + ("move",)],
                                 rotary.rotary_dim, rotary.neox)
        return self._rotations[tag]


@functools.cache
def key_index(isa: str, dtype: torch.dtype, block_size: int, head_size: int) -> torch.Tensor:
    """``[block_size, head_size]``: where key element (offset t, dim d) of one (block, kv head) lives in the
    flat key region of that block in vLLM's CPU_ATTN cache ``[blocks, kv_heads, block_size, 2 * head_size]`` (per
    block and head ``2 * block_size * head_size`` values, the keys' first).

    Probed with vLLM's own cache writer (``cpu_attn_reshape_and_cache``), so it holds for the layout each ISA
    uses; the probe writes small integers, exact in bf16 / fp16 too."""
    from vllm import _custom_ops as ops

    def written(values: torch.Tensor) -> torch.Tensor:
        cache = torch.zeros(1, 1, block_size, 2 * head_size, dtype=dtype)
        key_cache, value_cache = cache.view(1, 1, 2 * block_size, head_size).chunk(2, dim=2)
        key = values.to(dtype).view(block_size, 1, head_size)
        ops.cpu_attn_reshape_and_cache(key, torch.zeros_like(key), key_cache, value_cache,
                                       torch.arange(block_size, dtype=torch.int64), isa)
        return cache.flatten()[: block_size * head_size].float().round().long()

    t_of = written((torch.arange(block_size)[:, None] + 1).expand(block_size, head_size).float()) - 1
    d_of = written((torch.arange(head_size)[None, :] + 1).expand(block_size, head_size).float()) - 1
    index = torch.empty(block_size, head_size, dtype=torch.long)
    index[t_of, d_of] = torch.arange(block_size * head_size)
    if not torch.equal(index.flatten().sort().values, torch.arange(block_size * head_size)):
        raise RuntimeError(f"Dynamic PIC: could not locate the keys in vLLM's CPU KV cache (isa {isa}, {dtype})")
    return index


def key_places(kv_cache: torch.Tensor, plan: PicPlan, isa: str) -> tuple[torch.Tensor, ...]:
    """Where the moved keys of ``plan`` live in a CPU_ATTN cache ``[blocks, kv_heads, block_size, 2 * head_size]``
    viewed as ``[blocks, kv_heads, block_size * 2 * head_size]`` (:func:`key_index`): an index that picks
    ``[n, kv_heads, head_size]``, the same for every layer of a KV cache group."""
    n_blocks, heads, block_size, two_head_size = kv_cache.shape
    index = key_index(isa, kv_cache.dtype, block_size, two_head_size // 2)
    return plan.blocks[:, None, None], torch.arange(heads)[None, :, None], index[plan.offsets][:, None, :]


def rerotate_cached_keys(kv_cache: torch.Tensor, places: tuple[torch.Tensor, ...],
                         delta_rotation: tuple[torch.Tensor, torch.Tensor], rotary_dim: int, neox: bool) -> None:
    """Rotate the cached keys at ``places`` (:func:`key_places`) from their old to their new ids
    (``delta_rotation``: the float64 ``(cos, sin)`` of :func:`~harness.models.vllm_positions.move_rotation`), in
    float64, in place, in the layer's layout."""
    n_blocks, heads, block_size, two_head_size = kv_cache.shape
    flat = kv_cache.view(n_blocks, heads, block_size * two_head_size)
    flat[places] = rotate(flat[places], *delta_rotation, rotary_dim, neox)


def check_engine(vllm_config: Any) -> None:
    """Dynamic PIC's engine settings (:mod:`harness.models.vllm_pic_config`), checked again where the model is
    built (also for engines not built by vllm-pic)."""
    from vllm.platforms import current_platform

    model, cache, scheduler = vllm_config.model_config, vllm_config.cache_config, vllm_config.scheduler_config
    problems = [
        (not current_platform.is_cpu(), "runs on vLLM's CPU backend only for now"),
        (not model.enforce_eager, "needs enforce_eager=True"),
        (bool(cache.enable_prefix_caching), "needs enable_prefix_caching=False"),
        (bool(scheduler.enable_chunked_prefill) or scheduler.long_prefill_token_threshold > 0,
         "needs enable_chunked_prefill=False (one-shot prefill)"),
        (vllm_config.speculative_config is not None, "does not support speculative decoding"),
        (str(cache.cache_dtype).startswith("fp8"), "needs an unquantized KV cache"),
    ]
    for bad, why in problems:
        if bad:
            raise ValueError(f"Dynamic PIC on vLLM {why}")


# ---------------------------------------------------------------------------------------------- the model class


def install(model: nn.Module, hf_config: Any, inference: Inference, step: DynamicStep | None) -> tuple[int, ...]:
    """Replace the ``rotary_emb`` of every full-attention RoPE layer of ``model`` (a vLLM model just built) by a
    :class:`PicRotary`; returns those layers. Refused in one line: a model with no attention module holding
    ``rotary_emb`` and ``attn``, none whose layer PIC changes, a PIC layer whose ``Attention`` has a sliding window
    (the config rule and the model disagree), or a rotary module PIC cannot follow (:func:`check_rotary`)."""
    from vllm.model_executor.layers.attention import Attention
    from vllm.model_executor.models.utils import extract_layer_index

    from harness.models.pic.layers import kept_layers

    arch = type(model).__name__.removeprefix(PREFIX)
    found: dict[int, nn.Module] = {}
    for module in model.modules():
        if isinstance(getattr(module, "attn", None), Attention) and isinstance(getattr(module, "rotary_emb", None),
                                                                               nn.Module):
            found[extract_layer_index(module.attn.layer_name)] = module
    if not found:
        raise ValueError(f"PIC on vLLM: {arch}'s attention modules hold no rotary_emb beside their Attention, so PIC "
                         "cannot reach its positions; use --model hf-pic")
    kept = kept_layers(hf_config)
    layers = tuple(sorted(index for index in found if index not in kept))
    if not layers:
        raise ValueError(f"PIC on vLLM: {arch} has no full-attention RoPE layer ({', '.join(sorted(set(kept.values())))}"
                         "); PIC would change nothing")
    for index in layers:
        module = found[index]
        if module.attn.sliding_window is not None:
            raise ValueError(f"PIC on vLLM: layer {index} of {arch} attends through a sliding window of "
                             f"{module.attn.sliding_window} that its config does not declare; use --model hf-pic")
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
        raise UsageError(f"PIC on vLLM: vLLM runs {arch} through its Transformers backend (transformers' attention "
                         "code, without vLLM's rotary module per layer that PIC replaces); use --model hf-pic")
    return base


@functools.cache
def pic_model_class(name: str) -> type:
    """``Pic<Arch>``: vLLM's class for ``<Arch>`` (:func:`native_class`) whose full-attention RoPE layers rotate at
    the positions of the inference in its HF config's ``pic_inference`` (:func:`install`)."""
    if not name.startswith(PREFIX):
        raise AttributeError(name)
    check_vllm_version()
    base = native_class(name[len(PREFIX):])

    def __init__(self: Any, *, vllm_config: Any, prefix: str = "", **kwargs: Any) -> None:
        inference = config_inference(vllm_config.model_config.hf_config)
        if inference.entry.moves_cached_keys:
            check_engine(vllm_config)
        base.__init__(self, vllm_config=vllm_config, prefix=prefix, **kwargs)
        self.pic_inference = inference
        self.pic_step = DynamicStep(inference) if inference.entry.moves_cached_keys else None
        self.pic_layers = install(self, vllm_config.model_config.hf_text_config, inference, self.pic_step)
        self.pic_vllm_config, self.pic_checked_cache = vllm_config, False

    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        step = self.pic_step
        if step is None:
            return base.forward(self, *args, **kwargs)
        positions = kwargs["positions"] if "positions" in kwargs else args[1]
        if not self.pic_checked_cache and _step_metadata():
            config = self.pic_vllm_config  # the cache's size is known from the first real step on
            check_no_preemption(config.scheduler_config.max_num_seqs, config.model_config.max_model_len,
                                config.cache_config.block_size, config.cache_config.num_gpu_blocks)
            self.pic_checked_cache = True
        step.begin(positions)
        try:
            return base.forward(self, *args, **kwargs)
        finally:
            step.end()

    doc = f"vLLM's {base.__name__} with PIC on its full-attention RoPE layers (harness.models.vllm_pic_model)."
    return type(name, (base,), {"__init__": __init__, "forward": forward, "__module__": __name__,
                                "__qualname__": name, "__doc__": doc})


def register(arch: str | None = None) -> None:
    """Register ``Pic<Arch>`` with vLLM's ``ModelRegistry`` for every ``*ForCausalLM`` architecture it knows,
    lazily by module path (idempotent; vLLM's ``vllm.general_plugins`` entry point calls it in each of its
    processes). ``arch``: that one registered as a class, which vLLM inspects in this process (vllm-pic, for the
    model it is about to build; a lazily registered class is inspected in a subprocess, about 10 s on 2 CPU cores,
    once per class and version of this module)."""
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
    """``harness.models.vllm_pic_model.Pic<Arch>``: the lazy registration's target."""
    if name.startswith(PREFIX) and name.endswith("ForCausalLM"):
        return pic_model_class(name)
    raise AttributeError(name)
