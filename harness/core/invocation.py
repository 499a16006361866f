"""How a run called lm-eval's ``simple_evaluate``, recorded under :data:`harness.core.results.INVOCATION`: what
``lch rerun`` calls again. What a run is *run with* is :mod:`harness.core.run_record`'s."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

# passed again when the run passed them; the others are how it was kept (caches, logging) or recorded on their own
RERUN_ARGUMENTS = (
    "num_fewshot",
    "batch_size",
    "max_batch_size",
    "device",
    "limit",
    "samples",
    "bootstrap_iters",
    "system_instruction",
    "apply_chat_template",
    "fewshot_as_multiturn",
    "gen_kwargs",
    "predict_only",
    "random_seed",
    "numpy_random_seed",
    "torch_random_seed",
    "fewshot_random_seed",
)


@dataclass(frozen=True)
class Invocation:
    """``simple_evaluate(model=model, model_args=model_args, tasks=tasks, **arguments)`` with a task manager over
    ``include_path`` that hands every task ``metadata`` (the run's own, the model args apart), called in the folder
    ``cwd`` (where the relative paths of its metadata and model args are)."""

    model: str
    model_args: dict[str, Any]
    tasks: list[str]
    metadata: dict[str, Any] = field(default_factory=dict)
    include_path: list[str] = field(default_factory=list)
    arguments: dict[str, Any] = field(default_factory=dict)
    cwd: str = ""

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: Any) -> Invocation | None:
        """The invocation a results file recorded; None when it recorded none or not in this shape."""
        if not isinstance(value, Mapping) or not isinstance(value.get("model"), str):
            return None
        try:
            made = cls(**{f.name: value[f.name] for f in fields(cls) if f.name in value})
        except TypeError:
            return None
        shapes = (
            (made.model_args, dict),
            (made.tasks, list),
            (made.metadata, dict),
            (made.include_path, list),
            (made.arguments, dict),
            (made.cwd, str),
        )
        return made if all(isinstance(v, t) for v, t in shapes) else None


def jsonable(value: Any) -> bool:
    """Whether ``value`` survives a JSON round trip as itself (what an invocation may hold)."""
    try:
        return bool(json.loads(json.dumps(value)) == value)
    except (TypeError, ValueError):
        return False
