"""The files the CLI fuzzer (tests/cli/test_cli_fuzz.py) and its corpus replay hand to `lch`, described by name.

:data:`FILES` maps a name to a function that writes that input under a folder; :func:`make_inputs` writes them
all once and returns name -> path; :func:`expand` turns the placeholders of a corpus argv (``{file:NAME}``,
``{cwd}``) into real paths. The corpus (tests/cli/fuzz_corpus.json) names inputs only through these
placeholders, so a regression case is reproduced from the JSON alone.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

REPORT = "The committee reviewed the program and its budget in detail over several sessions. " * 30


def _text(name: str, text: str) -> Callable[[Path, Path], Path]:
    def write(root: Path, tiny: Path) -> Path:
        (root / name).write_text(text, encoding="utf-8")
        return root / name

    return write


def _bytes(name: str, data: bytes) -> Callable[[Path, Path], Path]:
    def write(root: Path, tiny: Path) -> Path:
        (root / name).write_bytes(data)
        return root / name

    return write


def _folder(name: str, files: dict[str, str]) -> Callable[[Path, Path], Path]:
    def write(root: Path, tiny: Path) -> Path:
        (root / name).mkdir()
        for file, text in files.items():
            (root / name / file).parent.mkdir(parents=True, exist_ok=True)
            (root / name / file).write_text(text, encoding="utf-8")
        return root / name

    return write


def _model_copy(
    name: str, delete: tuple[str, ...] = (), truncate: tuple[str, ...] = ()
) -> Callable[[Path, Path], Path]:
    """A copy of the tiny model folder with some files deleted or cut to half their size."""

    def write(root: Path, tiny: Path) -> Path:
        folder = root / name
        shutil.copytree(tiny, folder)
        for file in delete:
            (folder / file).unlink(missing_ok=True)
        for file in truncate:
            data = (folder / file).read_bytes()
            (folder / file).write_bytes(data[: len(data) // 2])
        return folder

    return write


_RESULTS = {
    "results": {"ppl_govreport": {"word_perplexity,none": 3.5}},
    "config": {"model": "hf-pic", "model_args": "pretrained=x"},
    "configs": {},
    "versions": {},
}
_SAMPLE = {"doc_id": 0, "doc": {}, "resps": [["x"]], "filtered_resps": ["x"]}

FILES: dict[str, Callable[[Path, Path], Path]] = {
    "empty.jsonl": _text("empty.jsonl", ""),
    "empty.json": _text("empty.json", ""),
    "binary.jsonl": _bytes("binary.jsonl", bytes(range(256)) * 8),
    "binary.json": _bytes("binary.json", b"\xff\xfe\x00\x01garbage\x80\x81"),
    "truncated.json": _text("truncated.json", json.dumps(_RESULTS)[:40]),
    "truncated.jsonl": _text(
        "truncated.jsonl", json.dumps({"report": REPORT}) + "\n" + json.dumps({"report": REPORT})[:30]
    ),
    "wrong-fields.json": _text("wrong-fields.json", json.dumps({"foo": [1, 2], "bar": None})),
    "wrong-fields.jsonl": _text("wrong-fields.jsonl", json.dumps({"foo": 1}) + "\n" + json.dumps([1, 2]) + "\n"),
    "list.json": _text("list.json", "[1, 2, 3]"),
    "null.json": _text("null.json", "null"),
    "huge-line.jsonl": _text("huge-line.jsonl", json.dumps({"report": "word " * 400_000}) + "\n"),
    "corpus.jsonl": _text(
        "corpus.jsonl", "".join(json.dumps({"report": REPORT, "text": REPORT}) + "\n" for _ in range(2))
    ),
    "rows.jsonl": _text(
        "rows.jsonl", "".join(json.dumps({"instruction": "Say hi.", "response": "Hi. " * 20}) + "\n" for _ in range(3))
    ),
    "text.txt": _text("text.txt", REPORT),
    "samples_longbench_write_1.jsonl": _text("samples_longbench_write_1.jsonl", json.dumps(_SAMPLE) + "\n"),
    "samples_hellobench_htg_1.jsonl": _text("samples_hellobench_htg_1.jsonl", '{"doc_id": 0, "quality": 3}\n'),
    "empty-dir": _folder("empty-dir", {}),
    "runs-broken": _folder("runs-broken", {"m/results_2024-01-01T00-00-00.json": '{"results": '}),
    "runs-wrong": _folder("runs-wrong", {"m/results_2024-01-01T00-00-00.json": json.dumps({"results": [1]})}),
    "runs-ok": _folder("runs-ok", {"m/results_2024-01-01T00-00-00.json": json.dumps(_RESULTS)}),
    "not-an-adapter": _folder("not-an-adapter", {"adapter_config.json": '{"peft_type": ', "lch_variant.json": "[]"}),
    "variant-wrong": _folder("variant-wrong", {"lch_variant.json": json.dumps({"inference": {"pic": 3}})}),
    "model-ok": _model_copy("model-ok"),
    "model-no-config": _model_copy("model-no-config", delete=("config.json",)),
    "model-bad-config": _model_copy("model-bad-config", truncate=("config.json",)),
    "model-no-weights": _model_copy("model-no-weights", delete=("model.safetensors",)),
    "model-bad-weights": _model_copy("model-bad-weights", truncate=("model.safetensors",)),
    "model-no-tokenizer": _model_copy("model-no-tokenizer", delete=("tokenizer.json", "tokenizer_config.json")),
    "model-cut-tokenizer": _model_copy("model-cut-tokenizer", truncate=("tokenizer.json",)),
    "blank.jsonl": _text("blank.jsonl", "".join(json.dumps({"report": t}) + "\n" for t in (" \n\t ", "    "))),
    "runs-empty": _folder(
        "runs-empty", {"m/results_2024-01-01T00-00-00.json": json.dumps({**_RESULTS, "results": {}})}
    ),
    "runs-nan": _folder(
        "runs-nan",
        {
            "m/results_2024-01-01T00-00-00.json": json.dumps(
                {
                    **_RESULTS,
                    "results": {"ppl_govreport": {"word_perplexity,none": float("nan"), "n_docs,none": 2}},
                    "higher_is_better": {"ppl_govreport": {"word_perplexity": False}},
                }
            )
        },
    ),
    "baseline-string-direction.json": _text(
        "baseline-string-direction.json",
        json.dumps({"metrics": {"ppl_govreport/word_perplexity": {"value": 3.5, "higher_is_better": "false"}}}),
    ),
    "essays-none": _folder("essays-none", {"notes.md": "no essays here"}),
}


def make_inputs(root: Path, tiny: Path) -> dict[str, Path]:
    """Write every input of :data:`FILES` under ``root`` (``tiny``: the tiny model folder to copy); name -> path.
    ``missing`` and ``missing-dir/x.jsonl`` are paths that do not exist."""
    root.mkdir(parents=True, exist_ok=True)
    paths = {name: make(root, tiny) for name, make in FILES.items()}
    paths["missing"] = root / "does-not-exist"
    paths["missing-dir/x.jsonl"] = root / "missing-dir" / "x.jsonl"
    return paths


def expand(arg: str, inputs: dict[str, Path], cwd: Path) -> str:
    """One corpus argv item with ``{file:NAME}`` and ``{cwd}`` replaced by real paths."""
    for name, path in inputs.items():
        arg = arg.replace("{file:" + name + "}", str(path))
    return arg.replace("{cwd}", str(cwd))
