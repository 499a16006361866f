"""A device context's check of random draws, where the CPU cannot make it (no pytest here: the vLLM environment
imports this module too)."""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode


class DrawsOn(TorchFunctionMode):
    """Stands in for a device context's generator check where the CPU cannot: a random draw whose generator is on
    another device type than the one the draw lands on (its ``device`` argument, else ``device``, the context's) is
    refused as PyTorch refuses it on CUDA. The tensors themselves are made where they would be without this mode."""

    DRAWS = {
        torch.randn,
        torch.rand,
        torch.randint,
        torch.randperm,
        torch.normal,
        torch.bernoulli,
        torch.multinomial,
        torch.Tensor.normal_,
        torch.Tensor.uniform_,
        torch.Tensor.random_,
    }

    def __init__(self, device: str) -> None:
        super().__init__()
        self.device = torch.device(device)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        generator = kwargs.get("generator")
        if func in self.DRAWS and generator is not None:
            if func in (torch.Tensor.normal_, torch.Tensor.uniform_, torch.Tensor.random_):
                lands = args[0].device
            else:
                lands = torch.device(kwargs["device"]) if kwargs.get("device") is not None else self.device
            if lands.type != generator.device.type:
                raise RuntimeError(
                    f"Expected a '{lands.type}' device type for generator but found '{generator.device.type}'"
                )
        return func(*args, **kwargs)
