"""Where a cell may run (no Ray, no I/O): what it asks a node for, from its planned peak memory, and the nodes that
have it. On GPU nodes a cell asks for a share of one GPU sized by its plan (a vllm-pic engine: the share it takes,
``gpu_memory_utilization``, on each of its tensor x data parallel GPUs); on CPU nodes for Ray's ``memory`` resource
(bytes), which stands for the device's memory there. A cell that fits no node is refused before any cell runs."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.core.sizes import in_words

LAYER = "pure"  # harness/devtools/layers.py

GPU_SHARE_STEP = 0.01  # Ray counts fractional GPUs in hundredths here (a finer share buys nothing)


@dataclass(frozen=True)
class Node:
    """A node of the cluster as Ray reports its total resources."""

    name: str
    cpus: float
    memory: float  # bytes of Ray's ``memory`` resource
    gpus: float = 0.0
    gpu_memory: int | None = None  # bytes of one GPU, where known

    @classmethod
    def from_ray(cls, node: Mapping[str, Any], gpu_memory: int | None = None) -> Node:
        """A node of ``ray.nodes()``."""
        resources = node.get("Resources") or {}
        name = f"{node.get('NodeManagerAddress', '?')}/{str(node.get('NodeID', ''))[:8]}"
        return cls(
            name,
            float(resources.get("CPU", 0)),
            float(resources.get("memory", 0)),
            float(resources.get("GPU", 0)),
            gpu_memory,
        )


@dataclass(frozen=True)
class Need:
    """What one cell asks its node for (Ray's resource names: ``num_cpus``, ``memory`` bytes, ``num_gpus``)."""

    cpus: float
    memory: int = 0
    gpus: float = 0.0

    def ray_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"num_cpus": self.cpus}
        if self.gpus:
            options["num_gpus"] = self.gpus
        if self.memory:
            options["memory"] = self.memory
        return options

    def words(self) -> str:
        parts = [f"{self.cpus:g} CPU"]
        if self.gpus:
            parts.append(f"{self.gpus:g} GPU")
        if self.memory:
            parts.append(f"{in_words(self.memory)} of memory")
        return ", ".join(parts)


def gpu_share(planned: int, gpu_memory: int) -> float:
    """The share of one GPU a cell of ``planned`` peak bytes asks for, rounded up to :data:`GPU_SHARE_STEP`."""
    steps = math.ceil(planned / gpu_memory / GPU_SHARE_STEP - 1e-9)
    return max(GPU_SHARE_STEP, steps * GPU_SHARE_STEP)


def need_of(
    planned: int | None, engine: str, model_args: Mapping[str, Any], nodes: Sequence[Node], cpus: int | None = None
) -> Need:
    """What a cell whose largest request needs ``planned`` bytes asks for on this cluster (module docstring); a
    cell whose memory was not planned asks for a whole GPU, or for no memory on CPU nodes."""
    with_gpus = any(n.gpus for n in nodes)
    if not with_gpus:
        default = min((n.cpus for n in nodes if n.cpus), default=1.0)
        return Need(float(cpus or default), int(planned or 0))
    devices = int(model_args.get("tensor_parallel_size", 1)) * int(model_args.get("data_parallel_size", 1))
    if engine == "vllm-pic":
        share = float(model_args.get("gpu_memory_utilization", 0.9))  # what each engine takes of its device
        return Need(float(cpus or 1), 0, float(devices) if devices > 1 else max(share, 0.01))
    gpu_memory = min((n.gpu_memory for n in nodes if n.gpus and n.gpu_memory), default=None)
    if planned is None or gpu_memory is None:
        return Need(float(cpus or 1), 0, 1.0)
    return Need(float(cpus or 1), 0, min(1.0, gpu_share(planned, gpu_memory)) if planned <= gpu_memory else math.inf)


def fits(need: Need, node: Node) -> bool:
    """Whether ``node`` has, in total, what ``need`` asks for."""
    return need.cpus <= node.cpus and need.memory <= node.memory and need.gpus <= node.gpus


def refusal(label: str, need: Need, planned: int | None, nodes: Sequence[Node]) -> str | None:
    """Why the cell ``label`` fits no node of the cluster, in one line; None when one node can run it."""
    if any(fits(need, node) for node in nodes):
        return None
    if not nodes:
        return f"cell {label!r}: the cluster has no node alive: start one (ray start) or run without --address"
    if math.isinf(need.gpus):
        largest = max((n.gpu_memory or 0) for n in nodes)
        return (
            f"cell {label!r} needs {in_words(planned or 0)} on one GPU; the largest GPU has {in_words(largest)}: "
            "pass dtype=bfloat16, a shorter length, or run it on vllm-pic with tensor_parallel_size"
        )
    if need.memory and max(n.memory for n in nodes) < need.memory:
        best = max(nodes, key=lambda n: n.memory)
        return (
            f"cell {label!r} needs {in_words(need.memory)} of memory (its plan's peak); the largest node "
            f"({best.name}) has {in_words(int(best.memory))}: add a larger node, or shorten the cell"
        )
    if need.gpus and max(n.gpus for n in nodes) < need.gpus:
        best = max(nodes, key=lambda n: n.gpus)
        return (
            f"cell {label!r} needs {need.gpus:g} GPUs on one node; the largest node ({best.name}) has "
            f"{best.gpus:g}: lower tensor_parallel_size x data_parallel_size"
        )
    best = max(nodes, key=lambda n: n.cpus)
    return (
        f"cell {label!r} needs {need.words()} on one node; no node has all of it (the most CPUs: {best.name}, "
        f"{best.cpus:g}): lower resources.cpus"
    )


def where_words(need: Need, nodes: Sequence[Node]) -> str:
    """The nodes a cell may land on, in words (Ray picks among them as the cluster frees up)."""
    able = [n.name for n in nodes if fits(need, n)]
    if len(able) == len(nodes):
        return "any node" if len(nodes) > 1 else "this machine" if nodes and nodes[0].name == "local" else nodes[0].name
    return ", ".join(able)
