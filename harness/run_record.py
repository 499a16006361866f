"""What a run was run with: one typed record, written by our models into lm-eval's results and read back by
every report that puts runs side by side.

Our model classes (hf-pic, vllm-pic, the compressor) add :meth:`RunRecord.as_info` to lm-eval's results
``config`` under :data:`KEY` (``lch_run``): the engine, the dtype and the device the model actually ran in (not
the ``--device`` lm-eval records, which defaults to ``cuda:0`` on a CPU run too), the maximum length, the
inference as applied (in words), the model's content identity (a digest of its weights and tokenizer files, so two
paths to one model are one model and one path re-fetched with other weights is another), its architecture and
the libraries that
compute the numbers. :meth:`RunRecord.from_results` completes it with what lm-eval records itself: the batch
size, the seeds and the chat template. A field a run did not record (an older run, another model class) is None:
unknown, never a guess.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

KEY = "lch_run"

# what each field says, for reports and --allow's help
FIELDS: dict[str, str] = {
    "engine": "the engine that computed the numbers (hf-pic, vllm-pic, compressor)",
    "dtype": "the dtype the weights ran in (resolved: never auto)",
    "device": "the device the model ran on (cpu, cuda, cuda:0 ...)",
    "max_length": "the longest input the model was run with, in tokens",
    "inference": "the PIC / RoPE settings applied, in words",
    "model": "the model's content identity (weights and tokenizer files)",
    "architecture": "the model's architecture and sizes (a new checkpoint of one model keeps it)",
    "adapter": "the LoRA adapter's content identity (none: no adapter)",
    "libraries": "the versions of the libraries that computed the numbers",
    "batch_size": "lm-eval's batch size",
    "seed": "lm-eval's seeds (random, numpy, torch, few-shot)",
    "chat_template": "the chat template applied (its digest; none: none applied)",
}


@dataclass(frozen=True)
class RunRecord:
    """What one run was run with (module docstring); every field a string or None (unknown)."""

    engine: str | None = None
    dtype: str | None = None
    device: str | None = None
    max_length: str | None = None
    inference: str | None = None
    model: str | None = None
    architecture: str | None = None
    adapter: str | None = None
    libraries: str | None = None
    batch_size: str | None = None
    seed: str | None = None
    chat_template: str | None = None

    def as_info(self) -> dict[str, Any]:
        """``{KEY: {field: value}}`` for a model's ``get_model_info`` (lm-eval merges it into ``config``)."""
        return {KEY: {name: value for name, value in dataclasses.asdict(self).items() if value is not None}}

    @classmethod
    def from_results(cls, data: Mapping[str, Any]) -> "RunRecord":
        """The record of an lm-eval results file's content: ours under ``config[KEY]``, lm-eval's own fields for the
        batch size, the seeds and the chat template (absent ones: None)."""
        config = data.get("config") if isinstance(data.get("config"), Mapping) else {}
        ours = config.get(KEY) if isinstance(config.get(KEY), Mapping) else {}
        values = {name: _text(ours.get(name)) for name in FIELDS}
        if values["batch_size"] is None and config.get("batch_size") is not None:
            values["batch_size"] = _text(config.get("batch_size"))
        seeds = [config.get(k) for k in ("random_seed", "numpy_seed", "torch_seed", "fewshot_seed")]
        if values["seed"] is None and any(s is not None for s in seeds):
            values["seed"] = "/".join("none" if s is None else str(s) for s in seeds)
        if values["chat_template"] is None and ("chat_template" in data or "chat_template_sha" in data):
            values["chat_template"] = _text(data.get("chat_template_sha")) or ("none" if not data.get("chat_template")
                                                                              else "unnamed")
        return cls(**values)


def _text(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)
