"""Model folders checked before transformers / peft read them: a missing or corrupt file is one line naming the folder
and the file; a fetched folder must mean here what its source says (:mod:`harness.models.model_check`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.core.errors import DataFormatError, MissingDataError, UsageError

WEIGHTS = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
    "adapter_model.safetensors",
    "adapter_model.bin",
)


# files transformers builds a tokenizer from (one is enough: fast JSON, SentencePiece / BPE vocabularies, tiktoken)
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer.model",
    "spiece.model",
    "sentencepiece.bpe.model",
    "vocab.json",
    "vocab.txt",
    "tokenizer.tiktoken",
)


def check_tokenizer_folder(folder: str | Path, arg: str = "pretrained") -> None:
    """Refuse a local folder without tokenizer files (:data:`TOKENIZER_FILES`) or whose ``tokenizer.json`` is cut short
    (it does not end its JSON object); a path that is not a folder passes."""
    path = Path(folder).expanduser()
    if not path.is_dir():
        return  # a hub name, or refused already
    if not any((path / name).is_file() for name in TOKENIZER_FILES) and not list(path.glob("*.tiktoken")):
        raise MissingDataError(
            f"{arg}={folder} has no tokenizer files ({' / '.join(TOKENIZER_FILES[:3])} ...): give "
            "a complete model folder, or tokenizer= a folder holding its tokenizer"
        )
    tokenizer_json = path / "tokenizer.json"
    if tokenizer_json.is_file():
        with tokenizer_json.open("rb") as handle:
            handle.seek(max(0, tokenizer_json.stat().st_size - 64))
            tail = handle.read().rstrip()
        if not tail.endswith(b"}"):
            raise DataFormatError(
                f"{tokenizer_json} is cut short (it does not end its JSON object): the folder {arg}="
                f"{folder} is damaged; fetch or save the model again"
            )


def check_model_folder(folder: str | Path, arg: str = "pretrained", tokenizer: bool = False) -> None:
    """Refuse a local ``folder`` (option ``arg``) that is a file, lacks a readable ``config.json`` /
    ``adapter_config.json`` or weights whose header reads, or fails
    :func:`~harness.models.model_check.check_before_use`; with ``tokenizer``, also :func:`check_tokenizer_folder`. Hub
    names pass."""
    path = Path(folder).expanduser()
    try:
        if not path.exists():
            return
    except OSError:  # a name the file system refuses (too long)
        raise UsageError(f"{arg}={str(folder)[:80]}...: not a usable path (name too long)") from None
    if not path.is_dir():
        raise UsageError(f"{arg}={folder} is a file, not a model folder")
    present = [c for c in (path / "config.json", path / "adapter_config.json") if c.is_file()]
    if not present:
        raise MissingDataError(f"{arg}={folder} has no config.json: give {arg}= a model folder")
    for config in present:
        try:
            json.loads(config.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise DataFormatError(
                f"{config}: not valid JSON ({err}); the model folder {arg}={folder} is corrupt"
            ) from None
    if not any((path / w).is_file() for w in WEIGHTS):
        raise MissingDataError(
            f"{arg}={folder} has no weights ({' / '.join(WEIGHTS[:3])}): give a complete model folder"
        )
    for file in sorted(set(path.glob("*.safetensors"))):  # sharded checkpoints' parts too
        from safetensors import safe_open

        try:
            with safe_open(str(file), framework="pt") as handle:
                handle.keys()
        except Exception as err:  # noqa: BLE001 (safetensors raises its own error type for a corrupt header)
            raise DataFormatError(
                f"{file} is not a readable safetensors file ({err}): the model folder {arg}={folder} "
                "is damaged; fetch or save the model again"
            ) from None
    if tokenizer:
        check_tokenizer_folder(path, arg)
    from harness.models.model_check import check_before_use

    check_before_use(path)


def describe_architecture(folder: Any) -> str | None:
    """A local model folder's architecture from its ``config.json`` (a multimodal one's text config), e.g.
    ``LlamaForCausalLM (30 layers, hidden 576, vocab 49152)``; None for anything not a readable local folder."""
    if not isinstance(folder, (str, Path)):
        return None
    try:
        config = json.loads((Path(folder).expanduser() / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    text = given_text_config if isinstance(given_text_config := config.get("text_config"), dict) else config
    name = (config.get("architectures") or [config.get("model_type") or "?"])[0]
    sizes = [
        f"{text[key]} {word}" if word == "layers" else f"{word} {text[key]}"
        for key, word in (("num_hidden_layers", "layers"), ("hidden_size", "hidden"), ("vocab_size", "vocab"))
        if key in text
    ]
    return f"{name} ({', '.join(sizes)})" if sizes else str(name)
