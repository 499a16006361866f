"""What a run reads besides the model, found before any model loads: options declare their inputs (``inputs()``:
:class:`Input`) and :func:`missing_inputs` names all that cannot be read in one error. Kinds: ``path`` (exists),
``hf_dataset`` / ``hf_model`` (in the local caches, or the hub reachable), ``download`` (cached, or fetched)."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

HUB_HOST = "huggingface.co"
PROBE_SECONDS = 3.0
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
KINDS = ("path", "hf_dataset", "hf_model", "download")


@dataclass(frozen=True)
class Input:
    """One input of a task: ``option`` = ``value``, found as ``kind`` (module docstring); ``instead``: what to
    pass without it (ends the error's entry); ``cached``: a download's cache file."""

    option: str
    value: str
    kind: str
    instead: str
    cached: Path | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Input kind {self.kind!r} is not one of {KINDS}")


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


@lru_cache(maxsize=1)
def _hub_unreachable() -> bool:
    """Whether a TCP connection to the hub (name lookup included, in a thread) fails within :data:`PROBE_SECONDS`."""
    reached: list[bool] = []

    def probe() -> None:
        try:
            socket.create_connection((HUB_HOST, 443), timeout=PROBE_SECONDS).close()
            reached.append(True)
        except OSError:
            pass

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(PROBE_SECONDS + 0.5)
    return not reached


def hub_offline() -> bool:
    """Whether the hub is not to be tried: an offline variable is set, or the hub cannot be reached."""
    return any(_truthy(os.environ.get(v)) for v in OFFLINE_VARIABLES) or _hub_unreachable()


def go_offline() -> bool:
    """Set the offline variables (and loaded libraries' constants) when the hub is offline, so that requests fail at
    once instead of retrying; returns whether the run is offline."""
    if not hub_offline():
        return False
    for variable in OFFLINE_VARIABLES:
        os.environ.setdefault(variable, "1")
    import sys

    # the libraries' constants as they read them (modules typed as plain ModuleType here: attr-defined ignored)
    hub = sys.modules.get("huggingface_hub.constants")
    if hub is not None:
        hub.HF_HUB_OFFLINE = True  # type: ignore[attr-defined]
    config = sys.modules.get("datasets.config")
    if config is not None:
        config.HF_HUB_OFFLINE = True  # type: ignore[attr-defined]
        config.HF_DATASETS_OFFLINE = True  # type: ignore[attr-defined]
    return True


# read from the environment at each call: the libraries' constants are fixed at import, HF_HOME may be set later
def _hf_cache(variable: str, folder: str) -> Path:
    """``$<variable>``, else ``$HF_HOME/<folder>`` (default ``~/.cache/huggingface/<folder>``)."""
    home = Path(os.environ.get("HF_HOME", "~/.cache/huggingface"))
    return Path(os.environ.get(variable) or home / folder).expanduser()


def hub_cached(name: str, kind: str) -> bool:
    """Whether the local caches hold anything of hub ``name`` (a dataset: the hub's or the prepared cache)."""
    prefix = "datasets" if kind == "hf_dataset" else "models"
    if (_hf_cache("HF_HUB_CACHE", "hub") / f"{prefix}--{name.replace('/', '--')}").is_dir():
        return True
    return kind == "hf_dataset" and (_hf_cache("HF_DATASETS_CACHE", "datasets") / name.replace("/", "___")).is_dir()


def problem(item: Input, offline: bool) -> str | None:
    """Why ``item`` cannot be read, or None when it can (or may be fetched)."""
    if item.kind == "path":
        return None if Path(item.value).expanduser().exists() else "does not exist"
    if item.kind == "download":
        if item.cached is not None and item.cached.is_file():
            return None
        return "is not downloaded and the internet is not reachable" if offline else None
    looks_local = item.value.startswith(("/", ".", "~")) or item.value.count("/") > 1
    if looks_local:
        return None if Path(item.value).expanduser().exists() else "does not exist"
    if Path(item.value).expanduser().is_dir() or hub_cached(item.value, item.kind):
        return None
    return "is not in the local Hugging Face cache and the hub is offline" if offline else None


def missing_inputs(by_task: Mapping[str, Iterable[Input]], offline: bool | None = None) -> list[str]:
    """One entry per input that cannot be read, ``"<tasks>: <option>=<value> <problem>; <instead>"`` (an input
    several tasks share is listed once, naming them), in the order first met."""
    offline = hub_offline() if offline is None else offline
    found: dict[Input, list[str]] = {}
    for task, items in by_task.items():
        for item in items:
            found.setdefault(item, []).append(task)
    out = []
    for item, tasks in found.items():
        why = problem(item, offline)
        if why is not None:
            named = ", ".join(tasks[:3]) + (f" and {len(tasks) - 3} more" if len(tasks) > 3 else "")
            out.append(f"{named}: {item.option}={item.value} {why}; {item.instead}")
    return out
