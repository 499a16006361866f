"""Scoring sized by the device (harness/models/scoring.py, longppl.py): on the CPU the sizes measured there (a
logit chunk of 2^23 floats, 4 short windows a forward, one forward a row); on a CUDA device from its free memory
(shown here with the device's memory query stubbed: this machine has no GPU), and a long row fed in blocks of
queries over a KV cache gives the states of one forward (tiny models of several families, left padding, NTK-aware
PIC, and Gemma 3 270M past its 512-token sliding window)."""

from __future__ import annotations

import pytest
import torch

from harness.models import scoring
from harness.longppl.estimator import CPU_WINDOW_BATCH, window_batch
from harness.models.scoring import DEFAULT_LOGIT_BUDGET, blocks_allowed, hidden_states, logit_budget, query_block
from tests.conftest import tiny_causal_lm

GIB = 1 << 30


@pytest.fixture
def cuda_with(monkeypatch):
    """A CUDA device with ``free`` bytes free, as torch would report it."""

    def install(free: int) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free, 80 * GIB))

    return install


def test_on_the_cpu_the_sizes_stay_those_measured_there():
    model = tiny_causal_lm("llama")
    assert logit_budget("cpu") == DEFAULT_LOGIT_BUDGET == 1 << 23
    assert query_block(model, "cpu", 32768) is None
    assert window_batch(model, "cpu", 5120) == CPU_WINDOW_BATCH == 4


def test_on_a_cuda_device_the_sizes_follow_its_free_memory(cuda_with):
    class Config:  # Gemma 3 270M's sizes
        num_attention_heads, hidden_size = 4, 640

    model = torch.nn.Module()
    model.config = Config()
    cuda_with(64 * GIB)
    assert logit_budget("cuda") == 1 << 30  # 64 GiB / 16 / 4 bytes, the cap
    # 16 GiB of scores: 1/4 of 64 GiB over 2 x 4 bytes x 4 heads x 32768 keys = 16384 queries a block
    assert query_block(model, "cuda", 32768) == 16384
    assert query_block(model, "cuda", 8192) is None  # 8k tokens fit in one forward
    # a 5,120-token window (K 4096 + d 1024): 4 bytes x 5120 x (2 x 4 x 5120 + 16 x 640) = 1.05e9 bytes; 32 GiB hold 32
    assert window_batch(model, "cuda", 5120) == 32
    cuda_with(1 * GIB)
    assert logit_budget("cuda") == (1 << 24)  # 1 GiB / 16 / 4 bytes, above the CPU's 2^23
    assert query_block(model, "cuda", 32768) == 1024  # never fewer than MIN_QUERY_BLOCK queries
    cuda_with(0)
    assert logit_budget("cuda") == DEFAULT_LOGIT_BUDGET and window_batch(model, "cuda", 5120) == 1


@pytest.mark.parametrize("arch", ["llama", "gemma3_text", "gemma2", "qwen2"])
def test_a_row_fed_in_blocks_has_the_states_of_one_forward(arch):
    model = tiny_causal_lm(arch)
    torch.manual_seed(0)
    ids = torch.randint(0, 97, (2, 300))
    mask = torch.ones_like(ids)
    mask[1, :50] = 0  # left padding: its positions hold nothing that is read
    whole = hidden_states(model, ids, mask, block=10 ** 9)
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
            whole = hidden_states(model, ids, torch.ones_like(ids), block=10 ** 9)
            part = hidden_states(model, ids, torch.ones_like(ids), block=64)
            assert (whole - part).abs().max() / whole.abs().max() < 1e-5
        remove_pic(model)


def test_gemma3_past_its_sliding_window_in_blocks(gemma3):
    """The real model, fp32, 1,500 tokens in blocks of 384 (its sliding layers see 512 keys): the same states."""
    model, _ = gemma3
    torch.manual_seed(1)
    ids = torch.randint(300, 20000, (1, 1500))
    whole = hidden_states(model, ids, torch.ones_like(ids), block=10 ** 9)
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
