"""What PIC's rotary modules on vLLM compute, as tensor math (no vLLM import: tested without it): RoPE at float ids
in vLLM's layouts (:func:`rotation`, :func:`rotate`), the plan of one Dynamic PIC engine step (:func:`step_plan`;
docs/vllm.md, "How Dynamic PIC runs on vLLM") and where a backend's KV cache keeps each key (:func:`locate_keys`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from harness.pic.inference import Inference

# ---------------------------------------------------------------------------------------------- rotation


def rotation(ids: torch.Tensor, inv_freq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(cos, sin)`` ``[n, rotary_dim / 2]`` of float ids (fp32), as RoPE computes them: the angle ``id * theta_i``
    rounded to fp32, then its cos / sin (vLLM's cos / sin cache and transformers' rotary embeddings alike)."""
    angles = ids.float().flatten()[:, None] * inv_freq[None, :]
    return angles.cos(), angles.sin()


def move_rotation(
    old_ids: torch.Tensor, new_ids: torch.Tensor, inv_freq: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(cos, sin)`` (float64) of the rotation that takes a key rotated at ``old_ids`` to one rotated at ``new_ids``:
    the difference of the two fp32 angles RoPE computes (:func:`rotation`), taken in float64, so that it composes to
    the new rounded angle. Not the fp32 angle of ``new - old``, whose rounding at ids in the thousands (1e-4 rad) would
    drift a key moved every step (docs/vllm.md)."""
    old = (old_ids.float()[:, None] * inv_freq[None, :]).double()
    new = (new_ids.float()[:, None] * inv_freq[None, :]).double()
    return (new - old).cos(), (new - old).sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rotary_dim: int, neox: bool) -> torch.Tensor:
    """``x`` ``[n, heads, head_size]`` with ``x[..., :rotary_dim]`` rotated by ``(cos, sin)`` ``[n, rotary_dim / 2]``,
    pairing ``i`` with ``i + rotary_dim / 2`` (``neox``) or ``2i`` with ``2i + 1`` (GPT-J), the rest unchanged. Runs in
    float64 when ``cos`` is float64, else in ``x``'s dtype (as vLLM's and transformers' RoPE do); returns ``x``'s
    dtype."""
    work = torch.promote_types(x.dtype, cos.dtype) if cos.dtype == torch.float64 else x.dtype
    rot, rest = x[..., :rotary_dim].to(work), x[..., rotary_dim:]
    c, s = cos.to(work)[:, None, :], sin.to(work)[:, None, :]
    if neox:
        x1, x2 = rot.chunk(2, dim=-1)
    else:
        x1, x2 = rot[..., ::2], rot[..., 1::2]
    o1, o2 = x1 * c - x2 * s, x2 * c + x1 * s
    out = torch.cat((o1, o2), dim=-1) if neox else torch.stack((o1, o2), dim=-1).flatten(-2)
    return torch.cat((out.to(x.dtype), rest), dim=-1) if rest.shape[-1] else out.to(x.dtype)


# ---------------------------------------------------------------------------------------------- Dynamic PIC's plan


@dataclass(frozen=True)
class PicPlan:
    """One engine step of Dynamic PIC: ``ids`` float32 ``[num_input_tokens]`` (``g_{l_c}(m)`` of each scheduled
    token, the original id for padding), and the cached keys to re-rotate in a fixed number of slots
    (:func:`step_plan`): kernel ``blocks`` / ``offsets`` (int64 ``[n]``) with their ids in the cache and now:
    ``old_ids`` / ``new_ids`` (float32 ``[n]``; equal where the slot's key does not move)."""

    ids: torch.Tensor
    blocks: torch.Tensor
    offsets: torch.Tensor
    old_ids: torch.Tensor
    new_ids: torch.Tensor

    @property
    def deltas(self) -> torch.Tensor:
        """How far each slot's key moves: ``new_ids - old_ids`` (0 for a key that stays)."""
        return self.new_ids - self.old_ids

    def moves(self) -> set[tuple[int, int, float, float]]:
        """The keys that move, as ``(block, offset, old id, new id)`` (host values: for tests and benchmarks)."""
        rows = zip(self.blocks.tolist(), self.offsets.tolist(), self.old_ids.tolist(), self.new_ids.tolist())
        return {row for row in rows if row[2] != row[3]}


def moved_cached_keys(ctx: int, length: int, inference: Inference) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Cached tokens ``m < ctx`` whose id (Dynamic: ``g_{l_c}(m)``) differs between lengths ``ctx`` and ``length``,
    as ``(m, id at ctx, id at length)``; only the last ``window`` cached tokens (Dynamic: ``l_rc``) can move."""
    entry = inference.entry
    assert entry.ids is not None and entry.window is not None  # a method whose cached keys move: kind ids, a window
    m = torch.arange(max(0, ctx - entry.window(inference)), ctx)
    if m.numel() == 0 or length == ctx:
        return m[:0], torch.zeros(0), torch.zeros(0)
    old, new = entry.ids(m.float(), ctx, inference), entry.ids(m.float(), length, inference)
    keep = new != old
    return m[keep], old[keep], new[keep]


def step_plan(
    positions: torch.Tensor,
    query_start_loc: torch.Tensor,
    seq_lens: torch.Tensor,
    block_table: torch.Tensor,
    block_size: int,
    inference: Inference,
) -> PicPlan:
    """The :class:`PicPlan` of one step: request ``r`` owns tokens ``query_start_loc[r] : query_start_loc[r + 1]`` of
    ``positions``, has ``l_c = seq_lens[r]`` once they are written, ``ctx = l_c - query_len`` cached; its token ``m``
    lives at block ``block_table[r, m // block_size]``, offset ``m % block_size``. Tensor ops only, sizes from shapes
    alone (CUDA-graph capturable, no host sync), so moved keys come in fixed *slots*: one per scheduled token when
    ``entry.moves_per_token`` (token ``i`` looks at key ``ctx - window + i``), else ``window`` per request (keys
    ``[ctx - window, ctx)``). A slot without a key points at a place another slot rewrites identically (``max(0, ctx -
    window)``, or slot 0's for padding); an unmoved key is rotated by exactly 0."""
    entry = inference.entry
    assert entry.ids is not None and entry.window is not None  # a method whose cached keys move: kind ids, a window
    device = positions.device
    ids = positions.to(torch.float32).clone()
    n_req = int(seq_lens.shape[0])
    if n_req == 0:
        return empty_plan(ids)
    starts = query_start_loc[: n_req + 1].to(device=device, dtype=torch.long)
    lengths = seq_lens.to(device=device, dtype=torch.long)
    query = starts[1:] - starts[:-1]
    ctx = lengths - query
    live = (query > 0) & (ctx >= 0)  # not a padding request (a CUDA graph's batch is padded with empty ones)
    token = torch.arange(positions.shape[0], device=device)
    owner = torch.searchsorted(starts[1:], token, right=True)  # n_req for the padding after the last request
    owner = owner.clamp(max=n_req - 1)
    real_token = (token < starts[-1]) & live[owner]
    ids = torch.where(real_token, entry.ids(ids, lengths[owner].to(torch.float32), inference), ids)

    window = int(entry.window(inference))
    if window <= 0:
        return empty_plan(ids)
    if entry.moves_per_token(inference):
        slot_req, real = owner, real_token
        wanted = ctx[owner] - window + (token - starts[owner])
    else:
        slot_req = torch.arange(n_req, device=device).repeat_interleave(window)
        real = live[slot_req]
        wanted = ctx[slot_req] - window + torch.arange(window, device=device).repeat(n_req)
    exists = real & (wanted >= 0) & (wanted < ctx[slot_req])
    m = torch.where(exists, wanted, (ctx[slot_req] - window).clamp(min=0))
    req = torch.where(real, slot_req, slot_req[:1])
    m = torch.where(real, m, m[:1])
    old = entry.ids(m.to(torch.float32), ctx[req].to(torch.float32), inference)
    new = entry.ids(m.to(torch.float32), lengths[req].to(torch.float32), inference)
    column = (m // block_size).clamp(max=block_table.shape[1] - 1)
    blocks = block_table.to(device)[req, column].long()
    return PicPlan(ids, blocks, m % block_size, old.to(torch.float32), new.to(torch.float32))


def empty_plan(ids: torch.Tensor) -> PicPlan:
    """A plan that moves no cached key."""
    empty = torch.zeros(0, dtype=torch.long, device=ids.device)
    return PicPlan(ids, empty, empty, torch.zeros(0, device=ids.device), torch.zeros(0, device=ids.device))


# ---------------------------------------------------------------------------------------------- the keys in a KV cache


KeyWriter = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], None]  # (key, value, cache, slots)
DIGIT = 16  # probe values are base-16 digits + 1: at most 16, exact in every float dtype a KV cache has


def locate_keys(
    write: KeyWriter,
    cache_shape: tuple[int, ...],
    heads: int,
    head_size: int,
    dtype: torch.dtype,
    device: torch.device | str = "cpu",
) -> tuple[torch.Tensor, ...]:
    """Where a backend's cache writer puts key element ``(offset t, kv head h, dim d)`` of a block: one index tensor
    ``[block_size, heads, head_size]`` per cache dimension after the block's, so that ``cache[b, *(index[t, h, d] for
    index in ...)]`` is that element of block ``b``. ``write(key, value, cache, slots)``: the backend's writer (token
    ``i`` into slot ``slots[i]``). Probed with base-16 digits in a zeroed two-block cache; a layout placing an element
    twice, nowhere, outside its block or differently in two blocks raises ``RuntimeError``."""
    block_size = cache_shape[2] if len(cache_shape) == 4 else None
    shape = (2,) + tuple(cache_shape[1:])
    if block_size is None:
        raise RuntimeError(
            f"Dynamic PIC: a KV cache of shape {tuple(cache_shape)} is not [blocks, heads, "
            "block_size, values] as vLLM's attention backends lay it out"
        )
    slots = torch.arange(2 * block_size, device=device)
    coords = torch.stack(
        torch.broadcast_tensors(
            slots[:, None, None],
            torch.arange(heads, device=device)[None, :, None],
            torch.arange(head_size, device=device)[None, None, :],
        )
    )  # [3, n, H, D]
    digits = max(1, math.ceil(math.log(int(coords.max()) + 1, DIGIT)))
    decoded = torch.zeros((3,) + shape, dtype=torch.long, device=device)
    landed = torch.zeros(shape, dtype=torch.bool, device=device)
    for axis in range(3):
        for place in range(digits):
            digit = coords[axis] // DIGIT**place % DIGIT
            cache = torch.zeros(shape, dtype=dtype, device=device)
            write((digit + 1).to(dtype), torch.zeros(coords.shape[1:], dtype=dtype, device=device), cache, slots)
            value = cache.float().round().long()
            landed |= value > 0
            decoded[axis] += (value - 1).clamp(min=0) * DIGIT**place
    where = landed.nonzero()  # [n_landed, ndim]
    slot, head, dim = (decoded[axis][landed] for axis in range(3))
    n = 2 * block_size * heads * head_size
    flat = (slot * heads + head) * head_size + dim
    if where.shape[0] != n or torch.unique(flat).numel() != n or not torch.equal(where[:, 0], slot // block_size):
        raise RuntimeError(
            f"Dynamic PIC: could not locate the keys in vLLM's KV cache of shape {tuple(cache_shape)} "
            f"({dtype}): the backend's cache writer does not put each key element in one place of "
            "its block"
        )
    index = torch.empty((2, len(shape) - 1, block_size, heads, head_size), dtype=torch.long, device=device)
    index[slot // block_size, :, slot % block_size, head, dim] = where[:, 1:]
    if not torch.equal(index[0], index[1]):
        raise RuntimeError(
            f"Dynamic PIC: vLLM's KV cache of shape {tuple(cache_shape)} places a key element "
            "differently in different blocks"
        )
    return tuple(index[0])


def key_places(index: tuple[torch.Tensor, ...], plan: PicPlan) -> tuple[torch.Tensor, ...]:
    """The advanced index of ``plan``'s slots in a cache laid out as ``index`` (:func:`locate_keys`): ``cache[places]``
    is ``[slots, heads, head_size]``, the slots' keys."""
    return (plan.blocks[:, None, None],) + tuple(part[plan.offsets] for part in index)


def rerotate_cached_keys(
    kv_cache: torch.Tensor,
    places: tuple[torch.Tensor, ...],
    delta_rotation: tuple[torch.Tensor, torch.Tensor],
    rotary_dim: int,
    neox: bool,
) -> None:
    """Rotate the cached keys at ``places`` (:func:`key_places`) from their old to their new ids
    (``delta_rotation``: the float64 ``(cos, sin)`` of :func:`move_rotation`), in float64, in place, in the layer's
    layout. Slots sharing a place read the same key and write the same value (:func:`step_plan`)."""
    kv_cache[places] = rotate(kv_cache[places], *delta_rotation, rotary_dim, neox)
