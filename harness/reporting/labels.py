"""One name per run, the same in every report (:func:`run_name`): ``model`` (the checkpoint's, adapter's or model's
folder), ``variant`` (how it was evaluated, in words) and ``extras`` (other model args that tell configurations
apart); shown together, the parts all runs share move into a title (:func:`distinct_labels`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core import results as keys
from harness.pic.inference import MODEL_ARGS, Inference
from harness.pic.variants import evaluated_as

if TYPE_CHECKING:
    from harness.reporting.runs import Run  # which imports this module for its name

SEPARATOR = " · "
# model args not in a name: paths (the model part names it), dtype and device (the run record), engine plumbing
NOT_IN_NAME = frozenset(
    {
        "pretrained",
        "checkpoint",
        "peft",
        "model",
        "tokenizer",
        "dtype",
        "device",
        "trust_remote_code",
        "max_length",
        "batch_size",
        "parallelize",
        "gpu_memory_utilization",
        "revision",
    }
)


def checkpoint_of(model_args: dict) -> str:
    """What was evaluated: the compressor checkpoint, LoRA adapter, or model (first one set)."""
    return next(
        (str(model_args[name]) for name in ("checkpoint", "peft", "pretrained", "model") if model_args.get(name)), ""
    )


def inference_of(model_args: dict, applied: dict | None = None) -> Inference:
    """The inference a run applied: ``applied`` (``config.lch_inference``) when recorded, else its model args."""
    try:
        return Inference.from_model_args(applied if applied is not None else model_args)
    except ValueError:  # a run of another model whose args merely share our names
        return Inference()


def model_args_of(results: dict) -> dict:
    """``config.model_args`` of lm-eval results as a dict (older lm-eval writes ``"k=v,k=v"``)."""
    model_args: Any = (results.get("config") or {}).get("model_args") or {}
    if isinstance(model_args, str):
        model_args = dict(kv.split("=", 1) for kv in model_args.split(",") if "=" in kv)
    return dict(model_args)


@dataclass(frozen=True)
class RunName:
    """A run's name in parts (module docstring), joined by :data:`SEPARATOR`."""

    model: str
    variant: str
    extras: tuple[str, ...] = ()

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(p for p in (self.model, self.variant, *self.extras) if p)

    @property
    def text(self) -> str:
        return SEPARATOR.join(self.parts)


def name_of(model: str, model_args: Mapping, variant: str = "", applied: Mapping | None = None) -> RunName:
    """The name of a run of lm-eval model ``model``; ``variant`` (``config.lch_evaluated_as``) and ``applied``
    (``config.lch_inference``) as the run recorded them, when it did."""
    if not variant:
        inference = inference_of(dict(model_args), dict(applied) if applied is not None else None)
        adapted = bool(model_args.get("peft") or model_args.get("checkpoint"))
        variant = inference.label() if adapted else evaluated_as(None, inference)
    pic_keys = set(MODEL_ARGS.values())
    extras = tuple(f"{k}={v}" for k, v in sorted(model_args.items()) if k not in NOT_IN_NAME and k not in pic_keys)
    return RunName(Path(checkpoint_of(dict(model_args))).name or model, variant, extras)


def name_from_results(data: Mapping) -> RunName:
    """The name of the run an lm-eval results object describes."""
    config = given_config if isinstance(given_config := data.get("config"), Mapping) else {}
    applied = given_keys_inference if isinstance(given_keys_inference := config.get(keys.INFERENCE), Mapping) else None
    return name_of(
        str(config.get("model") or data.get("model_name") or "model"),
        model_args_of(dict(data)),
        str(config.get(keys.EVALUATED_AS) or ""),
        applied,
    )


def run_name(run: Run) -> RunName:
    """The name of a :class:`~harness.reporting.runs.Run`."""
    return name_of(run.model, run.model_args, run.variant, run.applied)


def split_shared(texts: Sequence[str]) -> tuple[str, list[str]]:
    """``(title, rest)``: the name parts every text has (joined by :data:`SEPARATOR`, in the first text's order), and
    each text without them (a text left empty keeps its whole)."""
    parts = [text.split(SEPARATOR) for text in texts]
    shared = [p for p in parts[0] if all(p in q for q in parts[1:])] if len(parts) > 1 else []
    rest = [SEPARATOR.join(p for p in ps if p not in shared) or text for ps, text in zip(parts, texts)]
    return SEPARATOR.join(shared), rest


def unique_labels(labels: Sequence[str], folders: Sequence[str | Path] | None = None) -> list[str]:
    """``labels`` with equal ones told apart by their results file's folder name (``folders``), else by a count."""
    labels = list(labels)
    counts = {label: labels.count(label) for label in labels}
    out: list[str] = []
    seen: dict[str, int] = {}
    for i, label in enumerate(labels):
        if counts[label] == 1:
            out.append(label)
            continue
        seen[label] = seen.get(label, 0) + 1
        tag = Path(folders[i]).parent.name if folders is not None else ""
        out.append(f"{label} ({tag or seen[label]})")
    return unique_labels(out) if len(set(out)) < len(out) else out


def run_labels(runs: Sequence[Run]) -> list[str]:
    """Each run's whole name, equal ones told apart by their results folders (:func:`unique_labels`)."""
    return unique_labels([run_name(r).text for r in runs], [r.path for r in runs])


def distinct_labels(names: Sequence[RunName], folders: Sequence[str | Path] | None = None) -> tuple[str, list[str]]:
    """``(title, labels)`` of named runs shown together: :func:`split_shared` of their :func:`unique_labels`."""
    return split_shared(unique_labels([n.text for n in names], folders))
