"""What would differ between a recorded run and its rerun here (:data:`CHECKED`), found before anything runs; the
model is located by its content (:func:`harness.models.identity.model_identity`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.run_record import RunRecord

CHECKED = ("model", "libraries", "device", "dtype")  # the run record's fields a rerun holds against this machine


@dataclass(frozen=True)
class Difference:
    """One field of the run record that the rerun would change (:data:`CHECKED`)."""

    field: str
    recorded: str
    now: str

    def label(self) -> str:
        return f"{self.field} {self.recorded} -> {self.now}"


def model_folders(extra: Iterable[str | Path]) -> list[Path]:
    """Where a model may be: the folders given, then every folder with a ``config.json`` in the model cache."""
    from harness.core.cache import models_root

    found = [Path(p).expanduser() for p in extra if p]
    root = models_root()
    if root.is_dir():
        found += sorted(config.parent for config in root.rglob("config.json"))
    return found


def locate_model(recorded: str | None, folders: Iterable[Path]) -> Path | None:
    """The first of ``folders`` whose content is the model ``recorded`` (its identity), or None."""
    from harness.models.identity import model_identity

    if not recorded:
        return None
    return next((f for f in folders if f.is_dir() and model_identity(f) == recorded), None)


def _engine_libraries(model: str) -> str | None:
    from harness.engines.registry import model_entry
    from harness.engines.response_cache import libraries_in_words

    entry = model_entry(model)
    names = getattr(entry.cls, "LIBRARIES", None) if entry is not None else None
    return libraries_in_words(*names) if names else None


def _device_kind(device: str | None) -> str | None:
    return None if not device else device.split(":", 1)[0]


def differences(
    record: RunRecord, model: str, model_args: dict[str, Any], device: str | None, model_found: Path | None
) -> list[Difference]:
    """The :data:`CHECKED` fields of ``record`` this rerun (``model`` with ``model_args`` on ``device``; the model
    located at ``model_found``) would change; a field the run did not record is not compared."""
    from harness.engines.model_args import folder_dtype
    from harness.models.device_info import resolved_device

    out = []
    if record.model and model_found is None:
        where = model_args.get("pretrained")
        out.append(Difference("model", record.model, f"not found (not at {where}, nor in the model cache)"))
    libraries = _engine_libraries(model)
    if record.libraries and libraries and record.libraries != libraries:
        out.append(Difference("libraries", record.libraries, libraries))
    now_device = resolved_device(device)
    if record.device and _device_kind(record.device) != _device_kind(now_device):
        out.append(Difference("device", record.device, now_device))
    dtype = str(model_args.get("dtype") or "auto")
    if dtype == "auto" and model_found is not None:
        dtype = folder_dtype(model_found) or dtype
    if record.dtype and dtype != "auto" and dtype.removeprefix("torch.") != record.dtype:
        out.append(Difference("dtype", record.dtype, dtype))
    return out
