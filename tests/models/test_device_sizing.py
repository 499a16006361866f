"""Scoring sized by the device (harness/models/device_sizing.py, scoring.py, longppl.py): on the CPU the sizes
measured there (a logit chunk of 2^23 floats, 4 short windows a forward, one forward a row); on a CUDA device from its
free memory (shown here with the device's memory query stubbed: this machine has no GPU), and a long row fed in blocks
of queries over a KV cache gives the states of one forward (tiny models of several families, left padding, NTK-aware
PIC, and Gemma 3 270M past its 512-token sliding window)."""

from __future__ import annotations

import pytest
import torch

from harness.longppl import estimator
from harness.longppl.estimator import CPU_WINDOW_BATCH, window_batch
from harness.models import device_sizing as sizing, scoring
from harness.models.device_sizing import DEFAULT_LOGIT_BUDGET, logit_budget, query_block
from harness.models.scoring import blocks_allowed, hidden_states
from tests.conftest import tiny_causal_lm

GIB = 1 << 30


@pytest.fixture
def cuda_with(monkeypatch):
    """A CUDA device as torch would report it: ``free`` bytes free to the driver, ``reserved`` bytes held by
    PyTorch's caching allocator of which ``allocated`` are in use; its attention kernel materialises scores unless
    ``fused`` (the kernel choice stubbed as the memory is: this machine has no GPU)."""

    def install(free: int, reserved: int = 0, allocated: int = 0, fused: bool = False) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free, 80 * GIB))
        monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: reserved)
        monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: allocated)
        monkeypatch.setattr(sizing, "fused_attention", lambda model, device, dtype: fused)
        monkeypatch.setattr(estimator, "fused_attention", lambda model, device, dtype: fused)

    return install


