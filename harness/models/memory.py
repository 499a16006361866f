"""The memory a run of a model will take, from its config alone (weights on the meta device): its weights at the run's
dtype and, per request, the scoring path's peak, or a generation's prefill peak and KV cache (under Dynamic PIC with
its pre-RoPE keys); ``lch plan``'s memory column."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch
from torch import nn

from harness.models.device_sizing import attention_shape, prefill_peak, scoring_phases, text_config
from harness.models.unwrap import unwrap_model

# what a CPU process holds beyond its tensors, as a share of the bytes its passes make (their work and KV cache):
# glibc's heap keeps the freed blocks of tensors under its mmap threshold for the next ones, fragmented.
# Measured: benchmarks/plan_memory_cpu.py against benchmarks/layer_memory.py's tensors, which show none of it
CPU_HEAP_SLACK = 0.2
# glibc's largest mmap threshold (DEFAULT_MMAP_THRESHOLD_MAX, 64-bit): a block of this size or more is mapped and
# returned to the system whole when freed. A KV cache grown a token at a time (a new tensor per layer each step) leaves
# no slack once a layer's keys are this large (measured: Gemma 3 generation 32k and 64k, plan_memory_cpu.py)
MMAP_THRESHOLD = 32 << 20
PAGE = 4096  # bytes the kernel maps in at a time: a row of a mapped embedding read costs at least one


@dataclass(frozen=True)
class MemoryNeed:
    """Bytes a request needs on its device: the weights, the work of its longest forward, the KV cache it keeps.
    ``phases``: a scoring pass's work in its decoder and in its head phase (``work`` is the larger);
    ``late``: bytes of the weights not yet resident in the decoder phase (a first pass over a mapped checkpoint);
    ``cache_tensor``: bytes of the cache's largest tensor (a layer's keys)."""

    weights: int
    work: int
    cache: int = 0
    phases: tuple[int, int] | None = None
    late: int = 0
    cache_tensor: int = 0

    @property
    def total(self) -> int:
        return self.weights + self.work + self.cache

    def resident(self, device: torch.device | str) -> int:
        """What a process holds for it on ``device``: :attr:`total`, less :attr:`late` in the decoder phase where the
        head phase is smaller, and on the CPU :data:`CPU_HEAP_SLACK` of what its passes make (of the cache only while
        its tensors are under :data:`MMAP_THRESHOLD`)."""
        slack = CPU_HEAP_SLACK if torch.device(device).type == "cpu" else 0.0
        heaped = self.cache if self.cache_tensor < MMAP_THRESHOLD else 0

        def held(weights: int, work: int) -> int:
            return weights + work + self.cache + int(slack * (work + heaped))

        if not self.late or self.phases is None:
            return held(self.weights, self.work)
        decoder, head = self.phases
        return max(held(self.weights - self.late, decoder), held(self.weights, head))


@lru_cache(maxsize=4)
def meta_model(pretrained: str, dtype: str = "auto") -> nn.Module:
    """The model of ``pretrained``'s config with its weights on the meta device, in ``dtype`` (``auto``: the config's,
    else float32), its attention as hf-pic runs it (:func:`~harness.models.attention.use_blocked_masks`)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from harness.models.attention import use_blocked_masks

    config = AutoConfig.from_pretrained(pretrained)
    text = getattr(config, "text_config", None) or config
    named = dtype if dtype != "auto" else str(getattr(text, "dtype", None) or "float32")
    torch_dtype = getattr(torch, named.removeprefix("torch."), torch.float32)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch_dtype)
    use_blocked_masks(model)
    return model


def weight_bytes(model: nn.Module) -> int:
    """Bytes of the model's parameters and buffers at their dtypes (a tied head counted once)."""
    unique = {id(tensor): tensor for tensor in [*model.parameters(), *model.buffers()]}
    return sum(tensor.numel() * tensor.element_size() for tensor in unique.values())


