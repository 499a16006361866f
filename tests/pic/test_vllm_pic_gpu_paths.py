"""vllm-pic on the paths a GPU takes and the CPU lane does not, reproduced on the CPU (issue 56).

* **Building a model.** vLLM's loader builds a model under ``with torch.device(<its device>)`` and its dtype as the
  default dtype (``model_loader/base_loader.py``: ``set_default_torch_dtype(model_config.dtype)`` then ``with
  target_device``). On a GPU a factory call without a device lands on CUDA, and a random draw with a CPU generator
  fails there ("Expected a 'cuda' device type for generator"); a CPU device context accepts it, so the vLLM lane here
  builds every ``Pic<Arch>`` with :class:`DrawsOn` standing in for CUDA's check (a draw with no device lands on the
  context's device, which it says is ``cuda``) and bf16 as the default dtype, as vLLM's loader would for a bf16 model
  on a GPU.
* **The KV cache Dynamic PIC moves keys in.** vLLM 0.26 and 0.32's GPU backends (FlashAttention, FlashInfer, Triton;
  ``get_kv_cache_shape`` / ``get_kv_cache_stride_order`` in their sources) all declare the logical shape
  ``(num_blocks, num_kv_heads, block_size, 2 * head_size)``, stored in the NHD order ``(0, 2, 1, 3)`` by default or
  HND ``(0, 1, 2, 3)``; the keys moved through each land where a writer of that layout put the key at its new id.
  Any other shape (a 5-D ``(2, blocks, block_size, heads, head_size)`` of older FlashAttention backends) is refused,
  never planned as "no key moves". Nothing moves only where nothing is cached: a step without metadata (a memory
  profile) or a cache not allocated yet.
* **Engine start on the V2 model runner** (the GPU default since vLLM 0.25): its profile runs carry attention
  metadata before the KV cache exists, and its warm-up runs are real steps over dummy metadata (every sequence as
  long as its query, zeroed block tables, padding requests of length 0). The engine checks wait for the allocated
  cache, and a warm-up step leaves the cache as it was.
"""

from __future__ import annotations

import json
import subprocess
from types import SimpleNamespace

import pytest
import torch

from harness.core.errors import UsageError
from harness.pic.inference import Inference
from harness.pic.positions import dynamic_positions
from harness.pic.vllm import model as pic_model
from harness.pic.vllm.positions import rotate, rotation
from tests.pic.device_draws import DrawsOn

RATIO, INITIAL, RECENT = 3.0, 2, 6
HEADS, HEAD_SIZE, BLOCK = 2, 8, 16


def dynamic(layout: str = "contiguous") -> Inference:
    return Inference(method="dynamic", ratio=RATIO, initial=INITIAL, recent=RECENT, layout=layout)


# ---------------------------------------------------------------------------------------------- a model's build


def test_draws_on_refuses_what_cuda_refuses():
    """The stand-in refuses a CPU generator's draw that lands on the context's CUDA, and lets a draw made on the
    CPU explicitly pass (the fix's form); the tensor is still made on the CPU."""
    generator = torch.Generator().manual_seed(0)
    with DrawsOn("cuda"):
        with pytest.raises(RuntimeError, match="Expected a 'cuda' device type for generator"):
            torch.randn(3, generator=generator)
        drawn = torch.randn(3, generator=generator, device="cpu")
    assert drawn.device.type == "cpu" and torch.equal(drawn, torch.randn(3, generator=torch.Generator().manual_seed(0)))


BUILD = """
import json, os, sys
os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
if __name__ == "__main__":
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.distributed import init_distributed_environment, initialize_model_parallel
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.model_loader.utils import initialize_model
    from vllm.utils.torch_utils import set_default_torch_dtype
    from harness.core.errors import LchError
    from harness.pic.inference import Inference
    from harness.pic.vllm.config import architecture, engine_settings, pic_overrides
    from harness.pic.vllm.model import register
    from tests.pic.device_draws import DrawsOn

    out, started = [], False
    for job in json.loads(sys.stdin.read()):
        config = json.load(open(os.path.join(job["model"], "config.json")))
        inference = Inference.from_model_args(job["args"])
        args = {"model": job["model"], "dtype": "bfloat16", "load_format": "dummy", "max_model_len": 1024,
                "hf_overrides": pic_overrides(config, inference), "num_gpu_blocks_override": 16}
        if inference.entry.moves_cached_keys:
            args = engine_settings(args, config, environ={})
        try:
            register(architecture(config))
            vllm_config = EngineArgs(**args).create_engine_config()
            if not started:  # one process group for every build (vLLM's loader runs inside its worker's)
                with set_current_vllm_config(vllm_config):
                    init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo",
                                                 distributed_init_method="tcp://127.0.0.1:" + sys.argv[1])
                    initialize_model_parallel(1, 1)
                started = True
            # as vLLM's loader builds a model on its device: its dtype the default, inside the device's context
            with set_default_torch_dtype(vllm_config.model_config.dtype), torch.device("cpu"), DrawsOn("cuda"):
                model = initialize_model(vllm_config=vllm_config)
            out.append({"layers": list(model.pic_layers), "dtype": str(next(model.parameters()).dtype)})
        except LchError as err:
            out.append({"refused": str(err)})
        except Exception as err:
            out.append({"failed": f"{type(err).__name__}: {err}"})
    print("RESULT " + json.dumps(out))
"""


