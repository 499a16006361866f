"""Training rows for ``lch train`` from a local ``.jsonl`` / ``.json`` file or an HF dataset, in either shape:
LongWriter's ``{"messages": [...]}`` (the last message the answer, earlier ones the prompt) or flat
``{"instruction", "response"}`` fields (other names: ``prompt_field`` / ``response_field``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.core.errors import DataFormatError, MissingDataError, missing_data_on_error
from harness.data.documents import read_json, read_jsonl


def load_rows(source: str, split: str = "train") -> list[dict[str, Any]]:
    """The rows of a local JSON Lines / JSON file, or of split ``split`` of an HF dataset."""
    path = Path(source).expanduser()
    if path.suffix in (".jsonl", ".json") or path.exists():
        if not path.is_file():
            raise MissingDataError(
                f"{path} does not exist: give a .jsonl file of training rows (or an HF dataset name)"
            )
        rows = read_jsonl(path, "training data") if path.suffix == ".jsonl" else read_json(path)
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise DataFormatError(f"{path}: expected a list of JSON objects")
        return rows
    import datasets

    with missing_data_on_error(
        f"could not load HF dataset {source!r} split {split!r}",
        "download it to the HF cache or give a local .jsonl file",
    ):
        return [dict(r) for r in datasets.load_dataset(source, split=split)]


def conversation(
    row: dict[str, Any], where: str, prompt_field: str = "instruction", response_field: str = "response"
) -> tuple[list[dict[str, str]], str]:
    """``(prompt messages, answer text)`` of an instruction row (either shape, see the module docstring)."""
    if "messages" in row:
        messages = row["messages"]
        if (
            not isinstance(messages, list)
            or len(messages) < 2
            or not all(isinstance(m, dict) for m in messages)
            or messages[-1].get("role") != "assistant"
        ):
            raise DataFormatError(
                f"{where}: 'messages' must be a list of {{role, content}} ending with the assistant's answer"
            )
        return [{"role": m["role"], "content": m["content"]} for m in messages[:-1]], messages[-1]["content"]
    missing = [f for f in (prompt_field, response_field) if not isinstance(row.get(f), str)]
    if missing:
        raise DataFormatError(
            f"{where}: no 'messages' and no text field {missing[0]!r} "
            "(use --prompt-field / --response-field for other names)"
        )
    return [{"role": "user", "content": row[prompt_field]}], row[response_field]
