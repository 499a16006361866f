"""Apply Position ID Compression to a loaded Hugging Face causal LM, in place.

``apply_pic(model, method, ...)`` makes plain ``model(...)`` and ``model.generate(...)`` follow a PIC
variant (SPEC.md §1); ``remove_pic(model)`` restores the model exactly.

* ``naive``: the decoder's rotary embedding sees ``position_ids / s_cr``.
* ``ntk``: the rotary inverse frequencies are rebuilt with base ``b * s_rr`` through the model's own
  RoPE initialiser (so rope scaling types such as ``llama3`` keep working).
* ``dynamic``: positions depend on the total length ``l_c`` of each row, so the attention modules are
  replaced by :func:`_dynamic_attention_forward`, driven by a plan that a forward pre-hook on the
  decoder computes once per call (positions are shared by all layers).

Two implementations of Dynamic PIC share that plan:

* ``impl="reference"`` is paper Algorithm 1 literally: the KV cache holds keys *before* RoPE and every
  call re-rotates every cached key at ``g_{l_c}``. It is the test oracle and benchmark baseline.
* ``impl="cached"`` (default) keeps rotated keys in the cache. Between two calls a key's position only
  changes while it is in the last ``l_rc`` tokens (it then either shifts with the recent window —
  contiguous layout — or leaves it for the middle); initial and middle positions never change again.
  So a side buffer keeps the pre-RoPE keys of the last ``l_rc`` columns, and each call re-rotates, from
  that buffer, only the columns whose position changed, writing them into the cache in place. The
  rotation is computed with the same cos/sin arithmetic as the reference, so both agree to rounding of
  the attention kernel.
"""

from __future__ import annotations

import copy
import types
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn

from harness.models.unwrap import unwrap_model
from harness.positions.pic import (
    check_pic_args,
    dynamic_positions,
    naive_positions,
    ntk_base,
    positions_from_mask,
)

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2")
IMPLEMENTATIONS = ("cached", "reference")
_ATTR = "_lch_pic"  # set on the unwrapped model while PIC is applied


@dataclass(frozen=True)
class PicSettings:
    """The PIC variant applied to a model."""

    method: str
    ratio: float = 1.0
    initial: int = 4
    recent: int = 200
    layout: str = "paper"
    impl: str = "cached"


@dataclass
class _Installed:
    settings: PicSettings
    undo: list[Callable[[], None]] = field(default_factory=list)


@dataclass
class _Plan:
    """What every attention layer needs for one forward call under Dynamic PIC."""

    cos_q: torch.Tensor  # [B, T_new, D]: rotation of the new tokens (queries and keys)
    sin_q: torch.Tensor
    cos_k: torch.Tensor | None = None  # reference: rotation of all T_total keys
    sin_k: torch.Tensor | None = None
    changed: torch.Tensor | None = None  # cached: cache columns whose position changed
    changed_in_buffer: torch.Tensor | None = None  # the same columns, indexed into the pre-RoPE buffer
    cos_changed: torch.Tensor | None = None
    sin_changed: torch.Tensor | None = None
    keep: int = 0  # cached: how many trailing pre-RoPE key columns to keep


class _CacheSide:
    """What the cached Dynamic PIC keeps next to an HF cache: positions of its columns and the pre-RoPE
    keys of the last ``l_rc`` columns per layer. Batch reorders of the cache (beam search) are mirrored."""

    def __init__(self, cache: Any):
        self.positions: torch.Tensor | None = None  # [B, T] positions the cached keys are rotated at
        self.prekeys: dict[int, torch.Tensor] = {}  # layer -> [B, H, <= l_rc, D]
        for name, select in (
            ("reorder_cache", lambda t, idx: t.index_select(0, idx.to(t.device))),
            ("batch_select_indices", lambda t, idx: t[idx.to(t.device)]),
            ("batch_repeat_interleave", lambda t, n: t.repeat_interleave(n, dim=0)),
        ):
            if hasattr(cache, name):
                setattr(cache, name, self._mirrored(getattr(cache, name), select))

    def _mirrored(self, method: Callable, select: Callable) -> Callable:
        def wrapper(arg: Any) -> Any:
            result = method(arg)
            if self.positions is not None:
                self.positions = select(self.positions, arg)
            self.prekeys = {layer: select(k, arg) for layer, k in self.prekeys.items()}
            return result

        return wrapper


def _cache_side(cache: Any) -> _CacheSide:
    side = getattr(cache, "_lch_pic", None)
    if side is None:
        side = _CacheSide(cache)
        cache._lch_pic = side
    return side


class _DynamicState:
    def __init__(self, settings: PicSettings, rotary: nn.Module):
        self.settings = settings
        self.rotary = rotary
        self.plan: _Plan | None = None


def _decoder(model: nn.Module) -> nn.Module:
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ValueError(
            f"PIC supports model types {', '.join(SUPPORTED_MODEL_TYPES)}; got {model_type!r}"
        )
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else model
    if not hasattr(decoder, "rotary_emb") or not hasattr(decoder, "layers"):
        raise ValueError(f"{type(model).__name__} has no decoder with rotary_emb and layers")
    return decoder


