"""Dynamic PIC on vLLM (CPU backend): an out-of-tree ``Pic<Arch>`` model class that re-positions cached keys.

vLLM's paged KV cache keeps post-RoPE keys. Dynamic PIC (paper Eq. 9) gives token ``m`` the id
``g_{l_c}(m)`` (:func:`harness.positions.pic.dynamic_positions`, the one formula), which changes for some
cached tokens whenever the text grows. Per engine step (one forward):

* a **plan** (:func:`step_plan`) from the attention metadata of the step (``query_start_loc``,
  ``seq_lens`` = ``l_c`` of each request, tokens scheduled now included, ``block_table``): the float id of
  every scheduled token, and the cached keys whose id changes between ``g_ctx`` (what the cache holds,
  ``ctx = seq_len - query_len``) and ``g_{l_c}``, with the change ``delta`` (only the previous recent window
  ``[ctx - l_rc, ctx)`` can move: below it ids do not depend on ``l_c`` in either layout);
* every attention layer first **re-rotates those cached keys in place** (a post-RoPE key rotated by
  ``delta`` is the key rotated at the new id), where the key of (block, offset) lives being probed once
  through vLLM's own cache writer (:func:`key_index`), then applies RoPE at the float ids to q and the new
  k, then calls vLLM's ``Attention`` (which writes the new k / v and runs the kernel).

This is paper Algorithm 1 with a KV cache, which hf-pic's ``pic_impl=reference`` implements. It holds under
one-shot prefill (a prompt prefilled in chunks would be Algorithm 1 fed in chunks: its earlier chunks'
hidden states saw other ids), so the engine must run with ``enforce_eager=True``, prefix caching off
(a shared prefix's keys are rotated for another length), no preemption (a preempted request is recomputed by
one prefill at its final length: :func:`preemption_free_sequences` caps ``max_num_seqs`` so that the KV cache
holds every running sequence at ``max_model_len``), chunked prefill off with
``max_num_batched_tokens >= max_model_len``, no speculative decoding (rejected drafts would leave keys
re-rotated for a length never reached) and no fp8 KV cache (re-rotating quantized keys compounds error).
:func:`engine_settings` says so before anything loads; the model class checks them again.

Supported: Llama-architecture models with plain full-head rotate-half RoPE (SmolLM2, tiny Llamas), on the
CPU backend (``CPU_ATTN``). vLLM is imported only inside :func:`model_class` / :func:`register` /
:func:`key_index`, so this module imports without vLLM (its plan and rotation are tested that way).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import torch

from harness.errors import UsageError
from harness.options import convert
from harness.positions.inference import Inference
from harness.positions.pic import dynamic_positions

# HF architecture -> the registered Dynamic PIC class that replaces it
ARCHITECTURES = {"LlamaForCausalLM": "PicLlamaForCausalLM"}
CPU_BLOCK_SIZE = 128  # vLLM's CPU backend's KV cache block size unless block_size is given (vllm/platforms/cpu.py)
CONFIG_KEYS = {"ratio": "pic_ratio", "initial": "pic_initial", "recent": "pic_recent", "layout": "pic_layout"}
# engine args the mechanism needs, and what the refusal of a contradicting value says
FORCED = {
    "enforce_eager": (True, "CUDA graphs / torch.compile would freeze the per-step plan"),
    "enable_prefix_caching": (False, "a cached prefix's keys are rotated for another length"),
    "enable_chunked_prefill": (False, "a prompt prefilled in chunks is not hf-pic's one-shot prefill"),
}


# ---------------------------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class PicPlan:
    """One engine step: ``ids`` float32 ``[num_input_tokens]`` (``g_{l_c}(m)`` of each scheduled token, the
    original id for padding), and the cached keys to re-rotate: kernel ``blocks`` / ``offsets`` (int64
    ``[n]``) with their ids in the cache and now: ``old_ids`` / ``new_ids`` (float32 ``[n]``)."""

    ids: torch.Tensor
    blocks: torch.Tensor
    offsets: torch.Tensor
    old_ids: torch.Tensor
    new_ids: torch.Tensor

    @property
    def deltas(self) -> torch.Tensor:
        """How far each moved key moves: ``new_ids - old_ids``."""
        return self.new_ids - self.old_ids


def dynamic_inference(config: Any) -> Inference:
    """The Dynamic PIC settings an HF config carries as ``pic_ratio`` / ``pic_initial`` / ``pic_recent`` /
    ``pic_layout`` (:func:`hf_overrides` puts them there), checked by :class:`Inference`."""
    given = {field: getattr(config, key) for field, key in CONFIG_KEYS.items() if getattr(config, key, None) is not None}
    return Inference(method="dynamic", **given)


def moved_cached_keys(ctx: int, length: int, inference: Inference) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Cached tokens ``m < ctx`` whose id differs between ``g_ctx`` and ``g_length``: ``(m, g_ctx(m), g_length(m))``.

    Below ``ctx - l_rc`` a token is initial or middle for both lengths and neither layout makes those ids
    depend on ``l_c``; so only the previous recent window is examined."""
    m = torch.arange(max(0, ctx - inference.recent), ctx)
    if m.numel() == 0 or length == ctx:
        return m[:0], torch.zeros(0), torch.zeros(0)
    args = (inference.ratio, inference.initial, inference.recent, inference.layout)
    old, new = dynamic_positions(m, ctx, *args), dynamic_positions(m, length, *args)
    keep = new != old
    return m[keep], old[keep], new[keep]


