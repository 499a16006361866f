"""The one place that registers the harness with lm-eval: our model classes and our task folder.

lm-eval 0.4.13 has no plugin loading, so ``register()`` adds lazy placeholders to its model registry
(next to, never instead of, the built-in ``hf``, ``vllm`` ...). Newer lm-eval versions find the same
classes through the ``lm_eval.models`` entry points declared in pyproject.toml.
"""

from __future__ import annotations

MODELS = {
    "hf-pic": "harness.lmeval.hf_pic:HFPicLM",
    "vllm-pic": "harness.lmeval.vllm_pic:VLLMPicLM",
    "compressor": "harness.lmeval.compressor_lm:CompressorLM",
}


def tasks_path() -> str:
    """Folder of our lm-eval task YAMLs (an lm-eval ``--include_path``)."""
    from harness.tasks import TASKS_PATH

    return str(TASKS_PATH)


def register() -> None:
    """Register our models with lm-eval's registry; idempotent."""
    import lm_eval.models  # noqa: F401  (fills the registry with the built-in models first)
    from lm_eval.api.registry import model_registry

    for name, target in MODELS.items():
        if name not in model_registry:
            model_registry.register(name, target=target)
