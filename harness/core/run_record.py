"""What a run was run with (:class:`RunRecord`): written by our models into lm-eval's results ``config`` under
``lch_run``, completed from lm-eval's own fields and read back by every report. ``device`` is where the model actually
ran (lm-eval's ``--device`` says ``cuda:0`` on CPU too); ``model`` is a digest of weights and tokenizer files. A field a
run did not record is None: unknown, never a guess."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from harness.core import results as keys
from harness.core.context import setting
from harness.core.options import option, option_help

# the running run's --apply_chat_template (False: none; True or a name: one); None: not known (evaluate called directly)
_ASKED_CHAT_TEMPLATE: ContextVar[bool | str | None] = ContextVar("lch_asked_chat_template", default=None)


def asking_chat_template(value: Any) -> AbstractContextManager[bool | str]:
    """For the length of one run: the ``apply_chat_template`` it was asked for (None and "" mean none)."""
    return setting(_ASKED_CHAT_TEMPLATE, value if isinstance(value, str) and value else bool(value))


def run_applies_chat_template() -> bool | None:
    """Whether the running lm-eval run applies a chat template; None outside :func:`asking_chat_template`."""
    asked = _ASKED_CHAT_TEMPLATE.get()
    return None if asked is None else bool(asked)


def chat_template_field(template_of: Any) -> str | None:
    """The run record's ``chat_template``: ``"none"``, the SHA-256 of the template text (lm-eval's
    ``chat_template_sha``), or None when not known; ``template_of(asked)``: the text applied for setting ``asked``."""
    asked = _ASKED_CHAT_TEMPLATE.get()
    if asked is None:
        return None
    if asked is False:
        return "none"
    template = template_of(asked)
    return hashlib.sha256(template.encode("utf-8")).hexdigest() if template else "none"


@dataclass(frozen=True)
class RunRecord:
    """What one run was run with (module docstring); every field a string or None (unknown)."""

    engine: str | None = option(None, "the engine that computed the numbers (hf-pic, vllm-pic, compressor)")
    dtype: str | None = option(None, "the dtype the weights ran in (resolved: never auto)")
    device: str | None = option(None, "the device the model ran on (cpu, cuda, cuda:0 ...)")
    max_length: str | None = option(None, "the longest input the model was run with, in tokens")
    inference: str | None = option(None, "the PIC / RoPE settings applied, in words")
    model: str | None = option(None, "the model's content identity (weights and tokenizer files)")
    architecture: str | None = option(
        None, "the model's architecture and sizes (a new checkpoint of one model keeps it)"
    )
    adapter: str | None = option(None, "the LoRA adapter's content identity (none: no adapter)")
    libraries: str | None = option(None, "the versions of the libraries that computed the numbers")
    batch_size: str | None = option(None, "lm-eval's batch size")
    seed: str | None = option(None, "lm-eval's seeds (random, numpy, torch, few-shot)")
    chat_template: str | None = option(None, "the chat template applied (its digest; none: none applied)")

    def as_info(self) -> dict[str, Any]:
        """``{RUN: {field: value}}`` for a model's ``get_model_info`` (lm-eval merges it into ``config``)."""
        return {keys.RUN: {name: value for name, value in dataclasses.asdict(self).items() if value is not None}}

    @classmethod
    def from_results(cls, data: Mapping[str, Any]) -> RunRecord:
        """The record of an lm-eval results file's content: ours under ``config[RUN]``, lm-eval's own fields for the
        batch size, the seeds and the chat template (absent ones: None)."""
        raw_config = data.get("config")
        config: Mapping[str, Any] = raw_config if isinstance(raw_config, Mapping) else {}
        raw_ours = config.get(keys.RUN)
        ours: Mapping[str, Any] = raw_ours if isinstance(raw_ours, Mapping) else {}
        values = {name: _text(ours.get(name)) for name in FIELDS}
        if values["batch_size"] is None and config.get("batch_size") is not None:
            values["batch_size"] = _text(config.get("batch_size"))
        seeds = [config.get(k) for k in ("random_seed", "numpy_seed", "torch_seed", "fewshot_seed")]
        if values["seed"] is None and any(s is not None for s in seeds):
            values["seed"] = "/".join("none" if s is None else str(s) for s in seeds)
        if values["chat_template"] is None and ("chat_template" in data or "chat_template_sha" in data):
            values["chat_template"] = _text(data.get("chat_template_sha")) or (
                "none" if not data.get("chat_template") else "unnamed"
            )
        return cls(**values)


# what each field says, for reports and --allow's help
FIELDS: dict[str, str] = option_help(RunRecord)


def _text(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)
