"""What PIC's rotary modules on vLLM compute, as tensor math (no vLLM import: tested without it).

* :func:`rotation` / :func:`rotate`: RoPE at float ids in any family's layout. vLLM's rotary modules rotate
  ``x[..., :rotary_dim]`` of each head (``rotary_dim < head_size``: partial rotary, Phi-3 / GLM) by the angle
  ``id * theta_i``, pairing dimension ``i`` with ``i + rotary_dim / 2`` (neox, rotate-half) or ``2i`` with ``2i + 1``
  (GPT-J, interleaved), and leave the rest of the head alone.
* :func:`move_rotation`: the rotation that takes a cached key from its old id to its new one (Dynamic PIC).
* :func:`step_plan`: the plan of one engine step of a method whose cached keys move (Dynamic PIC) from its
  attention metadata: the id of every scheduled token at its request's length (``g_{l_c}(m)``) and the cached keys
  whose id changed (docs/vllm.md, "How Dynamic PIC runs on vLLM"). The ids and the window of keys that can move
  are the method's registry entry's (:mod:`harness.positions.methods`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from harness.positions.inference import Inference


# ---------------------------------------------------------------------------------------------- rotation


def rotation(ids: torch.Tensor, inv_freq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(cos, sin)`` ``[n, rotary_dim / 2]`` of float ids (fp32), as RoPE computes them: the angle ``id * theta_i``
    rounded to fp32, then its cos / sin (vLLM's cos / sin cache and transformers' rotary embeddings alike)."""
    angles = ids.float().flatten()[:, None] * inv_freq[None, :]
    return angles.cos(), angles.sin()


def move_rotation(old_ids: torch.Tensor, new_ids: torch.Tensor, inv_freq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(cos, sin)`` (float64) of the rotation that takes a key rotated at ``old_ids`` to one rotated at
    ``new_ids``: by the difference of the two fp32 angles RoPE computes (:func:`rotation`), taken in float64.

    Not the fp32 angle of ``new - old``: at ids in the thousands an fp32 angle carries a rounding error of
    1e-4 rad or more, and the key rotated at the old angle and then by that one would differ from the key
    rotated at the new angle by the rounding of three large angles (measured: log-probs off by 2e-4 after a
    6k-token prompt, against 3e-5 between vanilla vLLM and HF). The exact difference of the two rounded angles
    composes to the new rounded angle; with the key rotated in float64 too (:func:`rotate`), a key moved every
    step (contiguous layout: each recent key, ``l_rc`` times) gathers only the rounding of its store to the
    cache's dtype."""
    old = (old_ids.float()[:, None] * inv_freq[None, :]).double()
    new = (new_ids.float()[:, None] * inv_freq[None, :]).double()
    return (new - old).cos(), (new - old).sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rotary_dim: int, neox: bool) -> torch.Tensor:
    """``x`` ``[n, heads, head_size]`` with ``x[..., :rotary_dim]`` rotated by ``(cos, sin)`` ``[n, rotary_dim / 2]``
    in the neox (``neox``) or GPT-J layout, the rest of each head unchanged. The rotation runs in the wider of
    ``x``'s and ``cos``'s dtypes (so float64 ``cos`` / ``sin`` rotate in float64; fp32 ``cos`` / ``sin`` on a bf16
    ``x`` are rounded to bf16 first, as vLLM's and transformers' RoPE do) and the result is in ``x``'s dtype."""
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
    token, the original id for padding), and the cached keys to re-rotate: kernel ``blocks`` / ``offsets`` (int64
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


def moved_cached_keys(ctx: int, length: int, inference: Inference) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Cached tokens ``m < ctx`` whose id differs between lengths ``ctx`` and ``length`` (the method's ids,
    ``g_{l_c}(m)`` for Dynamic PIC): ``(m, id at ctx, id at length)``.

    Only the last ``window`` cached tokens can move (the method's registry entry; Dynamic PIC: ``l_rc``, since
    below ``ctx - l_rc`` a token is initial or middle for both lengths and neither layout makes those ids depend on
    ``l_c``), so only those are examined."""
    entry = inference.entry
    m = torch.arange(max(0, ctx - entry.window(inference)), ctx)
    if m.numel() == 0 or length == ctx:
        return m[:0], torch.zeros(0), torch.zeros(0)
    old, new = entry.ids(m.float(), ctx, inference), entry.ids(m.float(), length, inference)
    keep = new != old
    return m[keep], old[keep], new[keep]


def step_plan(positions: torch.Tensor, query_start_loc: torch.Tensor, seq_lens: torch.Tensor,
              block_table: torch.Tensor, block_size: int, inference: Inference) -> PicPlan:
    """The :class:`PicPlan` of one step from its attention metadata: request ``r`` owns tokens
    ``query_start_loc[r] : query_start_loc[r + 1]`` of ``positions`` and has ``l_c = seq_lens[r]`` tokens once
    they are written, ``ctx = l_c - query_len`` of them cached; its token ``m`` lives at block
    ``block_table[r, m // block_size]``, offset ``m % block_size``."""
    ids = positions.to(torch.float32).clone()
    starts, lengths = query_start_loc.tolist(), seq_lens.tolist()
    n_req = len(lengths)
    n_tok = starts[n_req]
    query_lens = torch.tensor([starts[r + 1] - starts[r] for r in range(n_req)], dtype=torch.long)
    l_c = torch.repeat_interleave(torch.tensor(lengths, dtype=torch.float32), query_lens)
    ids[:n_tok] = inference.entry.ids(positions[:n_tok].float(), l_c, inference)
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