def edge_bytes(model: nn.Module) -> tuple[int, int]:
    """``(bytes, row)``: the bytes of the model's input embeddings and output head (once where tied), and of one row of
    its input embeddings."""
    base = unwrap_model(model)
    modules = [base.get_input_embeddings(), base.get_output_embeddings()]
    unique = {id(t): t for m in modules if m is not None for t in m.parameters()}
    row = text_config(model).hidden_size * next(base.get_input_embeddings().parameters()).element_size()
    return sum(t.numel() * t.element_size() for t in unique.values()), int(row)


def kv_cache_bytes(model: nn.Module, tokens: int, batch: int = 1, whole: bool = False) -> int:
    """Bytes of the KV cache of ``batch`` rows of ``tokens``: ``2 * batch * kv_heads * head_dim * dtype size`` per token
    kept per layer, a sliding-window layer keeping ``min(tokens, window)`` (transformers' ``DynamicCache``), or every
    token with ``whole``."""
    config, shape = text_config(model), attention_shape(model)
    size = next(model.parameters()).element_size()
    kinds = list(getattr(config, "layer_types", None) or ["full_attention"] * shape.layers)
    window = getattr(config, "sliding_window", None)
    kept = [
        min(tokens, int(window)) if kind == "sliding_attention" and window and not whole else tokens for kind in kinds
    ]
    return 2 * batch * shape.kv_heads * shape.head_dim * size * sum(kept)


@dataclass(frozen=True)
class DynamicPic:
    """Dynamic PIC as a run holds it: its ``impl`` (``cached`` or ``reference``) and the ``layers`` whose positions it
    moves (:func:`harness.pic.hf.rope_layout.kept_layers` says which it leaves)."""

    impl: str
    layers: int


def request_need(
    model: nn.Module,
    prompt: int,
    budget: int = 0,
    batch: int = 1,
    scores: bool = False,
    device: torch.device | str = "cpu",
    free: int | None = None,
    dynamic: DynamicPic | None = None,
    first_mapped: bool = False,
) -> MemoryNeed:
    """What a request of ``prompt`` tokens needs: scored (``scores``: every token's log-probability, the scoring path's
    two phases; ``first_mapped``: the process's first pass over a checkpoint mapped from disk, whose embeddings and
    head become resident only in the head phase, but a page for each token's row read in the decoder phase) or
    generating ``budget`` tokens after a prefill of the prompt (its peak, and its KV cache kept to the end).
    At the end of the prefill a sliding-window layer still holds the whole prompt's keys and values (transformers keeps
    its window as a view of them until the first decoded token). ``dynamic``: Dynamic PIC (None: not it), whose cos and
    sin at its positions are one more RoPE table; ``impl`` ``cached`` keeps each of its layers' fp32 pre-RoPE keys of
    the prompt to the first decoded token (a view of them), ``reference`` keeps pre-RoPE keys as the cache and rotates
    one layer's keys of every token at a time, with the cos and sin of every position."""
    impl = dynamic.impl if dynamic is not None else None
    tables = 0 if impl is None else 2 if impl == "reference" else 1
    if scores:
        phases = scoring_phases(model, max(1, prompt), batch, free, device, tables)
        late = 0
        if first_mapped:
            edges, row = edge_bytes(model)
            late = max(0, edges - batch * prompt * max(row, PAGE))
        return MemoryNeed(weight_bytes(model), max(phases), phases=phases, late=late)
    work = prefill_peak(model, max(1, prompt), batch, device, tables)
    shape = attention_shape(model)
    if dynamic is not None and impl == "cached":
        work += dynamic.layers * batch * shape.kv_heads * shape.head_dim * 4 * prompt
    keys = batch * shape.kv_heads * shape.head_dim * next(model.parameters()).element_size() * (prompt + budget)
    if impl == "reference":  # its pre-RoPE keys, one layer's rotated at a time
        work += keys
    cache = max(kv_cache_bytes(model, prompt + budget, batch), kv_cache_bytes(model, prompt, batch, whole=True))
    return MemoryNeed(weights=weight_bytes(model), work=work, cache=cache, cache_tensor=keys)
