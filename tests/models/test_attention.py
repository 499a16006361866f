"""``lch_sdpa`` (harness/models/attention.py): transformers' SDPA attention with the mask built a block of queries at a
time. Its states equal ``sdpa``'s (sliding windows, left padding, grouped keys), the largest tensor of a forward grows
linearly with the length where ``sdpa``'s grows with its square (the whole ``T x T`` mask of a sliding-window
layer: Gemma 3 at 64k was killed by the operating system), and a CPU pass that cannot fit is refused before it
runs."""

from __future__ import annotations

import copy

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from harness.core.errors import UsageError
from harness.models import attention, device_sizing
from harness.models.attention import use_blocked_masks
from harness.models.scoring import hidden_states, left_pad, score_tokens
from tests.conftest import tiny_causal_lm


class LargestTensor(TorchDispatchMode):
    """The most elements any one tensor made inside the mode had."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        out = func(*args, **(kwargs or {}))
        for value in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(value, torch.Tensor):
                self.largest = max(self.largest, value.numel())
        return out


def _pair(arch: str, **overrides) -> tuple[torch.nn.Module, torch.nn.Module]:
    model = tiny_causal_lm(arch, layers=3, **overrides)
    blocked = copy.deepcopy(model)
    assert use_blocked_masks(blocked) and blocked.config._attn_implementation == "lch_sdpa"
    assert model.config._attn_implementation == "sdpa"
    return model, blocked


@pytest.mark.parametrize("arch, overrides", [("gemma3_text", {}), ("mistral", {"sliding_window": 8}), ("llama", {})])
def test_blocked_masks_give_the_states_of_sdpa(arch, overrides, monkeypatch):
    """Blocks of 3 to 5 query rows (a 160-pair budget): a sliding window of 8 (Gemma 3's hybrid layers, Mistral's
    every layer) and a left-padded batch, whose padding needs a mask on every layer."""
    monkeypatch.setattr(attention, "MASK_BLOCK_ELEMENTS", 160)
    model, blocked = _pair(arch, **overrides)
    generator = torch.Generator().manual_seed(1)
    rows = [torch.randint(3, 97, (n,), generator=generator).tolist() for n in (37, 23, 30)]
    ids, mask = left_pad(rows, 0)
    expected = hidden_states(model, ids, mask)
    got = hidden_states(blocked, ids, mask)
    for b, row in enumerate(rows):  # the real tokens' states (a padded query's row is never read)
        real = slice(ids.shape[1] - len(row), None)
        torch.testing.assert_close(got[b, real], expected[b, real], rtol=1e-5, atol=1e-5)


def test_the_largest_tensor_of_a_sliding_window_forward_grows_linearly(monkeypatch):
    """Twice the length: ``sdpa``'s largest tensor (the sliding-window mask) 4 times larger, ``lch_sdpa``'s 2 times
    (a block of its mask is at most 4096 pairs here; the MLP's activations, ``T x 128``, are the largest)."""
    monkeypatch.setattr(attention, "MASK_BLOCK_ELEMENTS", 4096)
    model, blocked = _pair("gemma3_text")
    largest = {}
    for name, which in (("sdpa", model), ("lch_sdpa", blocked)):
        for width in (256, 512):
            ids = torch.randint(3, 97, (1, width), generator=torch.Generator().manual_seed(width))
            with LargestTensor() as seen:
                hidden_states(which, ids, torch.ones_like(ids))
            largest[name, width] = seen.largest
    assert largest["sdpa", 512] == 512 * 512 == 4 * largest["sdpa", 256]
    assert largest["lch_sdpa", 512] == 512 * 128 == 2 * largest["lch_sdpa", 256]


def test_a_cpu_pass_that_cannot_fit_the_memory_there_is_is_refused_before_it_runs(monkeypatch):
    model = tiny_causal_lm("gemma3_text")
    use_blocked_masks(model)
    monkeypatch.setattr(device_sizing, "host_available_bytes", lambda: 1 << 20)
    ran = []
    model.model.register_forward_pre_hook(lambda module, args: ran.append(1))
    ids = torch.randint(3, 97, (1, 2048))
    # the predicted peak with the run-time check's margin (allocator rounding, kernel workspaces)
    need = int(device_sizing.predicted_peak(model, 2048, 1, None, "cpu") * device_sizing.FIT_MARGIN)
    with pytest.raises(UsageError) as refused:
        score_tokens(model, ids, torch.ones_like(ids))
    assert str(refused.value) == (
        f"scoring 1 x 2048 tokens needs ~{need / (1 << 20):.0f} MiB, cpu has 1 MiB "
        "available: score shorter documents (max_tokens), pass dtype=bfloat16, or use a "
        "device with more memory"
    )
    assert ran == []
    monkeypatch.setattr(device_sizing, "host_available_bytes", lambda: need - 1)
    with pytest.raises(UsageError):
        score_tokens(model, ids, torch.ones_like(ids))
    monkeypatch.setattr(device_sizing, "host_available_bytes", lambda: need)
    assert len(score_tokens(model, ids, torch.ones_like(ids))[0]) == 2047 and ran == [1]
