"""MRQA 2019 data: HF ``mrqa-workshop/mrqa`` or official MRQA jsonl. Rows: ``{"id", "subset", "context", "question",
"answers"}``, context apart so that a context compressor (EPL) can take it alone."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import DataFormatError, UsageError, missing_data_on_error
from harness.core.options import MAX_SAMPLES, option
from harness.data.documents import MissingDataError, read_jsonl
from harness.data.inputs import Input
from harness.data.truncation import TruncationOptions

LAYER = "data"  # harness/devtools/layers.py

MRQA_HF = "mrqa-workshop/mrqa"
IN_DOMAIN = ("SQuAD", "NewsQA", "TriviaQA-web", "SearchQA", "HotpotQA", "NaturalQuestionsShort")
OUT_OF_DOMAIN = ("BioASQ", "DROP", "DuoRC.ParaphraseRC", "RACE", "RelationExtraction", "TextbookQA")


@dataclass(frozen=True)
class MrqaOptions(TruncationOptions):
    """Options of one MRQA subtask."""

    subset: str | None = option(None, "MRQA subset of a subtask YAML", choices=IN_DOMAIN + OUT_OF_DOMAIN)
    mrqa_data: str | None = option(None, "MRQA file or folder (default: the HF dataset)", path=True)
    limit_docs: int | None = option(None, "number of questions (default: all)", low=1, high=MAX_SAMPLES)

    def inputs(self) -> list[Input]:
        """The MRQA rows (:mod:`harness.data.inputs`): ``mrqa_data``, else the HF dataset."""
        if self.mrqa_data:
            return [
                Input(
                    "mrqa_data",
                    self.mrqa_data,
                    "path",
                    "give mrqa_data= an official MRQA .jsonl file or a folder of them",
                )
            ]
        return [
            Input(
                "hf_dataset",
                MRQA_HF,
                "hf_dataset",
                "download it to the HF cache, or pass mrqa_data=<official MRQA .jsonl file or folder>",
            )
        ]


def read_mrqa_jsonl(path: str | Path, subset: str) -> list[dict[str, Any]]:
    """Rows of an official MRQA file (an optional ``{"header": ...}`` line, then one context per line)."""
    rows = []
    for number, record in enumerate(read_jsonl(path, "an MRQA file"), start=1):
        if "header" in record:
            continue
        if "context" not in record or not isinstance(record.get("qas"), list):
            raise DataFormatError(f"{path}: record {number} has no 'context' and 'qas': not an official MRQA file")
        for qa in record["qas"]:
            rows.append(
                {
                    "id": qa.get("qid") or qa.get("id"),
                    "subset": subset,
                    "context": record["context"],
                    "question": qa["question"],
                    "answers": list(qa["answers"]),
                }
            )
    return rows


def load_mrqa(options: MrqaOptions, model: Any = None) -> dict:
    """A task's dataset builder (:meth:`harness.tasks.base.LchTask.download`): one MRQA subset (``subset``):
    ``mrqa_data`` = a local official jsonl file, or a folder holding ``<subset>*.jsonl``; else the HF dataset
    (validation = in-domain, test = out-of-domain)."""
    import datasets

    if not options.subset:
        raise UsageError("MRQA needs metadata subset (one of the MRQA datasets, e.g. SQuAD)")
    subset, local = options.subset, options.mrqa_data
    if local:
        path = Path(local)
        if path.is_dir():
            matches = sorted(path.glob(f"{subset}*.jsonl"))
            if not matches:
                raise MissingDataError(f"no {subset}*.jsonl in {path}: put the official MRQA file there")
            path = matches[0]
        elif not path.is_file():
            raise MissingDataError(f"mrqa_data={path} does not exist")
        rows = read_mrqa_jsonl(path, subset)
    else:
        split = "validation" if subset in IN_DOMAIN else "test"
        with missing_data_on_error(
            "could not load HF mrqa-workshop/mrqa",
            'pass --metadata \'{"mrqa_data": "<official MRQA jsonl file or folder>"}\'',
        ):
            ds = datasets.load_dataset(MRQA_HF, split=split)
        ds = ds.filter(lambda r: r["subset"] == subset)
        rows = [
            {
                "id": r["qid"],
                "subset": subset,
                "context": r["context"],
                "question": r["question"],
                "answers": list(r["answers"]),
            }
            for r in ds
        ]
    if options.limit_docs is not None:
        rows = rows[: options.limit_docs]
    return {"test": datasets.Dataset.from_list(rows)}