def pic_settings(model: nn.Module) -> PicSettings | None:
    """The PIC variant currently applied to ``model`` (``None`` if none)."""
    installed = getattr(unwrap_model(model), _ATTR, None)
    return installed.settings if installed else None


def remove_pic(model: nn.Module) -> nn.Module:
    """Undo :func:`apply_pic`; a no-op on an unpatched model."""
    base = unwrap_model(model)
    installed: _Installed | None = getattr(base, _ATTR, None)
    if installed is not None:
        for undo in reversed(installed.undo):
            undo()
        delattr(base, _ATTR)
    return model


def apply_pic(
    model: nn.Module,
    method: str,
    ratio: float = 1.0,
    initial: int = 4,
    recent: int = 200,
    layout: str = "paper",
    impl: str = "cached",
) -> nn.Module:
    """Patch a loaded HF causal LM (Llama / Mistral / Qwen2, optionally PEFT-wrapped) in place.

    ``method``: ``none | naive | ntk | dynamic``; ``ratio`` is ``s_cr`` (naive, dynamic) or ``s_rr``
    (ntk); ``initial``/``recent`` are ``l_ic``/``l_rc`` and ``layout`` is ``paper`` (Eq. 9) or
    ``contiguous`` for Dynamic PIC. Re-applying replaces the previous variant. Returns ``model``.
    """
    check_pic_args(method, ratio, initial, recent, layout)
    if impl not in IMPLEMENTATIONS:
        raise ValueError(f"pic impl {impl!r} is unknown; allowed: {', '.join(IMPLEMENTATIONS)}")
    base = unwrap_model(model)
    decoder = _decoder(base)
    remove_pic(model)
    settings = PicSettings(method, float(ratio), int(initial), int(recent), layout, impl)
    installed = _Installed(settings)
    if method == "naive":
        _patch_naive(decoder.rotary_emb, settings.ratio, installed)
    elif method == "ntk":
        _patch_ntk(decoder.rotary_emb, settings.ratio, installed)
    elif method == "dynamic":
        _patch_dynamic(decoder, settings, installed)
    setattr(base, _ATTR, installed)
    return model


# --------------------------------------------------------------------------- naive / NTK


def _patch_naive(rotary: nn.Module, ratio: float, installed: _Installed) -> None:
    original = rotary.forward

    def forward(x: torch.Tensor, position_ids: torch.Tensor):
        return original(x, naive_positions(position_ids, ratio))

    rotary.forward = forward
    installed.undo.append(lambda: delattr(rotary, "forward"))


def _rope_init(rotary: nn.Module) -> Callable[..., tuple[torch.Tensor, float]]:
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    if rotary.rope_type == "default":
        return rotary.compute_default_rope_parameters
    return ROPE_INIT_FUNCTIONS[rotary.rope_type]


def _patch_ntk(rotary: nn.Module, ratio: float, installed: _Installed) -> None:
    config = copy.deepcopy(rotary.config)
    params = dict(config.rope_parameters)
    params["rope_theta"] = ntk_base(params["rope_theta"], ratio)
    config.rope_parameters = params
    device = rotary.inv_freq.device
    inv_freq, scaling = _rope_init(rotary)(config, device=device)
    saved = (rotary.inv_freq, rotary.original_inv_freq, rotary.attention_scaling)
    rotary.inv_freq = inv_freq.to(device=device, dtype=saved[0].dtype)
    rotary.original_inv_freq = rotary.inv_freq.clone()
    rotary.attention_scaling = scaling

    def undo() -> None:
        rotary.inv_freq, rotary.original_inv_freq, rotary.attention_scaling = saved

    installed.undo.append(undo)


# --------------------------------------------------------------------------- Dynamic PIC


def _patch_dynamic(decoder: nn.Module, settings: PicSettings, installed: _Installed) -> None:
    config = decoder.config
    if getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True):
        raise ValueError(
            "Dynamic PIC needs full attention; this model uses a sliding window "
            f"({config.sliding_window}). Load it with sliding_window=None or use naive/ntk PIC."
        )
    state = _DynamicState(settings, decoder.rotary_emb)
    hook = decoder.register_forward_pre_hook(
        lambda module, args, kwargs: _plan_call(state, module, args, kwargs), with_kwargs=True
    )
    installed.undo.append(hook.remove)
    for layer in decoder.layers:
        attn = layer.self_attn
        attn._lch_pic_state = state
        attn.forward = types.MethodType(_dynamic_attention_forward, attn)

        def undo(attn: nn.Module = attn) -> None:
            del attn.forward
            del attn._lch_pic_state

        installed.undo.append(undo)


