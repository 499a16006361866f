"""A model folder checked before transformers / peft read it, so that a folder with a file missing or
corrupt is one line naming the folder and the file, not the library's traceback; a folder fetched by ``lch
models`` is also checked to mean here what its source says (:func:`harness.models.model_check.check_before_use`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.core.errors import DataFormatError, MissingDataError, UsageError

WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json",
           "adapter_model.safetensors", "adapter_model.bin")


# files from which transformers builds a tokenizer (one is enough: tokenizer.json for fast tokenizers, the
# SentencePiece / BPE vocabularies the converters read, tiktoken's ranks)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "spiece.model", "sentencepiece.bpe.model", "vocab.json",
                   "vocab.txt", "tokenizer.tiktoken")


def check_tokenizer_folder(folder: str | Path, arg: str = "pretrained") -> None:
    """A local folder a tokenizer is loaded from (the model folder, or ``tokenizer=``) holds the files of one
    (:data:`TOKENIZER_FILES`), and its ``tokenizer.json`` is whole (a file cut short does not end its JSON object):
    otherwise transformers fails minutes later, or falls back to converting a slow tokenizer that is not there."""
    path = Path(folder).expanduser()
    if not path.is_dir():
        return  # a hub name, or refused already
    if not any((path / name).is_file() for name in TOKENIZER_FILES) and not list(path.glob("*.tiktoken")):
        raise MissingDataError(f"{arg}={folder} has no tokenizer files ({' / '.join(TOKENIZER_FILES[:3])} ...): give "
                               "a complete model folder, or tokenizer= a folder holding its tokenizer")
    tokenizer_json = path / "tokenizer.json"
    if tokenizer_json.is_file():
        with tokenizer_json.open("rb") as handle:
            handle.seek(max(0, tokenizer_json.stat().st_size - 64))
            tail = handle.read().rstrip()
        if not tail.endswith(b"}"):
            raise DataFormatError(f"{tokenizer_json} is cut short (it does not end its JSON object): the folder {arg}="
                                  f"{folder} is damaged; fetch or save the model again")


def check_model_folder(folder: str | Path, arg: str = "pretrained", tokenizer: bool = False) -> None:
    """``folder`` (given as ``arg``), when it is a local folder: it has a readable ``config.json`` (or
    ``adapter_config.json``) and a weights file whose header reads; a file where a folder is wanted is refused
    too. A folder fetched by ``lch models`` must also behave as its source says in this environment (its
    tokenizer's BOS / EOS and special ids). With ``tokenizer``, the folder's tokenizer files are checked too
    (:func:`check_tokenizer_folder`). A hub name (nothing on disk) is left to the loader."""
    path = Path(folder).expanduser()
    try:
        if not path.exists():
            return
    except OSError:  # a name the file system refuses (too long)
        raise UsageError(f"{arg}={str(folder)[:80]}...: not a usable path (name too long)") from None
    if not path.is_dir():
        raise UsageError(f"{arg}={folder} is a file, not a model folder")
    configs = [path / "config.json", path / "adapter_config.json"]
    present = [c for c in configs if c.is_file()]
    if not present:
        raise MissingDataError(f"{arg}={folder} has no config.json: give {arg}= a model folder")
    for config in present:
        try:
            json.loads(config.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise DataFormatError(f"{config}: not valid JSON ({err}); the model folder {arg}={folder} is corrupt") from None
    weights = [path / w for w in WEIGHTS if (path / w).is_file()]
    if not weights:
        raise MissingDataError(f"{arg}={folder} has no weights ({' / '.join(WEIGHTS[:3])}): give a complete model folder")
    for file in sorted(set(path.glob("*.safetensors"))):  # sharded checkpoints' parts too
        from safetensors import safe_open

        try:
            with safe_open(str(file), framework="pt") as handle:
                handle.keys()
        except Exception as err:  # noqa: BLE001 (safetensors raises its own error type for a corrupt header)
            raise DataFormatError(f"{file} is not a readable safetensors file ({err}): the model folder {arg}={folder} "
                                  "is damaged; fetch or save the model again") from None
    if tokenizer:  # its tokenizer is loaded from it too
        check_tokenizer_folder(path, arg)
    from harness.models.model_check import check_before_use

    check_before_use(path)


def describe_architecture(folder: Any) -> str | None:
    """A model folder's architecture in words, from its ``config.json`` (the text config of a multimodal one):
    ``LlamaForCausalLM (30 layers, hidden 576, vocab 49152)``; what a regression baseline must share with the run
    it gates (a new checkpoint of the same model keeps it). None for a model that is not a local folder."""
    if not isinstance(folder, (str, Path)):
        return None
    try:
        config = json.loads((Path(folder).expanduser() / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    name = (config.get("architectures") or [config.get("model_type") or "?"])[0]
    sizes = [f"{text[key]} {word}" if word == "layers" else f"{word} {text[key]}" for key, word in
             (("num_hidden_layers", "layers"), ("hidden_size", "hidden"), ("vocab_size", "vocab")) if key in text]
    return f"{name} ({', '.join(sizes)})" if sizes else str(name)
