"""Long-form generation benchmarks: LongBench-Write and HelloBench heuristic text generation (HTG).

Official files are read from ``longbench_write_data`` / ``hellobench_data`` (or ``data_files``; local, e.g.
``../shared/data/...``) or downloaded once from
their published location and cached.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.data.documents import MissingDataError, local_or_download, read_jsonl
from harness.errors import UsageError

LONGBENCH_WRITE_URL = "https://raw.githubusercontent.com/THUDM/LongWriter/main/evaluation/longbench_write.jsonl"
HELLOBENCH_URLS = {
    "": "https://raw.githubusercontent.com/Quehry/HelloBench/main/HelloBench/heuristic_text_generation.jsonl",
    **{v: "https://raw.githubusercontent.com/Quehry/HelloBench/main/HelloBench/length_constrained_experiments_data/"
          f"heuristic_text_generation_{v}.jsonl" for v in ("2k", "4k", "8k", "16k")},
}


def load_longbench_write(**metadata: Any) -> dict:
    """``custom_dataset``: rows with required ``length`` > ``min_required_length`` (default 2000, as in
    paper 000, which reports 47 rows where a strict ``> 2000`` keeps 45)."""
    import datasets

    path = metadata.get("longbench_write_data") or metadata.get("data_files")
    rows = read_jsonl(local_or_download(path, LONGBENCH_WRITE_URL, "LongBench-Write data (longbench_write_data)"))
    threshold = float(metadata.get("min_required_length", 2000))
    kept = [{"doc_id": i, **r} for i, r in enumerate(rows) if float(r["length"]) > threshold]
    if not kept:
        raise UsageError(f"no row of the LongBench-Write data asks for more than {threshold:g} words "
                         "(min_required_length): lower min_required_length in --metadata, or give the full data")
    if metadata.get("limit_docs") is not None:
        kept = kept[: int(metadata["limit_docs"])]
    return {"test": datasets.Dataset.from_list(kept)}


def load_hellobench_htg(**metadata: Any) -> dict:
    """``custom_dataset``: the 123 HTG prompts (``variant`` "" or 2k / 4k / 8k / 16k)."""
    import datasets

    variant = str(metadata.get("variant") or "")
    if variant not in HELLOBENCH_URLS:
        raise UsageError(f"hellobench variant {variant!r} is unknown; allowed: '', 2k, 4k, 8k, 16k")
    path = metadata.get("hellobench_data") or metadata.get("data_files")
    rows = read_jsonl(local_or_download(path, HELLOBENCH_URLS[variant], "HelloBench HTG data (hellobench_data)"))
    keep = ("id", "category", "instruction", "checklists")
    rows = [{k: r[k] for k in keep} for r in rows]
    if metadata.get("limit_docs") is not None:
        rows = rows[: int(metadata["limit_docs"])]
    return {"test": datasets.Dataset.from_list(rows)}


def load_hellobench_weights(path: str | Path) -> dict[str, list[float]]:
    """Per-category checklist weights from the published HelloEval ``REGRESSION_DICT`` file."""
    from harness.metrics.generation import parse_hellobench_weights

    file = Path(path)
    if not file.is_file():
        raise MissingDataError(f"HelloEval weights file {file} not found: pass weights_file= the published "
                               "REGRESSION_DICT file (e.g. ../shared/data/hellobench/weighted_scores.txt)")
    return parse_hellobench_weights(file.read_text(encoding="utf-8"))
