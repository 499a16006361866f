"""What a sweep's cell asks a node for, and where it fits, against hand-computed cases."""

from __future__ import annotations

import math

from harness.sweep.placement import GPU_SHARE_STEP, Need, Node, fits, gpu_share, need_of, refusal, where_words

GIB = 1 << 30


def test_cpu_nodes_ask_for_the_planned_bytes_and_the_smallest_nodes_cpus():
    nodes = [Node("a", 4, 8 * GIB), Node("b", 2, 16 * GIB)]
    need = need_of(3 * GIB, "hf-pic", {}, nodes)
    assert need == Need(cpus=2.0, memory=3 * GIB, gpus=0.0)
    assert need.ray_options() == {"num_cpus": 2.0, "memory": 3 * GIB}
    assert need_of(3 * GIB, "hf-pic", {}, nodes, cpus=3) == Need(3.0, 3 * GIB)


def test_a_gpu_share_is_the_planned_peak_over_one_gpu_rounded_up_to_hundredths():
    assert gpu_share(20 * GIB, 80 * GIB) == 0.25
    assert gpu_share(20 * GIB + 1, 80 * GIB) == 0.26  # a byte more than a quarter: the next hundredth
    assert gpu_share(1, 80 * GIB) == GPU_SHARE_STEP
    nodes = [Node("g", 16, 500 * GIB, gpus=8, gpu_memory=80 * GIB)]
    assert need_of(40 * GIB, "hf-pic", {}, nodes) == Need(1.0, 0, 0.5)
    assert need_of(40 * GIB, "hf-pic", {}, nodes).ray_options() == {"num_cpus": 1.0, "num_gpus": 0.5}
    assert need_of(None, "hf-pic", {}, nodes) == Need(1.0, 0, 1.0)  # unplanned: a whole GPU
    assert math.isinf(need_of(90 * GIB, "hf-pic", {}, nodes).gpus)  # more than one GPU holds: never fits


def test_a_vllm_cell_asks_for_the_share_its_engine_takes_or_its_parallel_gpus():
    nodes = [Node("g", 16, 500 * GIB, gpus=8, gpu_memory=80 * GIB)]
    assert need_of(5 * GIB, "vllm-pic", {}, nodes).gpus == 0.9  # vLLM's gpu_memory_utilization default
    assert need_of(5 * GIB, "vllm-pic", {"gpu_memory_utilization": 0.3}, nodes).gpus == 0.3
    assert need_of(5 * GIB, "vllm-pic", {"tensor_parallel_size": 4, "data_parallel_size": 2}, nodes).gpus == 8.0


def test_fit_and_refusal_name_the_cell_its_need_and_the_largest_node():
    nodes = [Node("small", 1, 0.5 * GIB), Node("large", 1, 3 * GIB)]
    need = Need(1.0, 2 * GIB)
    assert [fits(need, n) for n in nodes] == [False, True]
    assert refusal("m vanilla", need, 2 * GIB, nodes) is None
    assert where_words(need, nodes) == "large"
    too_big = Need(1.0, 4 * GIB)
    assert refusal("m vanilla", too_big, 4 * GIB, nodes) == (
        "cell 'm vanilla' needs 4.0 GiB of memory (its plan's peak); the largest node (large) has 3.0 GiB: add a "
        "larger node, or shorten the cell"
    )
    assert "needs 2 CPU on one node" in refusal("m", Need(2.0, 0), None, nodes)
    gpu = [Node("g", 8, 100 * GIB, gpus=8, gpu_memory=80 * GIB)]
    assert refusal("m", need_of(90 * GIB, "hf-pic", {}, gpu), 90 * GIB, gpu).startswith(
        "cell 'm' needs 90.0 GiB on one GPU; the largest GPU has 80.0 GiB"
    )
    assert "needs 16 GPUs on one node" in refusal("m", Need(1.0, 0, 16.0), None, gpu)