def test_every_pic_class_builds_as_vllms_loader_builds_it_on_a_gpu(vllm_env):
    """Every family vLLM runs natively (naive PIC; Dynamic PIC on Llama and Gemma 3), built by vLLM's
    ``initialize_model`` inside a device context whose random draws are checked as CUDA checks them (:class:`DrawsOn`)
    and under bf16 as the default dtype: each builds, bf16, with PIC on its full-attention RoPE layers (the check of
    the rotary module passes in bf16 and draws its probe where its generator is)."""
    import socket

    from harness.models.tiny import build_tiny_model
    from tests.pic.test_vllm_pic_families import GROUPS, SETTINGS, TRANSFORMERS_BACKEND

    # the mixture-of-experts families first: vLLM creates its expert-parallel group only when the process group is
    # initialised under a config with experts, and this process initialises it once, for every build
    families = sorted(
        (arch for arch in sum(GROUPS, []) if arch not in TRANSFORMERS_BACKEND),
        key=lambda arch: arch not in ("mixtral", "qwen3_moe"),
    )
    # untrained weights: what is checked is that each builds (dtype, the layers PIC replaced), not what it predicts
    folders = {arch: build_tiny_model(arch, hidden=256, heads=4, kv_heads=2) for arch in families}
    # every family under naive PIC (the rotary check and the module swap are the same for every method), Dynamic PIC
    # (whose engine checks and step state are built too) on a plain and a hybrid family
    jobs = [{"name": f"{arch} naive", "model": str(folders[arch]), "args": SETTINGS["naive"]} for arch in families]
    jobs += [
        {"name": f"{arch} dynamic", "model": str(folders[arch]), "args": SETTINGS["dynamic-paper"]}
        for arch in ("llama", "gemma3_text")
    ]
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    done = subprocess.run(
        [str(vllm_env.python), "-c", BUILD, str(port)],
        input=json.dumps(jobs),
        capture_output=True,
        text=True,
        env=vllm_env.environ(),
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(next(l for l in done.stdout.splitlines() if l.startswith("RESULT "))[len("RESULT ") :])
    failures = [f"{job['name']}: {got}" for job, got in zip(jobs, results) if "layers" not in got]
    assert not failures, "\n".join(failures)
    assert all(got["dtype"] == "torch.bfloat16" and got["layers"] for got in results)


# ---------------------------------------------------------------------------------------------- the KV cache


def writer(key: torch.Tensor, value: torch.Tensor, cache: torch.Tensor, slots: torch.Tensor) -> None:
    """A GPU backend's cache writer (vLLM's ``reshape_and_cache_flash`` by its contract): token ``i`` into block
    ``slots[i] // block_size``, offset ``slots[i] % block_size`` of the logical ``[blocks, kv_heads, block_size,
    2 * head_size]`` cache, the key in the first ``head_size`` values, whatever the storage order."""
    block_size = cache.shape[2]
    blocks, offsets = slots // block_size, slots % block_size
    for h in range(key.shape[1]):
        cache[blocks, h, offsets, : key.shape[2]] = key[:, h]
        cache[blocks, h, offsets, key.shape[2] :] = value[:, h]


def gpu_cache(blocks: int, stride_order: tuple[int, ...]) -> torch.Tensor:
    """A cache of the GPU backends' logical shape, allocated in ``stride_order`` (vLLM allocates the permuted shape
    and hands each layer the view permuted back)."""
    logical = (blocks, HEADS, BLOCK, 2 * HEAD_SIZE)
    physical = torch.zeros(tuple(logical[i] for i in stride_order))
    inverse = [stride_order.index(i) for i in range(len(stride_order))]
    view = physical.permute(*inverse)
    assert view.shape == logical
    return view


def fake_attention(cache: torch.Tensor, name: str = "model.layers.0.self_attn.attn") -> SimpleNamespace:
    impl = SimpleNamespace(
        do_kv_cache_update=lambda layer, key, value, kv_cache, slots: writer(key, value, kv_cache, slots)
    )
    return SimpleNamespace(layer_name=name, kv_cache=cache, impl=impl, head_size=HEAD_SIZE)


def fake_rotary() -> SimpleNamespace:
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, HEAD_SIZE, 2).float() / HEAD_SIZE))
    return SimpleNamespace(base=10000.0, rotary_dim=HEAD_SIZE, inv_freq=inv_freq, neox=True)