def _plan_call(state: _DynamicState, decoder: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """Forward pre-hook: compute the positions of this call once for all layers."""
    s = state.settings
    tokens = kwargs.get("input_ids", args[0] if args else None)
    embeds = kwargs.get("inputs_embeds")
    ref = tokens if tokens is not None else embeds
    batch, t_new = ref.shape[0], ref.shape[1]
    device = ref.device
    dtype = embeds.dtype if embeds is not None else decoder.get_input_embeddings().weight.dtype

    cache = kwargs.get("past_key_values")
    use_cache = kwargs.get("use_cache")
    if use_cache is None:  # resolved the way the decoder itself does, after this hook
        use_cache = getattr(decoder.config, "use_cache", False) and not decoder.training
    if cache is None and use_cache:
        from transformers import DynamicCache

        cache = DynamicCache(config=decoder.config)
        kwargs["past_key_values"] = cache  # created here so that this call's state can live on it
    past = cache.get_seq_length() if cache is not None else 0
    total = past + t_new

    mask = kwargs.get("attention_mask")
    if mask is None:
        mask = torch.ones(batch, total, dtype=torch.long, device=device)
    elif mask.dim() != 2 or mask.shape[-1] != total:
        raise ValueError(
            "Dynamic PIC derives positions from a 2D attention mask covering cached and new tokens; "
            f"got shape {tuple(mask.shape)} for {past} cached + {t_new} new tokens"
        )
    ids, lengths = positions_from_mask(mask)
    g = dynamic_positions(ids, lengths[:, None], s.ratio, s.initial, s.recent, s.layout)
    x = torch.empty(0, dtype=dtype, device=device)
    cos_q, sin_q = state.rotary(x, g[:, past:])
    plan = _Plan(cos_q=cos_q, sin_q=sin_q)

    if s.impl == "reference":
        plan.cos_k, plan.sin_k = state.rotary(x, g)
    elif cache is not None:
        plan.keep = s.recent
        side = _cache_side(cache)
        if past > 0:
            previous = side.positions
            if previous is None or previous.shape != (batch, past):
                raise ValueError(
                    "this KV cache was not filled under Dynamic PIC (or was cropped); "
                    "start generation from an empty cache"
                )
            changed = (g[:, :past] != previous).any(0).nonzero().squeeze(-1)
            if changed.numel():
                buffered = min(past, plan.keep)
                first_buffered = past - buffered
                if int(changed.min()) < first_buffered:  # would contradict Eq. 9; never expected
                    raise RuntimeError("Dynamic PIC: a position outside the recent window changed")
                plan.changed = changed
                plan.changed_in_buffer = changed - first_buffered
                plan.cos_changed, plan.sin_changed = state.rotary(x, g[:, changed])
        side.positions = g
    state.plan = plan
    return args, kwargs


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE on ``x`` [B, H, T, D] with per-row ``cos``/``sin`` [B, T, D] (HF's rotate-half convention)."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def _dynamic_attention_forward(
    self: nn.Module,
    hidden_states: torch.Tensor,
    position_embeddings: Any = None,
    attention_mask: torch.Tensor | None = None,
    past_key_values: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Llama-family attention with Dynamic PIC positions (the model's own cos/sin are ignored)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    from transformers.models.llama.modeling_llama import eager_attention_forward

    plan: _Plan = self._lch_pic_state.plan
    input_shape = hidden_states.shape[:-1]
    hidden_shape = (*input_shape, -1, self.head_dim)
    query = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
    key = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
    value = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
    query = _rope(query, plan.cos_q, plan.sin_q)

    if plan.cos_k is not None:  # reference: Algorithm 1, the cache holds pre-RoPE keys
        if past_key_values is not None:
            key, value = past_key_values.update(key, value, self.layer_idx)
        key = _rope(key, plan.cos_k, plan.sin_k)
    elif past_key_values is not None:
        buffers = past_key_values._lch_pic.prekeys
        pre_rope_new = key
        key, value = past_key_values.update(_rope(key, plan.cos_q, plan.sin_q), value, self.layer_idx)
        buffer = buffers.get(self.layer_idx)
        if plan.changed is not None:
            if key.data_ptr() != past_key_values.layers[self.layer_idx].keys.data_ptr():
                raise NotImplementedError("Dynamic PIC (cached) needs a cache that returns its storage")
            fixed = _rope(buffer[:, :, plan.changed_in_buffer], plan.cos_changed, plan.sin_changed)
            key.index_copy_(2, plan.changed, fixed)
        merged = pre_rope_new if buffer is None else torch.cat((buffer, pre_rope_new), dim=2)
        buffers[self.layer_idx] = merged[:, :, merged.shape[2] - min(plan.keep, merged.shape[2]) :]
    else:
        key = _rope(key, plan.cos_q, plan.sin_q)

    attention = ALL_ATTENTION_FUNCTIONS.get_interface(
        self.config._attn_implementation, eager_attention_forward
    )
    output, weights = attention(
        self,
        query,
        key,
        value,
        attention_mask,
        dropout=0.0 if not self.training else self.attention_dropout,
        scaling=self.scaling,
        **kwargs,
    )
    output = output.reshape(*input_shape, -1).contiguous()
    return self.o_proj(output), weights
