"""One name per run, the same in every report: leaderboards, plots, correlation reports, agreement reports, the
generation table and the demo's summary all call :func:`run_name`, so a run is never "gemma3-270m" in a figure and
"base model" in the table beside it.

A run's name has three parts (:class:`RunName`):

* ``model``: what was evaluated, by its folder's name: the compressor checkpoint, else the LoRA adapter, else the
  model (``SmolLM2-135M-Instruct``); lm-eval's model class name when no path was given.
* ``variant``: how it was evaluated, in words: what our models record (``config.lch_evaluated_as``: ``base model``,
  ``Dynamic PIC (s_cr 2, l_ic 4, l_rc 200)``, ``Dynamic PIC-SFT (...), evaluated with standard inference``); for a run
  that recorded none, the same words made from the inference its model args ask for (``base model`` for a model
  without adapter run as is).
* ``extras``: the other model args that tell configurations apart (``epl_layout=upl``); paths, the dtype and the
  device are not in a name (the run record compares those: :mod:`harness.reporting.comparability`).

The whole name is its parts joined by :data:`SEPARATOR`. When runs are shown together, :func:`distinct_labels` moves
the parts they all share into a title (``SmolLM2-135M-Instruct``) and names each run by the rest (``base model``,
``Naive PIC (s_cr 2)``); two runs whose names are equal get their results folder's name added.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence

from harness.pic.variants import evaluated_as
from harness.pic.inference import MODEL_ARGS, Inference
from harness.core import results as keys

SEPARATOR = " · "
# model args that are not in a name: where the model is (the model part has its name), how it is run (the run
# record has the dtype and device), lm-eval's engine plumbing
NOT_IN_NAME = frozenset({"pretrained", "checkpoint", "peft", "model", "tokenizer", "dtype", "device", "trust_remote_code",
                         "max_length", "batch_size", "parallelize", "gpu_memory_utilization", "revision"})


def checkpoint_of(model_args: dict) -> str:
    """What was evaluated: the compressor checkpoint, LoRA adapter, or model (first one set)."""
    for name in ("checkpoint", "peft", "pretrained", "model"):
        if model_args.get(name):
            return str(model_args[name])
    return ""


def inference_of(model_args: dict, applied: dict | None = None) -> Inference:
    """The inference a run applied: ``applied`` (``config.lch_inference``) when recorded, else its model args."""
    try:
        return Inference.from_model_args(applied if applied is not None else model_args)
    except ValueError:  # a run of another model whose args merely share our names
        return Inference()


def model_args_of(results: dict) -> dict:
    """``config.model_args`` of an lm-eval results object as a dict (older lm-eval writes the CLI string
    ``"k=v,k=v"``)."""
    model_args: Any = (results.get("config") or {}).get("model_args") or {}
    if isinstance(model_args, str):
        model_args = dict(kv.split("=", 1) for kv in model_args.split(",") if "=" in kv)
    return dict(model_args)


class NamedRun(Protocol):
    """What a name is made of: a :class:`harness.reporting.runs.Run` (which imports this module for its name)."""

    model: str
    model_args: dict
    variant: str
    applied: dict | None
    path: Path


@dataclass(frozen=True)
class RunName:
    """A run's name in parts (module docstring)."""

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
    """The name of a run of lm-eval model ``model`` with ``model_args``; ``variant`` is what our models recorded
    (``config.lch_evaluated_as``) and ``applied`` the inference they applied (``config.lch_inference``), when
    recorded."""
    if not variant:
        inference = inference_of(dict(model_args), dict(applied) if applied is not None else None)
        adapted = bool(model_args.get("peft") or model_args.get("checkpoint"))
        variant = inference.words() if adapted else evaluated_as(None, inference)
    pic_keys = set(MODEL_ARGS.values())
    extras = tuple(f"{k}={v}" for k, v in sorted(model_args.items()) if k not in NOT_IN_NAME and k not in pic_keys)
    return RunName(Path(checkpoint_of(dict(model_args))).name or model, variant, extras)


def name_from_results(data: Mapping) -> RunName:
    """The name of the run an lm-eval results object describes."""
    config = data.get("config") if isinstance(data.get("config"), Mapping) else {}
    applied = config.get(keys.INFERENCE) if isinstance(config.get(keys.INFERENCE), Mapping) else None
    return name_of(str(config.get("model") or data.get("model_name") or "model"), model_args_of(dict(data)),
                   str(config.get(keys.EVALUATED_AS) or ""), applied)


def run_name(run: NamedRun) -> RunName:
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
    out, seen = [], {}
    for i, label in enumerate(labels):
        if counts[label] == 1:
            out.append(label)
            continue
        seen[label] = seen.get(label, 0) + 1
        tag = Path(folders[i]).parent.name if folders is not None else ""
        out.append(f"{label} ({tag or seen[label]})")
    return unique_labels(out) if len(set(out)) < len(out) else out


def run_labels(runs: Sequence[NamedRun]) -> list[str]:
    """Each run's whole name, equal ones told apart by their results folders (:func:`unique_labels`)."""
    return unique_labels([run_name(r).text for r in runs], [r.path for r in runs])


def distinct_labels(names: Sequence[RunName], folders: Sequence[str | Path] | None = None) -> tuple[str, list[str]]:
    """``(title, labels)`` of named runs shown together: :func:`split_shared` of their :func:`unique_labels`."""
    return split_shared(unique_labels([n.text for n in names], folders))
