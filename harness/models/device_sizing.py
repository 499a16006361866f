"""How much of a scoring pass goes into one launch, sized from one reading of the device's headroom per document: logit
chunks (:func:`logit_budget`), query blocks (:func:`query_block`), and the predicted peak (:func:`predicted_peak`) by
which a pass that cannot fit is refused in one line (:func:`check_fits`). docs/longppl.md, "On a GPU"."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn

from harness.core.errors import UsageError
from harness.core.sizes import GIB, in_words
from harness.models.attention import MASK_BLOCK_ELEMENTS, NAME as BLOCKED
from harness.models.unwrap import unwrap_model

if TYPE_CHECKING:
    from transformers import PreTrainedConfig

DEFAULT_LOGIT_BUDGET = 1 << 23  # floats of [batch, chunk, vocab] logits alive at once on the CPU (32 MiB fp32)
# share of a CUDA device's headroom (device_free_bytes) the buffers of one chunk of logits may take together
DEVICE_LOGIT_SHARE = 1 / 4
MAX_LOGIT_BUDGET = 1 << 30  # 4 GiB of fp32 logits: past this a chunk is no faster


def device_free_bytes(device: torch.device | str | None) -> int | None:
    """Bytes a CUDA device has for what comes next: the driver's free count plus PyTorch's reserved but unused cache
    (``memory_reserved - memory_allocated``); None for any other device. Read once per document, so that sizes do not
    depend on what earlier passes left in the cache."""
    device = torch.device(device) if device is not None else torch.device("cpu")
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    cached = max(0, int(torch.cuda.memory_reserved(device)) - int(torch.cuda.memory_allocated(device)))
    return int(torch.cuda.mem_get_info(device)[0]) + cached


MEASURE = (
    object()
)  # "measure the device now": a caller that measured once passes its reading (an int, or None off CUDA)


def host_available_bytes() -> int:
    """``MemAvailable``: what the OS can give this process now without swapping (a CPU run's headroom)."""
    import psutil

    return int(psutil.virtual_memory().available)


def _headroom(device: torch.device | str | None, free: int | None | object) -> int | None:
    return device_free_bytes(device) if free is MEASURE else free  # type: ignore[return-value]


def text_config(model: nn.Module) -> PreTrainedConfig:
    """The config of a model's language part (a multimodal config's ``text_config``, else the config itself)."""
    config = unwrap_model(model).config
    return getattr(config, "text_config", None) or config


def logit_bytes(dtype: torch.dtype = torch.float32) -> int:
    """Bytes one live logit costs (:func:`target_logprobs`): the head's output in ``dtype``, its fp32 copy when
    ``dtype`` is narrower, and the fp32 ``exp`` of ``logsumexp`` (made under autograd only, counted always)."""
    size = torch.empty(0, dtype=dtype).element_size()
    return size + (4 if size < 4 else 0) + 4


def logit_budget(
    device: torch.device | str | None = None, dtype: torch.dtype = torch.float32, free: int | None | object = MEASURE
) -> int:
    """Floats of logits one chunk may hold: on a CUDA device ``free * DEVICE_LOGIT_SHARE // logit_bytes(dtype)`` clamped
    to ``[DEFAULT_LOGIT_BUDGET, MAX_LOGIT_BUDGET]`` (``free``: a :func:`device_free_bytes` reading, else measured now);
    on the CPU :data:`DEFAULT_LOGIT_BUDGET` (larger chunks are no faster there: benchmarks/longppl_vs_reference.py)."""
    free = _headroom(device, free)
    if free is None:
        return DEFAULT_LOGIT_BUDGET
    return int(min(MAX_LOGIT_BUDGET, max(DEFAULT_LOGIT_BUDGET, int(free * DEVICE_LOGIT_SHARE) // logit_bytes(dtype))))


ATTENTION_SHARE = 1 / 4  # share of a CUDA device's free memory one block's attention scores may take
MIN_QUERY_BLOCK = 1024


def model_dtype(model: nn.Module) -> torch.dtype:
    """The dtype of the model's weights (its attention runs in it)."""
    return next((p.dtype for p in unwrap_model(model).parameters() if p.is_floating_point()), torch.float32)


def score_bytes(dtype: torch.dtype) -> int:
    """Bytes per materialised attention score: the score in ``dtype`` plus its fp32 softmax."""
    return torch.empty(0, dtype=dtype).element_size() + 4


@dataclass(frozen=True)
class AttentionShape:
    """The sizes of a model's attention, from its (text) config: query heads, key-value heads, head width, layers."""

    heads: int
    kv_heads: int
    head_dim: int
    layers: int


def attention_shape(model: nn.Module) -> AttentionShape:
    """The model's :class:`AttentionShape` (``head_dim`` defaulting to ``hidden_size / heads``)."""
    config = text_config(model)
    heads = int(getattr(config, "num_attention_heads", 1) or 1)
    head_dim = int(getattr(config, "head_dim", 0) or int(getattr(config, "hidden_size", 64)) // heads)
    return AttentionShape(
        heads=heads,
        kv_heads=int(getattr(config, "num_key_value_heads", heads) or heads),
        head_dim=head_dim,
        layers=int(getattr(config, "num_hidden_layers", 1) or 1),
    )


def attention_implementation(model: nn.Module) -> str:
    """The model's attention implementation as transformers names it (``sdpa`` when it says none)."""
    return str(getattr(text_config(model), "_attn_implementation", "sdpa") or "sdpa")


def fused_attention(model: nn.Module, device: torch.device | str, dtype: torch.dtype) -> bool:
    """Whether attention on ``device`` materialises no ``queries x keys`` scores: FlashAttention 2, or SDPA whose flash
    or memory-efficient kernel takes the model's shapes in ``dtype`` under an explicit mask (asked of PyTorch on the
    device). Eager attention, or a PyTorch that cannot say, counts as materialising."""
    implementation = attention_implementation(model)
    if "flash" in implementation:
        return True
    if implementation not in ("sdpa", BLOCKED) or torch.device(device).type != "cuda":
        return False
    shape = attention_shape(model)
    try:
        query = torch.empty(1, shape.heads, 16, shape.head_dim, device=device, dtype=dtype)
        key = torch.empty(1, shape.kv_heads, 16, shape.head_dim, device=device, dtype=dtype)
        mask = torch.zeros(1, 1, 16, 16, device=device, dtype=dtype)
        params = torch.backends.cuda.SDPAParams(query, key, key, mask, 0.0, False, shape.kv_heads != shape.heads)
        return bool(
            torch.backends.cuda.can_use_flash_attention(params, False)
            or torch.backends.cuda.can_use_efficient_attention(params, False)
        )
    except Exception:  # noqa: BLE001 (an older PyTorch without these queries: assume the scores exist)
        return False


def materialises_scores(model: nn.Module, device: torch.device | str, dtype: torch.dtype) -> bool:
    """Whether attention on ``device`` holds ``queries x keys`` scores at once: not SDPA on the CPU (tiled), nor on a
    CUDA device planned from a machine without one unless heads are over 256 wide; else not :func:`fused_attention`."""
    if attention_implementation(model) in ("sdpa", BLOCKED):
        kind = torch.device(device).type
        if kind == "cpu":
            return False
        if kind == "cuda" and not torch.cuda.is_available():
            return attention_shape(model).head_dim > 256
    return not fused_attention(model, device, dtype)


def sliding_window(model: nn.Module) -> int | None:
    """The window of the model's sliding-window layers (``layer_types``, else a ``sliding_window`` that
    ``use_sliding_window`` does not switch off), or None when it has none."""
    config = text_config(model)
    window = getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None)
    if (
        not window
        or (types and "sliding_attention" not in types)
        or (not types and not getattr(config, "use_sliding_window", True))
    ):
        return None
    return int(window)


def mask_bytes(
    model: nn.Module, width: int, batch: int = 1, queries: int | None = None, padded: bool | None = None
) -> int:
    """Bytes of the mask one layer holds at once for ``queries`` (default ``width``) x ``width`` keys x ``batch``:
    ``pairs * (1 + dtype size)`` (boolean, and SDPA's float copy); 0 under FlashAttention. A full-attention layer has
    none over rows without padding (``padded``, default ``batch > 1``) fed whole (SDPA's causal flag stands in);
    a sliding-window layer's keys past its window are masked. Under ``lch_sdpa`` a mask of more than
    :data:`~harness.models.attention.MASK_BLOCK_ELEMENTS` pairs is built a block of queries at a time over the keys
    the block attends (a sliding layer's: the block and its window)."""
    implementation = attention_implementation(model)
    if "flash" in implementation:
        return 0
    queries = width if queries is None else queries
    padded = batch > 1 if padded is None else padded
    pairs = batch * queries * width
    full = pairs if padded or queries != width else 0
    window = sliding_window(model)
    sliding = pairs if window is not None else 0
    if implementation == BLOCKED and pairs > MASK_BLOCK_ELEMENTS:
        rows = max(1, MASK_BLOCK_ELEMENTS // max(1, batch * width))
        full = min(full, MASK_BLOCK_ELEMENTS)
        sliding = batch * rows * min(width, rows + window) if window is not None else 0
    return max(full, sliding) * (1 + torch.empty(0, dtype=model_dtype(model)).element_size())


def query_block(
    model: nn.Module, device: torch.device | str, width: int, batch: int = 1, free: int | None | object = MEASURE
) -> int | None:
    """Query positions one forward of ``batch`` rows of ``width`` tokens takes, or None for all at once (``free`` None:
    off CUDA; or a fused kernel). Where the kernel materialises scores (``batch x heads x block x width`` x
    :func:`score_bytes`), the row is fed in blocks over a KV cache, the scores bounded to :data:`ATTENTION_SHARE` of
    ``free``, the block a multiple of :data:`MIN_QUERY_BLOCK`."""
    free = _headroom(device, free)
    if free is None:
        return None
    dtype = model_dtype(model)
    if fused_attention(model, device, dtype):
        return None
    heads = int(getattr(text_config(model), "num_attention_heads", 1) or 1)
    per_query = max(1, batch) * heads * max(1, width) * score_bytes(dtype)
    block = int(free * ATTENTION_SHARE) // per_query
    block = max(MIN_QUERY_BLOCK, block // MIN_QUERY_BLOCK * MIN_QUERY_BLOCK)
    return None if block >= width else block


def rope_tables(model: nn.Module) -> int:
    """How many ``(cos, sin)`` pairs a forward keeps for its whole length: one per RoPE kind (Gemma 3: its full and
    its sliding layers', ``rope_parameters`` keyed by layer type), else one."""
    config = text_config(model)
    params = getattr(config, "rope_parameters", None)
    if isinstance(params, dict) and params and all(isinstance(value, dict) for value in params.values()):
        return len(params)
    return 2 if getattr(config, "rope_local_base_freq", None) else 1


@dataclass(frozen=True)
class LayerWork:
    """Bytes one token costs in a forward of the decoder, by what holds them (as transformers' decoders are written;
    measured layer by layer: benchmarks/layer_memory.py): ``held`` through the whole forward (the embeddings the
    decoder's forward keeps, the hidden states a layer is given, each RoPE table's cos and sin), and on top at a
    layer's peak, the larger of its ``attention`` (the normed input, queries, keys, values, keys and values repeated to
    every query head, the output; the mask and any scores apart) and its ``mlp`` (the residual, the normed input, the
    gate's activation, the up projection and their product)."""

    held: int
    attention: int
    mlp: int

    def peak(self, tokens: int, attention_extra: int = 0) -> int:
        """The decoder's peak over ``tokens`` at once: held, and the larger of a layer's two phases."""
        return tokens * self.held + max(tokens * self.attention + attention_extra, tokens * self.mlp)


def layer_work(model: nn.Module, extra_tables: int = 0) -> LayerWork:
    """The model's :class:`LayerWork`, from its config; ``extra_tables``: RoPE tables a PIC method adds (Dynamic PIC's
    cos and sin at its positions)."""
    config = text_config(model)
    size = torch.empty(0, dtype=model_dtype(model)).element_size()
    hidden = int(getattr(config, "hidden_size", 1024) or 1024)
    inner = int(getattr(config, "intermediate_size", 4 * hidden) or 4 * hidden)
    shape = attention_shape(model)
    queries, keys = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    repeated = 2 * queries if shape.kv_heads != shape.heads else 0
    return LayerWork(
        held=(2 * hidden + 2 * shape.head_dim * (rope_tables(model) + extra_tables)) * size,
        attention=(hidden + queries + 2 * keys + repeated + queries) * size,
        mlp=(2 * hidden + 3 * inner) * size,
    )


def predicted_peak(
    model: nn.Module,
    width: int,
    batch: int = 1,
    free: int | None = None,
    device: torch.device | str = "cuda",
    extra_tables: int = 0,
    padded: bool | None = None,
) -> int:
    """Bytes a scoring pass of ``batch`` rows of ``width`` tokens adds at its peak with ``free`` bytes of headroom:
    the larger of its two :func:`scoring_phases`. A prediction: allocator rounding and kernel workspaces are the
    run-time check's margin (:data:`FIT_MARGIN`)."""
    return max(scoring_phases(model, width, batch, free, device, extra_tables, padded))


def scoring_phases(
    model: nn.Module,
    width: int,
    batch: int = 1,
    free: int | None = None,
    device: torch.device | str = "cuda",
    extra_tables: int = 0,
    padded: bool | None = None,
) -> tuple[int, int]:
    """``(decoder, head)``: the bytes a scoring pass adds in each of its phases, sized as :func:`hidden_states` and
    :func:`target_logprobs` size them: the decoder's peak (:class:`LayerWork`; the whole mask and the scores where
    materialised; fed in blocks, one block at work beside the row's KV cache and the finished blocks' hidden states),
    then the head's (the last hidden states, the log-probabilities and one chunk of logits); ``padded``: as
    :func:`mask_bytes`."""
    config = text_config(model)
    dtype = model_dtype(model)
    size = torch.empty(0, dtype=dtype).element_size()
    hidden = int(getattr(config, "hidden_size", 1024) or 1024)
    shape = attention_shape(model)
    work = layer_work(model, extra_tables)
    tokens = batch * width
    block = query_block(model, device, width, batch=batch, free=free)  # None when free is None
    if block is not None:
        rows = batch * block
        decoder = tokens * hidden * size  # the finished blocks' hidden states
        decoder += 2 * shape.layers * shape.kv_heads * shape.head_dim * tokens * size  # the KV cache of the whole row
        decoder += work.peak(
            rows,
            batch * shape.heads * block * width * score_bytes(dtype)
            + mask_bytes(model, width, batch, queries=block, padded=padded),
        )
    else:
        scores = (
            batch * shape.heads * width * width * score_bytes(dtype) if materialises_scores(model, device, dtype) else 0
        )
        decoder = work.peak(tokens, mask_bytes(model, width, batch, padded=padded) + scores)
    head = tokens * (hidden * size + 4) + logit_budget(device, dtype, free) * logit_bytes(dtype)
    return int(decoder), int(head)


def prefill_peak(
    model: nn.Module, width: int, batch: int = 1, device: torch.device | str = "cuda", extra_tables: int = 0
) -> int:
    """Bytes a generation's prefill of ``batch`` rows of ``width`` tokens adds at its peak beside its KV cache: the
    decoder's peak over the whole prompt (transformers' ``generate`` feeds it at once and takes logits of its last
    token only), the mask, and the scores where the kernel materialises them."""
    dtype = model_dtype(model)
    shape = attention_shape(model)
    scores = (
        batch * shape.heads * width * width * score_bytes(dtype) if materialises_scores(model, device, dtype) else 0
    )
    return layer_work(model, extra_tables).peak(batch * width, mask_bytes(model, width, batch) + scores)


# the run-time check's margin over a pass's predicted peak (allocator rounding, kernel workspaces, a heap's
# fragments): a policy of check_fits and of a plan's "fits", never part of a plan's predicted memory
FIT_MARGIN = 1.2


def check_fits(
    model: nn.Module, width: int, batch: int, free: int | None, device: torch.device | str, what: str = "scoring"
) -> None:
    """Raise :class:`UsageError` before any pass whose :func:`predicted_peak` with :data:`FIT_MARGIN` exceeds the
    headroom: ``free`` on a CUDA device (nothing checked when None), :func:`host_available_bytes` on the CPU."""
    on_cpu = torch.device(device).type == "cpu"
    if free is None and not on_cpu:
        return
    need = int(predicted_peak(model, width, batch, free, device) * FIT_MARGIN)
    have = host_available_bytes() if free is None else free
    if need > have:
        raise UsageError(
            f"{what} {batch} x {width} tokens needs ~{in_words(need)}, {device} has {in_words(have)} "
            f"{'available' if free is None else 'free'}: score shorter documents (max_tokens), pass "
            "dtype=bfloat16, or use a device with more memory"
        )


@contextmanager
def sized_pass(model: nn.Module, input_ids: torch.Tensor, what: str = "scoring") -> Iterator[int | None]:
    """One pass over ``input_ids`` ``[batch, width]``: refused first when it cannot fit (:func:`check_fits`), running
    out of memory said in one line; yields the :func:`device_free_bytes` reading for the pass's own sizes."""
    batch, width = input_ids.shape
    free = device_free_bytes(input_ids.device)
    check_fits(model, width, batch, free, input_ids.device, what)
    with out_of_memory_said(input_ids.device, width, free, what):
        yield free


@contextmanager
def out_of_memory_said(
    device: torch.device | str, width: int, free: int | None, what: str = "scoring"
) -> Iterator[None]:
    """Running out of memory inside the block said in one line (:class:`UsageError`), never a traceback."""
    try:
        yield
    except torch.OutOfMemoryError:
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        had = f"{free / GIB:.1f} GiB free before it" if free is not None else "less than it needed"
        raise UsageError(
            f"{what} {width} tokens ran out of memory on {device} ({had}): score shorter documents "
            "(max_tokens), pass dtype=bfloat16, or use a device with more memory"
        ) from None