def step_plan(positions: torch.Tensor, query_start_loc: torch.Tensor, seq_lens: torch.Tensor,
              block_table: torch.Tensor, block_size: int, inference: Inference) -> PicPlan:
    """The :class:`PicPlan` of one step from its attention metadata (module docstring): request ``r`` owns
    tokens ``query_start_loc[r] : query_start_loc[r + 1]`` of ``positions`` and has ``l_c = seq_lens[r]``
    tokens once they are written; its token ``m`` lives at block ``block_table[r, m // block_size]``,
    offset ``m % block_size``."""
    ids = positions.to(torch.float32).clone()
    starts, lengths = query_start_loc.tolist(), seq_lens.tolist()
    n_req = len(lengths)
    n_tok = starts[n_req]
    query_lens = torch.tensor([starts[r + 1] - starts[r] for r in range(n_req)], dtype=torch.long)
    l_c = torch.repeat_interleave(torch.tensor(lengths, dtype=torch.float32), query_lens)
    ids[:n_tok] = dynamic_positions(positions[:n_tok], l_c, inference.ratio, inference.initial, inference.recent,
                                    inference.layout)
    blocks, offsets, old_ids, new_ids = [], [], [], []
    for r in range(n_req):
        ctx = lengths[r] - (starts[r + 1] - starts[r])
        m, old, new = moved_cached_keys(ctx, lengths[r], inference)
        if m.numel():
            blocks.append(block_table[r, m // block_size].long())
            offsets.append(m % block_size)
            old_ids.append(old)
            new_ids.append(new)
    if not blocks:
        return empty_plan(ids)
    return PicPlan(ids, torch.cat(blocks), torch.cat(offsets), torch.cat(old_ids), torch.cat(new_ids))


def empty_plan(ids: torch.Tensor) -> PicPlan:
    """A plan that moves no cached key."""
    empty = torch.zeros(0, dtype=torch.long)
    return PicPlan(ids, empty, empty, torch.zeros(0), torch.zeros(0))


# ---------------------------------------------------------------------------------------------- rotation


def rotation(ids: torch.Tensor, inv_freq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(cos, sin)`` ``[n, head_size / 2]`` of float ids (fp32), as RoPE computes them: angle ``id * theta_i``
    rounded to fp32, then its cos / sin."""
    angles = ids.float()[:, None] * inv_freq[None, :]
    return angles.cos(), angles.sin()


def move_rotation(old_ids: torch.Tensor, new_ids: torch.Tensor, inv_freq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(cos, sin)`` of the rotation that takes a key rotated at ``old_ids`` to one rotated at ``new_ids``: by
    the difference of the two fp32 angles RoPE computes (:func:`rotation`), taken in float64.

    Not the fp32 angle of ``new - old``: at ids in the thousands an fp32 angle carries a rounding error of
    1e-4 rad or more, and the key rotated at the old angle and then by that one would differ from the key
    rotated at the new angle by the rounding of three large angles (measured: log-probs off by 2e-4 after a
    6k-token prompt, against 3e-5 between vanilla vLLM and HF). The exact difference of the two rounded angles
    composes to the new rounded angle; cos / sin stay float64, and :func:`rerotate_cached_keys` rotates in
    float64, so that a key moved every step (contiguous layout: each recent key, ``l_rc`` times) gathers only
    the rounding of its store to the cache's dtype."""
    old = (old_ids.float()[:, None] * inv_freq[None, :]).double()
    new = (new_ids.float()[:, None] * inv_freq[None, :]).double()
    return (new - old).cos(), (new - old).sin()


def rotate_half(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half (neox) RoPE of ``x`` ``[n, heads, head_size]`` with ``cos`` / ``sin`` ``[n, head_size / 2]``,
    in fp32 (float64 with float64 ``cos`` / ``sin``), returned in ``x``'s dtype."""
    x1, x2 = x.to(torch.promote_types(cos.dtype, torch.float32)).chunk(2, dim=-1)
    cos, sin = cos[:, None, :], sin[:, None, :]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)


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


def rerotate_cached_keys(kv_cache: torch.Tensor, plan: PicPlan, delta_rotation: tuple[torch.Tensor, torch.Tensor],
                         isa: str) -> None:
    """Rotate the cached keys of ``plan`` from their old to their new ids (``delta_rotation``: the ``(cos, sin)``
    of :func:`move_rotation`), in place, in a CPU_ATTN cache ``[blocks, kv_heads, block_size, 2 * head_size]``
    (:func:`key_index`)."""
    if plan.old_ids.numel() == 0:
        return
    n_blocks, heads, block_size, two_head_size = kv_cache.shape
    index = key_index(isa, kv_cache.dtype, block_size, two_head_size // 2)
    flat = kv_cache.view(n_blocks, heads, block_size * two_head_size)
    where = (plan.blocks[:, None, None], torch.arange(heads)[None, :, None], index[plan.offsets][:, None, :])
    flat[where] = rotate_half(flat[where], *delta_rotation)


# ---------------------------------------------------------------------------------------------- settings


def check_architecture(hf_config: dict) -> str:
    """The ``Pic<Arch>`` class name of an HF config dict, or a one-line refusal (not a Llama with plain
    RoPE)."""
    archs = hf_config.get("architectures") or []
    supported = [ARCHITECTURES[a] for a in archs if a in ARCHITECTURES]
    if not supported:
        raise UsageError(f"pic=dynamic on vLLM supports {', '.join(ARCHITECTURES)} models for now; this one is "
                         f"{', '.join(archs) or 'of no stated architecture'}: use --model hf-pic")
    rope = dict(hf_config.get("rope_parameters") or hf_config.get("rope_scaling") or {})
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope_type != "default" or hf_config.get("partial_rotary_factor", 1.0) != 1.0:
        raise UsageError(f"pic=dynamic on vLLM needs plain full-head RoPE; this model uses {rope_type!r} RoPE: use "
                         "--model hf-pic")
    return supported[0]


def hf_overrides(hf_config: dict, inference: Inference) -> dict:
    """``hf_overrides`` that run ``inference`` (Dynamic PIC) on vLLM: the ``Pic<Arch>`` class and the settings."""
    return {"architectures": [check_architecture(hf_config)],
            **{key: getattr(inference, field) for field, key in CONFIG_KEYS.items()}}


def engine_settings(engine_args: dict, hf_config: dict, environ: Mapping[str, str] | None = None) -> dict:
    """The engine args Dynamic PIC needs (module docstring), added to ``engine_args``; a given value that
    contradicts them is refused in one line. ``max_num_batched_tokens`` defaults to ``max_model_len``
    (else the model's ``max_position_embeddings``); ``max_num_seqs`` to :func:`preemption_free_sequences`
    when the KV cache's size is known (``environ``: the process environment, default ``os.environ``)."""
    environ = os.environ if environ is None else environ
    out = dict(engine_args)
    for key, (needed, why) in FORCED.items():
        given = out.get(key)
        if given is not None and convert(given, bool, key) != needed:
            raise UsageError(f"pic=dynamic on vLLM needs {key}={needed} ({why})")
        out[key] = needed
    if out.get("speculative_config") not in (None, {}, "None", "none"):
        raise UsageError("pic=dynamic on vLLM does not support speculative decoding (rejected drafts would leave "
                         "cached keys re-positioned for a length never reached)")
    if str(out.get("kv_cache_dtype") or "auto").startswith("fp8"):
        raise UsageError("pic=dynamic on vLLM needs an unquantized KV cache (kv_cache_dtype=auto): it re-rotates "
                         "cached keys in place")
    length = out.get("max_model_len") or out.get("max_length") or hf_config.get("max_position_embeddings")
    given = out.get("max_num_batched_tokens")
    if given is not None and length is not None and int(given) < int(length):
        raise UsageError(f"pic=dynamic on vLLM prefills each prompt in one step: max_num_batched_tokens={given} must "
                         f"be >= max_model_len ({length})")
    if given is None and length is not None:
        out["max_num_batched_tokens"] = int(length)
    cap = preemption_free_sequences(out, hf_config, length, environ)
    if cap is not None:
        given = out.get("max_num_seqs")
        if given is not None and int(given) > cap:
            raise UsageError(f"pic=dynamic on vLLM runs at most {cap} sequences at once with this KV cache and "
                             f"max_model_len={length} (more could be preempted and recomputed, which is not "
                             f"Algorithm 1): set max_num_seqs<={cap}, a larger KV cache or a smaller max_model_len")
        out["max_num_seqs"] = int(given) if given is not None else cap
    return out


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
    per_token = 2 * hf_config.get("num_hidden_layers", 1) * hf_config.get("num_key_value_heads", heads) * head_dim * size
    return space // (kv_block_size(engine_args) * per_token)


def kv_block_size(engine_args: dict) -> int:
    """The KV cache block size the engine will use: the given one, else vLLM's CPU default."""
    return int(engine_args.get("block_size") or CPU_BLOCK_SIZE)


def preemption_free_sequences(engine_args: dict, hf_config: dict, length: int | None,
                              environ: Mapping[str, str]) -> int | None:
    """The most sequences that may run at once without vLLM ever preempting one: ``blocks // ceil(max_model_len
    / block_size)`` (each running sequence may grow to ``max_model_len``); None when the cache size is unknown
    before the engine starts. A preempted request is recomputed by one prefill of its prompt and generated
    tokens, whose hidden states attend at the final length's ids: not Algorithm 1, whose hidden states of a
    token saw the ids of the length at which it was made."""
    blocks = kv_cache_blocks(engine_args, hf_config, environ)
    if blocks is None or length is None:
        return None
    held = sequences_held(blocks, int(length), kv_block_size(engine_args))
    if held == 0:
        raise UsageError(f"pic=dynamic on vLLM: a KV cache of {blocks} blocks cannot hold one sequence of "
                         f"max_model_len={length}: give a larger KV cache (VLLM_CPU_KVCACHE_SPACE=<GiB>) or a "
                         "smaller max_model_len")
    return held


def sequences_held(num_blocks: int, max_model_len: int, block_size: int) -> int:
    """How many sequences of ``max_model_len`` tokens a cache of ``num_blocks`` blocks holds at once."""
    return num_blocks // -(-max_model_len // block_size)


def check_no_preemption(max_num_seqs: int, max_model_len: int, block_size: int, num_blocks: int | None) -> None:
    """After the engine started: its KV cache holds ``max_num_seqs`` sequences of ``max_model_len`` (vLLM never
    preempts), else a one-line error saying which ``max_num_seqs`` would."""
    held = None if num_blocks is None else sequences_held(num_blocks, max_model_len, block_size)
    if held is not None and max_num_seqs > held:
        raise UsageError(f"pic=dynamic on vLLM: the engine's KV cache ({num_blocks} blocks of {block_size} tokens) "
                         f"holds {held} sequences of max_model_len={max_model_len}, not max_num_seqs={max_num_seqs} "
                         f"(more could be preempted and recomputed, which is not Algorithm 1): set "
                         f"max_num_seqs<={held}")


def _check_engine(vllm_config: Any) -> None:
    """The engine settings, checked again where the model is built (also for engines not built by vllm-pic)."""
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


# ---------------------------------------------------------------------------------------------- vLLM classes


def _attention_metadata() -> Any:
    """The attention metadata of the first attention layer in this step (None in a dummy / profile run)."""
    from vllm.forward_context import get_forward_context

    metadata = get_forward_context().attn_metadata
    if isinstance(metadata, list):
        metadata = metadata[0] if metadata else None
    return next(iter(metadata.values())) if metadata else None


class _PlanSlot:
    """The current step's plan and its rotations, shared by one model's attention layers (one slot per model
    instance). Every layer of a Llama rotates with the same RoPE base, so the ``(cos, sin)`` of the plan's
    ids and deltas are computed once per step, not once per layer."""

    plan: PicPlan | None = None
    id_rotation: tuple[torch.Tensor, torch.Tensor] | None = None
    delta_rotation: tuple[torch.Tensor, torch.Tensor] | None = None


@functools.cache
def model_class(name: str) -> type:
    """The vLLM model class registered as ``name`` (a value of :data:`ARCHITECTURES`)."""
    if name != "PicLlamaForCausalLM":
        raise UsageError(f"pic=dynamic on vLLM has no class {name}")
    from vllm.model_executor.models.llama import LlamaAttention, LlamaDecoderLayer, LlamaForCausalLM

    class PicLlamaAttention(LlamaAttention):
        """Llama attention rotating at the plan's float ids, re-rotating the moved cached keys first."""

        def __init__(self, *args: Any, plan_slot: _PlanSlot, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            rope = self.rotary_emb
            if type(rope).__name__ != "RotaryEmbedding" or rope.rotary_dim != self.head_dim or not rope.is_neox_style:
                raise ValueError(f"Dynamic PIC on vLLM needs plain full-head rotate-half RoPE, got {type(rope).__name__}")
            self.plan_slot = plan_slot
            self.register_buffer("pic_inv_freq", rope._compute_inv_freq(rope.base).float(), persistent=False)

        def forward(self, positions: torch.Tensor, hidden_states: torch.Tensor) -> torch.Tensor:
            slot = self.plan_slot
            plan = slot.plan
            if plan is None:
                raise RuntimeError("Dynamic PIC: attention called outside the model's forward (no plan)")
            qkv, _ = self.qkv_proj(hidden_states)
            q, k, v = qkv.split([self.q_size, self.kv_size, self.kv_size], dim=-1)
            kv_cache = self.attn.kv_cache
            if isinstance(kv_cache, torch.Tensor) and kv_cache.dim() == 4:
                rerotate_cached_keys(kv_cache, plan, slot.delta_rotation, self.attn.isa)
            n = q.shape[0]
            cos, sin = (part[:n] for part in slot.id_rotation)
            q = rotate_half(q.view(n, -1, self.head_dim), cos, sin).view(n, -1)
            k = rotate_half(k.view(n, -1, self.head_dim), cos, sin).view(n, -1)
            output, _ = self.o_proj(self.attn(q, k, v))
            return output

    class PicLlamaForCausalLM(LlamaForCausalLM):
        """``LlamaForCausalLM`` with Dynamic PIC (module docstring); settings from the HF config."""

        def __init__(self, *, vllm_config: Any, prefix: str = "") -> None:
            _check_engine(vllm_config)
            self.pic_inference = dynamic_inference(vllm_config.model_config.hf_config)
            slot = _PlanSlot()
            attention = functools.partial(PicLlamaAttention, plan_slot=slot)
            super().__init__(vllm_config=vllm_config, prefix=prefix,
                             layer_type=functools.partial(LlamaDecoderLayer, attn_layer_type=attention))
            self.pic_plan_slot = slot
            self.pic_vllm_config, self.pic_checked_cache = vllm_config, False

        def forward(self, input_ids: Any, positions: torch.Tensor, intermediate_tensors: Any = None,
                    inputs_embeds: Any = None) -> Any:
            slot = self.pic_plan_slot
            slot.plan = plan = self._plan(positions)
            inv_freq = self.model.layers[self.model.start_layer].self_attn.pic_inv_freq
            slot.id_rotation = rotation(plan.ids, inv_freq)
            slot.delta_rotation = move_rotation(plan.old_ids, plan.new_ids, inv_freq)
            try:
                return self.model(input_ids, positions, intermediate_tensors, inputs_embeds)
            finally:
                slot.plan = slot.id_rotation = slot.delta_rotation = None

        def _plan(self, positions: torch.Tensor) -> PicPlan:
            metadata = _attention_metadata()
            if metadata is None:  # profile / dummy run: nothing cached
                return empty_plan(positions.to(torch.float32))
            kv_cache = self.model.layers[self.model.start_layer].self_attn.attn.kv_cache
            block_size = kv_cache.shape[2]
            if not self.pic_checked_cache:  # the cache's size is known from the first real step on
                config = self.pic_vllm_config
                check_no_preemption(config.scheduler_config.max_num_seqs, config.model_config.max_model_len,
                                    config.cache_config.block_size, config.cache_config.num_gpu_blocks)
                self.pic_checked_cache = True
            return step_plan(positions, metadata.query_start_loc, metadata.seq_lens, metadata.block_table, block_size,
                             self.pic_inference)

    return PicLlamaForCausalLM


def register() -> None:
    """Register every ``Pic<Arch>`` class with vLLM's ``ModelRegistry``, lazily by module path (idempotent;
    vllm-pic calls it before building the engine in its process)."""
    from vllm import ModelRegistry

    for name in ARCHITECTURES.values():
        if name not in ModelRegistry.get_supported_archs():
            ModelRegistry.register_model(name, f"{__name__}:{name}")


def __getattr__(name: str) -> Callable[..., Any]:
    """``harness.models.vllm_dynamic_pic.PicLlamaForCausalLM``: the lazy registration's target."""
    if name in ARCHITECTURES.values():
        return model_class(name)
    raise AttributeError(name)
