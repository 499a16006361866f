"""Logged samples (``samples_<task>_<stamp>.jsonl`` beside ``results_<stamp>.json``, a row per document and
filter) for reports that compare runs sample by sample; pairs by ``doc_id``, the same input iff ``doc_hash`` is."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from harness.core.errors import DataFormatError, UsageError
from harness.data.documents import read_jsonl

SAMPLES_PREFIX, RESULTS_PREFIX = "samples_", "results_"


def stamp_of(results: Path) -> str:
    """The ``<stamp>`` of ``results_<stamp>.json``."""
    return results.name[len(RESULTS_PREFIX) : -len(".json")]


def samples_files(results: str | Path) -> dict[str, Path]:
    """``{task: samples_<task>_<stamp>.jsonl}`` beside a results file (empty: the run logged no samples)."""
    results = Path(results)
    suffix = f"_{stamp_of(results)}.jsonl"
    return {
        file.name[len(SAMPLES_PREFIX) : -len(suffix)]: file
        for file in sorted(results.parent.glob(f"{SAMPLES_PREFIX}*{suffix}"))
        if len(file.name) > len(SAMPLES_PREFIX) + len(suffix)
    }


def results_file(path: str | Path, what: str = "two lm-eval output folders (or results_*.json files)") -> Path:
    """The newest results file of a run folder (by name: lm-eval's stamps sort by time), or the results file given;
    one line naming ``what`` to give otherwise."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path} does not exist: give {what}")
    results = path if path.is_file() else max(path.rglob(f"{RESULTS_PREFIX}*.json"), default=None, key=lambda p: p.name)
    if results is None:
        raise UsageError(f"{path}: no results_*.json found (give the folder lm-eval wrote with --output_path)")
    return results


def run_files(path: str | Path) -> tuple[Path, dict[str, Path]]:
    """:func:`results_file` and its samples files by task; a run that logged none is refused."""
    results = results_file(path)
    samples = samples_files(results)
    if not samples:
        raise UsageError(
            f"{results.parent}: no samples_*_{stamp_of(results)}.jsonl beside {results.name}; run lm-eval "
            "with --log_samples to compare runs sample by sample"
        )
    return results, samples


def common_tasks(results: tuple[Path, Path], files: tuple[dict[str, Path], dict[str, Path]]) -> list[str]:
    """The tasks both runs (``results`` files, ``files``: :func:`run_files`' samples) logged samples of, sorted; one
    line saying there is none otherwise."""
    tasks = sorted(set(files[0]) & set(files[1]))
    if not tasks:
        raise UsageError(
            f"{results[0].parent} and {results[1].parent} logged samples of no common task "
            f"({', '.join(sorted(files[0]))} vs {', '.join(sorted(files[1]))})"
        )
    return tasks


def read_rows(path: str | Path) -> list[dict]:
    """The rows of a samples file, each with a ``doc_id`` (:class:`DataFormatError` naming the file otherwise)."""
    rows = read_jsonl(path, "an lm-eval samples file")
    bad = next((i for i, row in enumerate(rows) if "doc_id" not in row), None)
    if bad is not None:
        raise DataFormatError(f"{path}: sample {bad} has no doc_id (not an lm-eval samples file)")
    return rows


def by_doc(rows: Iterable[dict], filter_name: str | None = None) -> dict[Any, dict]:
    """``{doc_id: row}`` of the rows of one filter (``None``: every row, a later filter's row of a document
    replacing an earlier one's)."""
    return {row["doc_id"]: row for row in rows if filter_name is None or row.get("filter", "none") == filter_name}


def filters_of(rows: Iterable[dict]) -> list[str]:
    """The filters a samples file's rows were logged under (lm-eval's ``filter``; ``none`` when absent)."""
    return sorted({str(row.get("filter", "none")) for row in rows})


def number(value: Any) -> TypeGuard[float]:
    """A finite number that is no boolean: a per-sample score."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def score_values(sample: Mapping, roles: Mapping[str, str] | None = None) -> dict[str, float]:
    """The sample's numeric scores by row name; a ``[sum, count]`` pair as its ratio, named ``<metric> mean NLL`` for
    a perplexity (``roles``: declared metric roles), else ``<metric> sum / count``."""
    out = {}
    for name in sample.get("metrics") or []:
        value = sample.get(name)
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, (int, float)):
            out[name] = float(value)
        elif (
            isinstance(value, list) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value) and value[1]
        ):
            label = f"{name} mean NLL" if (roles or {}).get(name) == "perplexity" else f"{name} sum / count"
            out[label] = float(value[0]) / float(value[1])
    return out


@dataclass
class Pairing:
    """``pairs``: (doc_id, row of A, row of B) in A's order; ``unpaired``: documents of one run only;
    ``input_mismatch``: shared doc_ids whose ``doc_hash`` differs."""

    pairs: list[tuple[Any, dict, dict]] = field(default_factory=list)
    unpaired: int = 0
    input_mismatch: list[Any] = field(default_factory=list)


def pair_docs(a: Mapping[Any, dict], b: Mapping[Any, dict], keep_mismatched: bool = False) -> Pairing:
    """Documents of ``a`` and ``b`` (``{doc_id: row}``) paired by ``doc_id``; those whose ``doc_hash`` differs are
    listed in ``input_mismatch`` and left out, or kept with ``keep_mismatched``."""
    same = {doc: a[doc].get("doc_hash") == b[doc].get("doc_hash") for doc in a if doc in b}
    return Pairing(
        [(doc, a[doc], b[doc]) for doc, equal in same.items() if equal or keep_mismatched],
        len(set(a) ^ set(b)),
        [doc for doc, equal in same.items() if not equal],
    )


def paired_scores(
    pairs: Iterable[tuple[Any, dict, dict]],
    roles: Mapping[str, str] | None = None,
    order: Callable[[str], Any] | None = None,
) -> Iterator[tuple[str, list[float], list[float]]]:
    """``(name, values of A, values of B)`` of each per-sample score (:func:`score_values`, names sorted by ``order``)
    over the pairs (doc_id, row of A, row of B) whose two sides both hold it (a per-length metric ``len_<L>``: the
    documents of that length); a score no pair holds on both sides is left out."""
    values = [(score_values(a, roles), score_values(b, roles)) for _, a, b in pairs]
    for name in sorted(set().union(*(x for x, _ in values)), key=order):
        kept = [(x[name], y[name]) for x, y in values if name in x and name in y]
        if kept:
            yield name, [x for x, _ in kept], [y for _, y in kept]


def report_json(report: dict[str, Any]) -> str:
    """A report of two runs compared sample by sample (``lch agree``, ``lch template-effect``) as JSON, its
    ``tasks`` (dataclasses) as objects."""
    return json.dumps({**report, "tasks": [asdict(t) for t in report["tasks"]]}, indent=1, default=str) + "\n"
