"""A sweep declared once: models (a glob of a training run's checkpoints included) x model-args variants, every cell
one ``lch eval`` run of one model and variant over all the sweep's tasks and lengths (its weights load once). The
declaration is a YAML file or the same keys as ``lch sweep`` flags; :func:`expand` turns it into :class:`Cell`s."""

from __future__ import annotations

import glob
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from harness.core.errors import DataFormatError, UsageError

LAYER = "data"  # harness/devtools/layers.py: reads the sweep file and globs folders; runs nothing

ENGINES = ("hf-pic", "vllm-pic")
STEP = re.compile(r"(?:checkpoint|step|ckpt)[-_]?(\d+)$")  # a training run's checkpoint folder: its step


class Resources(BaseModel):
    """What each cell asks its node for beyond its planned memory (which the plan gives)."""

    model_config = ConfigDict(extra="forbid")
    cpus: int | None = Field(None, ge=1, description="CPUs per cell (default: 1 with GPUs, else the smallest node's)")
    gpu_memory: str | None = Field(None, description="one GPU's memory (80GiB, h100) where Ray does not say it")
    retries: int = Field(3, ge=0, le=20, description="times a cell whose worker died is run again")


class SweepSpec(BaseModel):
    """The sweep file's keys (``lch sweep --help`` names the flag of each)."""

    model_config = ConfigDict(extra="forbid")
    engine: Literal["hf-pic", "vllm-pic"] = "hf-pic"
    models: list[str] = Field(min_length=1, description="model folders, hub names, catalogue names or globs")
    model_args: dict[str, Any] = Field(default_factory=dict, description="model args every cell shares")
    variants: dict[str, dict[str, Any]] = Field(
        default_factory=lambda: {"base": dict[str, Any]()},
        description="name -> model args of one variant (PIC method, dtype)",
    )
    tasks: list[str] = Field(min_length=1)
    lengths: list[int | str] | None = Field(None, description="RULER / BABILong lengths (the tasks' lengths option)")
    metadata: dict[str, Any] = Field(default_factory=dict, description="--metadata of every cell")
    lm_eval: dict[str, Any] = Field(
        default_factory=dict, description="lm-eval flags of every cell: batch_size, apply_chat_template ..."
    )
    resources: Resources = Field(default_factory=Resources)

    @field_validator("variants")
    @classmethod
    def _some_variant(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        if not value:
            raise ValueError("needs at least one variant (an empty one, {}, runs the model args as given)")
        return value


def one_line(err: ValidationError, where: str) -> str:
    """A pydantic error as our one line: ``<where>: <key path>: <what is wrong>``."""
    first = err.errors()[0]
    path = ".".join(str(p) for p in first["loc"]) or "the sweep"
    return f"{where}: {path}: {first['msg']}"


def parse_spec(data: Any, where: str) -> SweepSpec:
    """The typed sweep of a mapping (a YAML file's or flags'); :class:`UsageError` naming the key otherwise."""
    if not isinstance(data, dict):
        raise DataFormatError(f"{where} holds no mapping of sweep keys (engine, models, variants, tasks ...)")
    try:
        return SweepSpec.model_validate(data)
    except ValidationError as err:
        raise UsageError(one_line(err, where) + "; see `lch sweep --help`") from err


def load_spec(path: str | Path) -> SweepSpec:
    """The sweep declared in a YAML (or JSON) file."""
    import yaml

    file = Path(path).expanduser()
    if not file.is_file():
        raise UsageError(f"{path} is not a file: give a sweep file (YAML), or the sweep as flags")
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise DataFormatError(f"{path} is not YAML: {' '.join(str(err).split())[:200]}") from err
    return parse_spec(data, str(path))


@dataclass(frozen=True)
class Cell:
    """One lm-eval run of the sweep: ``engine`` with ``model_args`` (the model and a variant) over every task."""

    label: str
    model: str
    variant: str
    engine: str
    model_args: dict[str, Any]
    tasks: tuple[str, ...]
    metadata: dict[str, Any]
    lm_eval: dict[str, Any] = field(default_factory=dict)
    step: int | None = None  # a checkpoint's training step

    def argv(self) -> list[str]:
        """``lch eval``'s arguments of this cell (without ``--output_path``)."""
        args = [
            "--model",
            self.engine,
            "--model_args",
            ",".join(f"{k}={v}" for k, v in self.model_args.items()),
            "--tasks",
            ",".join(self.tasks),
        ]
        if self.metadata:
            args += ["--metadata", json.dumps(self.metadata, sort_keys=True)]
        for flag, value in self.lm_eval.items():
            if value is True:
                args.append(f"--{flag}")
            elif value not in (False, None):
                args += [f"--{flag}", value if isinstance(value, str) else json.dumps(value)]
        return args


def checkpoint_step(folder: Path) -> int | None:
    """A checkpoint folder's training step: from its name (``checkpoint-500``), else its ``trainer_state.json``."""
    found = STEP.search(folder.name)
    if found:
        return int(found[1])
    state = folder / "trainer_state.json"
    try:
        step = json.loads(state.read_text(encoding="utf-8")).get("global_step") if state.is_file() else None
    except (OSError, ValueError):
        return None
    return step if isinstance(step, int) else None


def _models(entry: str, where: str) -> list[tuple[str, int | None]]:
    """``(model, step)`` of one ``models`` entry: a glob's folders by training step, a folder, or a name as given."""
    if glob.has_magic(entry):
        folders = [Path(p) for p in glob.glob(str(Path(entry).expanduser())) if Path(p).is_dir()]
        if not folders:
            raise UsageError(f"{where}: models entry {entry!r} matches no folder: give an existing glob or folder")
        steps = {f: checkpoint_step(f) for f in folders}
        ordered = sorted(folders, key=lambda f: (steps[f] is None, steps[f] or 0, f.name))
        return [(str(f), steps[f]) for f in ordered]
    path = Path(entry).expanduser()
    if path.is_dir():
        return [(str(path), checkpoint_step(path))]
    return [(entry, None)]


def _model_args(model: str) -> dict[str, Any]:
    """The model args that load ``model``: a LoRA adapter folder rides on its base model (``peft=``)."""
    adapter = Path(model) / "adapter_config.json"
    if adapter.is_file():
        try:
            base = json.loads(adapter.read_text(encoding="utf-8")).get("base_model_name_or_path")
        except (OSError, ValueError):
            base = None
        if isinstance(base, str) and base:
            return {"pretrained": base, "peft": model}
    return {"pretrained": model}


def short_name(model: str) -> str:
    """A model's name in a cell label: a folder's last part (its parent's too for a checkpoint), else the name."""
    path = Path(model)
    if STEP.search(path.name) and path.parent.name:
        return f"{path.parent.name}/{path.name}"
    return path.name or model


def expand(spec: SweepSpec, where: str = "the sweep", resolve: Any = None) -> list[Cell]:
    """The cells of ``spec``: each model (``resolve(name) -> folder`` for a catalogue name) x each variant."""
    metadata = dict(spec.metadata)
    if spec.lengths is not None:
        metadata["lengths"] = list(spec.lengths)
    cells = []
    for entry in spec.models:
        for model, step in _models(entry, where):
            loaded = resolve(model) if resolve is not None else model
            for variant, args in spec.variants.items():
                model_args = {**_model_args(str(loaded)), **spec.model_args, **args}
                label = f"{short_name(model)} {variant}" if len(spec.variants) > 1 else short_name(model)
                cells.append(
                    Cell(
                        label,
                        str(loaded),
                        variant,
                        spec.engine,
                        model_args,
                        tuple(spec.tasks),
                        metadata,
                        dict(spec.lm_eval),
                        step,
                    )
                )
    labels = [c.label for c in cells]
    twice = sorted({label for label in labels if labels.count(label) > 1})
    if twice:
        raise UsageError(f"{where}: two cells are both {twice[0]!r} (the same model listed twice?): list each once")
    return cells