class GemmaSizes(torch.nn.Module):
    """Gemma 3 270M's attention and vocabulary sizes, in ``dtype``, with no layers."""

    def __init__(self, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()

        class Config:
            num_attention_heads, hidden_size = 4, 640

        self.config = Config()
        self.weight = torch.nn.Parameter(torch.zeros(1, dtype=dtype))


def test_on_the_cpu_the_sizes_stay_those_measured_there():
    model = tiny_causal_lm("llama")
    assert logit_budget("cpu") == DEFAULT_LOGIT_BUDGET == 1 << 23
    assert query_block(model, "cpu", 32768) is None
    assert window_batch(model, "cpu", 5120) == CPU_WINDOW_BATCH == 4


def test_on_a_cuda_device_the_sizes_follow_its_memory(cuda_with):
    model = GemmaSizes()
    cuda_with(64 * GIB)
    # 1/4 of 64 GiB over 8 bytes a fp32 logit (the head's output and logsumexp's exp): 2^31 floats, capped at 2^30
    assert logit_budget("cuda") == 1 << 30
    # 16 GiB of scores: 1/4 of 64 GiB over (4 + 4) bytes x 4 heads x 32768 keys = 16384 queries a block
    assert query_block(model, "cuda", 32768) == 16384
    assert query_block(model, "cuda", 8192) is None  # 8k tokens fit in one forward
    # a 5,120-token window (K 4096 + d 1024): 5120 x (4 heads x 5120 x 8 + 4 x 16 x 640) = 1.05e9 bytes; 32 GiB hold 32
    assert window_batch(model, "cuda", 5120) == 32
    cuda_with(1 * GIB)
    assert logit_budget("cuda") == (1 << 25)  # 1 GiB / 4 / 8 bytes, above the CPU's 2^23
    assert query_block(model, "cuda", 32768) == 1024  # never fewer than MIN_QUERY_BLOCK queries
    cuda_with(0)
    assert logit_budget("cuda") == DEFAULT_LOGIT_BUDGET and window_batch(model, "cuda", 5120) == 1


def test_memory_the_allocator_holds_unused_counts(cuda_with):
    """1 GiB free to the driver and 32 of the allocator's 40 GiB unused: sizes from 33 GiB, not from 1 (the short
    windows' pass leaves its memory in the allocator's cache, and the next pass would be sized from a fraction)."""
    model = GemmaSizes()
    cuda_with(1 * GIB, reserved=40 * GIB, allocated=8 * GIB)
    assert sizing.device_free_bytes("cuda") == 33 * GIB
    assert query_block(model, "cuda", 32768) == 8192  # 33 GiB / 4 / 1 MiB a query = 8448, in whole 1024s
    assert logit_budget("cuda") == 1 << 30  # 33 GiB / 4 / 8 bytes, capped (from the 1 GiB alone: 2^25)


def test_a_fused_kernel_takes_the_row_in_one_forward_and_batches_count(cuda_with):
    """bf16 where PyTorch's flash / memory-efficient kernel runs: no scores exist, one forward whatever the length;
    where scores exist, a batch of rows takes as many times the memory (8 rows: blocks of 2048, not 16384)."""
    cuda_with(1 * GIB, fused=True)
    assert query_block(GemmaSizes(torch.bfloat16), "cuda", 131072) is None
    cuda_with(64 * GIB)
    assert query_block(GemmaSizes(), "cuda", 32768, batch=8) == 2048
    # bf16 scores and their fp32 softmax: (2 + 4) bytes a score, 4 heads x 32768 keys -> 21845 queries, 21504 in 1024s
    assert query_block(GemmaSizes(torch.bfloat16), "cuda", 32768) == 21504


def test_a_logit_costs_every_buffer_the_head_keeps(cuda_with):
    """A bf16 head: its bf16 logits (2 bytes), their fp32 copy (4) and logsumexp's fp32 exp (4) per logit."""
    assert (sizing.logit_bytes(torch.bfloat16), sizing.logit_bytes(torch.float32)) == (10, 8)
    cuda_with(1 * GIB)
    assert logit_budget("cuda", torch.bfloat16) == GIB // 4 // 10


def test_the_device_is_measured_once_per_document(monkeypatch):
    """PPL of a text (``score_tokens``) and LongPPL's long and short passes (``long_short_logprobs``): one reading of
    the device each, before the first pass, whatever the passes leave behind."""
    calls = []

    def reading(device):
        calls.append(device)
        return None  # the CPU's answer: the passes run as they do here

    monkeypatch.setattr(sizing, "device_free_bytes", reading)  # read by sized_pass, the one reading of a pass
    monkeypatch.setattr(estimator, "device_free_bytes", reading)
    model = tiny_causal_lm("llama")
    ids = torch.randint(0, 97, (1, 200))
    scoring.score_tokens(model, ids, torch.ones_like(ids))
    assert len(calls) == 1
    calls.clear()
    estimator.long_short_logprobs(model, ids[0], trunc_len=64, sliding_window=32)
    assert len(calls) == 1


@pytest.mark.parametrize("arch", ["llama", "gemma3_text", "gemma2", "qwen2"])
def test_a_row_fed_in_blocks_has_the_states_of_one_forward(arch):
    model = tiny_causal_lm(arch)
    torch.manual_seed(0)
    ids = torch.randint(0, 97, (2, 300))
    mask = torch.ones_like(ids)
    mask[1, :50] = 0  # left padding: its positions hold nothing that is read
    whole = hidden_states(model, ids, mask, block=10**9)
    for block in (128, 7):
        part = hidden_states(model, ids, mask, block=block)
        for row, first in ((0, 0), (1, 50)):
            diff = (whole[row, first:] - part[row, first:]).abs().max() / whole[row, first:].abs().max()
            assert diff < 1e-5, (arch, block, row, float(diff))


def test_pic_methods_whose_positions_depend_on_the_whole_row_are_not_fed_in_blocks():
    from harness.pic.hf import apply_pic, remove_pic

    model = tiny_causal_lm("llama")
    assert blocks_allowed(model)
    for method, allowed in (("ntk", True), ("naive", False), ("dynamic", False)):
        apply_pic(model, method, ratio=2)
        assert blocks_allowed(model) is allowed, method
        if allowed:
            ids = torch.randint(0, 97, (1, 200))
            whole = hidden_states(model, ids, torch.ones_like(ids), block=10**9)
            part = hidden_states(model, ids, torch.ones_like(ids), block=64)
            assert (whole - part).abs().max() / whole.abs().max() < 1e-5
        remove_pic(model)


def test_gemma3_past_its_sliding_window_in_blocks(gemma3):
    """The real model, fp32, 1,500 tokens in blocks of 384 (its sliding layers see 512 keys): the same states."""
    model, _ = gemma3
    torch.manual_seed(1)
    ids = torch.randint(300, 20000, (1, 1500))
    whole = hidden_states(model, ids, torch.ones_like(ids), block=10**9)
    part = hidden_states(model, ids, torch.ones_like(ids), block=384)
    assert ((whole - part).abs().max() / whole.abs().max()).item() < 1e-5


def test_the_device_sized_head_gives_the_cpu_chunks_log_probabilities():
    """Chunks of any size give the same log-probabilities (the budget only changes how many rows go at once)."""
    model = tiny_causal_lm("llama")
    ids = torch.randint(0, 97, (1, 120))
    with torch.inference_mode():
        check_chunks(model, ids)


def check_chunks(model, ids) -> None:
    hidden = hidden_states(model, ids, torch.ones_like(ids))
    small = scoring.target_logprobs(model, hidden, ids, budget=97 * 3)
    large = scoring.target_logprobs(model, hidden, ids, budget=97 * 1000)
    head = lambda h: scoring.output_logits(model, h)  # noqa: E731
    assert torch.allclose(small, large, atol=1e-6)
    assert torch.allclose(scoring.logprobs_from_hidden(head, hidden[0], ids[0], budget=97 * 5), large[0], atol=1e-6)


class Gemma270M(GemmaSizes):
    """Gemma 3 270M's sizes for the peak: 18 layers, one key-value head of 256, MLP of 2048."""

    def __init__(self, dtype: torch.dtype = torch.float32) -> None:
        super().__init__(dtype)
        config = self.config
        config.num_key_value_heads, config.head_dim, config.num_hidden_layers, config.intermediate_size = (
            1,
            256,
            18,
            2048,
        )


def test_a_document_that_cannot_fit_is_refused_in_one_line_before_any_pass(cuda_with):
    """128k tokens of Gemma 3 270M in fp32, fed in blocks of 5120 queries over a KV cache (20 GiB of scores at
    4 heads x 128k keys x 8 bytes a score): the peak by hand is the decoder's at one block (the finished blocks' hidden
    states 0.34 GB, the KV cache of the row 4.8 GB, the block's held bytes, its scores 21.5 GB and mask 3.4 GB (a
    boolean and its float copy a pair) beside its attention's other bytes: about 30 GB), above the head's (the last
    hidden states and a chunk of 2^30 logits: 8.9 GB); with the run-time margin it fits 80 GiB and not 2 GiB, which is
    refused naming both (the margin: :data:`~harness.models.device_sizing.FIT_MARGIN`)."""
    from harness.core.errors import UsageError

    model = Gemma270M()
    cuda_with(80 * GIB)
    n, block = 131072, 5120
    held = (2 * 640 + 2 * 256) * 4  # embeddings kept, hidden states, one RoPE's cos and sin
    attention = (640 + 4 * 256 + 2 * 256 + 2 * 4 * 256 + 4 * 256) * 4  # normed input, q, k, v, repeated, output
    decoder = (
        n * 640 * 4  # the finished blocks' hidden states
        + 2 * 18 * 1 * 256 * n * 4  # the KV cache of the row
        + block * held
        + block * attention
        + 4 * block * n * (4 + 4)  # one block's scores and their softmax
        + block * n * (1 + 4)
    )  # one block's mask
    head = n * (640 * 4 + 4) + (1 << 30) * 8  # the last hidden states and log-probabilities, a chunk of logits
    assert sizing.predicted_peak(model, n, 1, 80 * GIB, "cuda") == max(decoder, head) == decoder == 30_141_841_408
    sizing.check_fits(model, 131072, 1, 80 * GIB, "cuda")
    # with 2 GiB free the blocks are 1024 queries (the least), logits 2^26 a chunk: 10.2 GB, and the margin's 1.2x
    cuda_with(2 * GIB)
    with pytest.raises(
        UsageError,
        match=r"^scoring 1 x 131072 tokens needs ~11\.4 GiB, cuda has 2\.0 GiB free: "
        r"score shorter documents",
    ):
        sizing.check_fits(model, 131072, 1, 2 * GIB, "cuda")


def test_running_out_of_memory_is_one_line_not_a_traceback(monkeypatch):
    from harness.core.errors import UsageError

    def out_of_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(scoring, "hidden_states", out_of_memory)
    model = tiny_causal_lm("llama")
    ids = torch.randint(0, 97, (1, 50))
    with pytest.raises(UsageError, match=r"^scoring 50 tokens ran out of memory on cpu \(less than it needed\): "):
        scoring.score_tokens(model, ids, torch.ones_like(ids))