def step_with(
    monkeypatch, metadata: dict | None, positions: torch.Tensor, inference: Inference | None = None
) -> pic_model.DynamicStep:
    monkeypatch.setattr(pic_model, "_step_metadata", lambda: metadata)
    pic_model._LAYOUTS.clear()
    step = pic_model.DynamicStep(inference or dynamic())
    step.begin(positions)
    return step


# The layouts vLLM 0.26 and 0.32 declare for their GPU backends (FLASH_ATTN, FLASHINFER, TRITON_ATTN: the same
# logical shape, NHD or HND storage by VLLM_KV_CACHE_LAYOUT)
GPU_LAYOUTS = {"NHD": (0, 2, 1, 3), "HND": (0, 1, 2, 3)}


@pytest.mark.parametrize("layout", ["paper", "contiguous"])
@pytest.mark.parametrize("storage", sorted(GPU_LAYOUTS))
def test_moved_keys_land_where_each_gpu_layouts_writer_put_them(monkeypatch, storage, layout):
    """A decode step of a request with 50 cached tokens in scattered blocks of a cache stored in ``storage``: after
    Dynamic PIC's step, every cached key equals the raw key rotated at its id for the grown length (within fp32
    rounding), whether it moved or not, read back through the writer's own places."""
    generator = torch.Generator().manual_seed(1)
    inference, rotary, ctx = dynamic(layout), fake_rotary(), 50
    cache = gpu_cache(9, GPU_LAYOUTS[storage])
    table = torch.tensor([[5, 2, 8, 1]])
    raw = torch.randn(ctx, HEADS, HEAD_SIZE, generator=generator)
    m = torch.arange(ctx)
    args = (RATIO, INITIAL, RECENT, layout)
    slots = table[0, m // BLOCK] * BLOCK + m % BLOCK
    writer(
        rotate(raw, *rotation(dynamic_positions(m, ctx, *args), rotary.inv_freq), HEAD_SIZE, True),
        torch.zeros_like(raw),
        cache,
        slots,
    )
    metadata = SimpleNamespace(
        query_start_loc=torch.tensor([0, 1]), seq_lens=torch.tensor([ctx + 1]), block_table=table
    )
    attn = fake_attention(cache)
    step = step_with(monkeypatch, {attn.layer_name: metadata}, torch.tensor([ctx]), inference)
    step.rotate_cache_and_ids(attn, rotary, torch.float32)
    assert step.plan(attn).moves()  # keys did move
    got = cache[slots // BLOCK, :, slots % BLOCK, :HEAD_SIZE]
    target = rotate(raw, *rotation(dynamic_positions(m, ctx + 1, *args), rotary.inv_freq), HEAD_SIZE, True)
    assert (got - target).abs().max().item() < 2e-6


@pytest.mark.parametrize(
    "cache",
    [torch.zeros(2, 9, BLOCK, HEADS, HEAD_SIZE), [torch.zeros(9, HEADS, BLOCK, 16)]],
    ids=["5-D (2, blocks, block_size, heads, head_size)", "a list of caches"],
)
def test_a_cache_of_another_layout_is_refused_not_left_unmoved(monkeypatch, cache):
    metadata = SimpleNamespace(
        query_start_loc=torch.tensor([0, 1]), seq_lens=torch.tensor([40]), block_table=torch.tensor([[1, 2, 3]])
    )
    attn = fake_attention(cache)
    step = step_with(monkeypatch, {attn.layer_name: metadata}, torch.tensor([39]))
    with pytest.raises(RuntimeError, match="KV cache is .*not \\[blocks, kv_heads, block_size, values\\]"):
        step.plan(attn)


def test_nothing_moves_only_where_nothing_is_cached(monkeypatch):
    """A memory-profile step (no metadata) and a V2 profile step (metadata, the cache not allocated: vLLM's
    placeholder ``torch.tensor([])``) plan no moves; a step whose metadata leaves the layer out is refused."""
    positions = torch.tensor([39])
    attn = fake_attention(torch.tensor([]))
    assert step_with(monkeypatch, None, positions).plan(attn).moves() == set()
    metadata = SimpleNamespace(
        query_start_loc=torch.tensor([0, 1]), seq_lens=torch.tensor([40]), block_table=torch.tensor([[1, 2, 3]])
    )
    assert step_with(monkeypatch, {attn.layer_name: metadata}, positions).plan(attn).moves() == set()
    other = step_with(monkeypatch, {"model.layers.1.self_attn.attn": metadata}, positions)
    with pytest.raises(RuntimeError, match="has none for model.layers.0.self_attn.attn"):
        other.plan(fake_attention(gpu_cache(4, GPU_LAYOUTS["NHD"])))


def test_a_warm_up_step_over_dummy_metadata_leaves_the_cache_as_it_was(monkeypatch):
    """The V2 runner's warm-up / capture metadata (``InputBatch.make_dummy``): 3 requests of 5, 5 and 6 tokens, each
    sequence as long as its query (nothing cached), zeroed block tables, then padding requests of length 0 and
    padding tokens. Dynamic PIC's step runs (plan, cache probe, moves) and every value of the cache is unchanged."""
    generator = torch.Generator().manual_seed(2)
    cache = gpu_cache(6, GPU_LAYOUTS["NHD"])
    cache.copy_(torch.randn(cache.shape, generator=generator))
    before = cache.clone()
    query = [5, 5, 6]
    starts = torch.tensor([0, 5, 10, 16, 16, 16])  # two padding requests
    lengths = torch.tensor(query + [0, 0])
    positions = torch.cat([torch.arange(q) for q in query] + [torch.zeros(2, dtype=torch.long)])
    metadata = SimpleNamespace(
        query_start_loc=starts, seq_lens=lengths, block_table=torch.zeros(5, 4, dtype=torch.long)
    )
    attn = fake_attention(cache)
    for layout in ("paper", "contiguous"):
        step = step_with(monkeypatch, {attn.layer_name: metadata}, positions, dynamic(layout))
        step.rotate_cache_and_ids(attn, fake_rotary(), torch.float32)
        assert step.plan(attn).moves() == set()
    assert torch.equal(cache, before)


def test_the_engine_is_checked_once_its_kv_cache_exists(monkeypatch):
    """The started engine's checks wait for the allocated cache: a profile step with metadata while the cache's size
    is unknown checks nothing and marks nothing; the first step after allocation refuses a cache that holds fewer
    sequences than ``max_num_seqs`` (preemption would break Algorithm 1)."""
    cache_config = SimpleNamespace(num_gpu_blocks=None, block_size=16)
    config = SimpleNamespace(
        cache_config=cache_config,
        model_config=SimpleNamespace(max_model_len=1024, enforce_eager=True),
        scheduler_config=SimpleNamespace(max_num_seqs=4),
        compilation_config=SimpleNamespace(cudagraph_mode=None),
    )
    model = SimpleNamespace(pic_vllm_config=config, pic_checked_cache=False)
    monkeypatch.setattr(pic_model, "_step_metadata", lambda: {"model.layers.0.self_attn.attn": object()})
    pic_model.check_started_engine(model)  # profile: the cache's size is not known yet
    assert model.pic_checked_cache is False
    cache_config.num_gpu_blocks = 128  # 2 sequences of 1024 tokens
    with pytest.raises(UsageError, match="holds 2 sequences of max_model_len=1024, not max_num_seqs=4"):
        pic_model.check_started_engine(model)
    cache_config.num_gpu_blocks = 256
    pic_model.check_started_engine(model)
    assert model.pic_checked_cache is True


def test_the_v1_runners_cuda_graph_probe_cache_is_not_checked(monkeypatch):
    """Under CUDA graphs vLLM's V1 runner captures on a probe cache of one block per captured sequence before it sizes
    the real one (seen on an H200 with vLLM 0.26: 8 blocks for max_num_seqs=8 were refused as too small); that probe
    is passed over, the real cache after it is checked, and an eager engine's cache of the same size is refused."""
    cache_config = SimpleNamespace(num_gpu_blocks=8, block_size=16)
    compilation = SimpleNamespace(
        cudagraph_mode=SimpleNamespace(has_piecewise_cudagraphs=lambda: False), max_cudagraph_capture_size=512
    )
    model_config = SimpleNamespace(max_model_len=2048, enforce_eager=False)
    config = SimpleNamespace(
        cache_config=cache_config,
        model_config=model_config,
        scheduler_config=SimpleNamespace(max_num_seqs=8),
        compilation_config=compilation,
    )
    model = SimpleNamespace(pic_vllm_config=config, pic_checked_cache=False)
    monkeypatch.setattr(pic_model, "_step_metadata", lambda: {"model.layers.0.self_attn.attn": object()})
    pic_model.check_started_engine(model)
    assert model.pic_checked_cache is False
    cache_config.num_gpu_blocks = 9 * 128  # the real cache: 9 sequences of 2048 tokens
    pic_model.check_started_engine(model)
    assert model.pic_checked_cache is True
    model_config.enforce_eager, cache_config.num_gpu_blocks, model.pic_checked_cache = True, 8, False
    with pytest.raises(UsageError, match="holds 0 sequences of max_model_len=2048, not max_num_seqs=8"):
        pic_model.check_started_engine(model)
