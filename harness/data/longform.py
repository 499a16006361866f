"""LongBench-Write / HelloBench HTG data: official files given (``*_data``, ``data_files``), else downloaded once."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import UsageError
from harness.core.options import MAX_SAMPLES, option
from harness.data.documents import MissingDataError, downloaded_input, local_or_download, read_jsonl
from harness.data.inputs import Input

LONGBENCH_WRITE_URL = "https://raw.githubusercontent.com/THUDM/LongWriter/main/evaluation/longbench_write.jsonl"
HELLOBENCH_URLS = {
    "": "https://raw.githubusercontent.com/Quehry/HelloBench/main/HelloBench/heuristic_text_generation.jsonl",
    **{
        v: "https://raw.githubusercontent.com/Quehry/HelloBench/main/HelloBench/length_constrained_experiments_data/"
        f"heuristic_text_generation_{v}.jsonl"
        for v in ("2k", "4k", "8k", "16k")
    },
}


@dataclass(frozen=True)
class LongBenchWriteData:
    """Which LongBench-Write rows are generated."""

    longbench_write_data: str | None = option(None, "LongBench-Write data file (default: downloaded once)", path=True)
    data_files: str | None = option(None, "the data file (when no longbench_write_data)", path=True)
    min_required_length: float = option(
        2000.0, "rows asking for more words than this are kept (the PIC paper: 2000)", low=0.0
    )
    limit_docs: int | None = option(None, "number of rows (default: all)", low=1, high=MAX_SAMPLES)

    def inputs(self) -> list[Input]:
        """The data file (:mod:`harness.data.inputs`): given, else the published one (downloaded once)."""
        path = self.longbench_write_data or self.data_files
        return [downloaded_input("longbench_write_data", path, LONGBENCH_WRITE_URL)]


@dataclass(frozen=True)
class HelloBenchData:
    """Which HelloBench HTG prompts are generated, and the HelloEval weights that score them."""

    hellobench_data: str | None = option(None, "HelloBench data file (default: downloaded once)", path=True)
    data_files: str | None = option(None, "the data file (when no hellobench_data)", path=True)
    variant: str = option("", "HelloBench length variant: '' or 2k / 4k / 8k / 16k", choices=tuple(HELLOBENCH_URLS))
    limit_docs: int | None = option(None, "number of prompts (default: all)", low=1, high=MAX_SAMPLES)
    weights_file: str | None = option(None, "HelloEval category weights (published REGRESSION_DICT)", path=True)
    rescale: bool = option(False, "HelloBench 4 (s - 75) rescaling")

    def inputs(self) -> list[Input]:
        """The prompts (given, else the published file, downloaded once) and the weights file when named."""
        found = [
            downloaded_input("hellobench_data", self.hellobench_data or self.data_files, HELLOBENCH_URLS[self.variant])
        ]
        if self.weights_file:
            found.append(
                Input(
                    "weights_file",
                    self.weights_file,
                    "path",
                    "give weights_file= the published HelloEval REGRESSION_DICT file",
                )
            )
        return found


def load_longbench_write(options: LongBenchWriteData, model: Any = None) -> dict:
    """A task's dataset builder (:meth:`harness.tasks.base.LchTask.download`): rows whose required ``length`` exceeds
    ``min_required_length`` (default 2000: the PIC paper reports 47 rows where a strict ``> 2000`` keeps 45)."""
    import datasets

    path = options.longbench_write_data or options.data_files
    rows = read_jsonl(local_or_download(path, LONGBENCH_WRITE_URL, "LongBench-Write data (longbench_write_data)"))
    threshold = options.min_required_length
    kept = [{"doc_id": i, **r} for i, r in enumerate(rows) if float(r["length"]) > threshold]
    if not kept:
        raise UsageError(
            f"no row of the LongBench-Write data asks for more than {threshold:g} words "
            "(min_required_length): lower min_required_length in --metadata, or give the full data"
        )
    return {"test": datasets.Dataset.from_list(kept[: options.limit_docs])}


def load_hellobench_htg(options: HelloBenchData, model: Any = None) -> dict:
    """A task's dataset builder (:meth:`harness.tasks.base.LchTask.download`): the 123 HTG prompts (``variant`` "" or
    2k / 4k / 8k / 16k)."""
    import datasets

    path = options.hellobench_data or options.data_files
    rows = read_jsonl(
        local_or_download(path, HELLOBENCH_URLS[options.variant], "HelloBench HTG data (hellobench_data)")
    )
    keep = ("id", "category", "instruction", "checklists")
    rows = [{k: r[k] for k in keep} for r in rows]
    return {"test": datasets.Dataset.from_list(rows[: options.limit_docs])}


def load_hellobench_weights(path: str | Path) -> dict[str, list[float]]:
    """Per-category checklist weights from the published HelloEval ``REGRESSION_DICT`` file."""
    from harness.metrics.generation import parse_hellobench_weights

    file = Path(path)
    if not file.is_file():
        raise MissingDataError(
            f"HelloEval weights file {file} not found: pass weights_file= the published "
            "REGRESSION_DICT file (e.g. ../shared/data/hellobench/weighted_scores.txt)"
        )
    return parse_hellobench_weights(file.read_text(encoding="utf-8"))
