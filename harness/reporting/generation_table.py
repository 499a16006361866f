"""The PIC paper, Table 1 from runs: Length, Tokens, Quality and corrupted ratio (CR) from logged samples and
``lch judge``'s judgements beside them, averaged as in Appendix A: runs with CR < 20 % over the non-corrupted
samples all compared runs share, the others over their own."""

from __future__ import annotations

import glob
import json
from pathlib import Path
from typing import Any

from harness.core import results as keys
from harness.core.errors import MissingDataError
from harness.core.run_files import judgements_path
from harness.core.tables import markdown
from harness.metrics.generation import shared_clean_average
from harness.reporting.labels import model_args_of, name_from_results


def _latest(folder: Path, pattern: str) -> Path:
    found = sorted(glob.glob(str(folder / "**" / pattern), recursive=True))
    if not found:
        raise MissingDataError(f"no {pattern} under {folder} (run lm-eval with --log_samples)")
    return Path(found[-1])


def read_judgements(samples_file: Path) -> dict[Any, float | None]:
    """Per-sample judged quality by ``doc_id`` from the judgements file beside ``samples_file``."""
    path = judgements_path(samples_file)
    if not path.exists():
        raise MissingDataError(
            f"no judgements for {samples_file}: run `lch judge {samples_file} --judge-base-url URL "
            "--judge-model NAME` first (answers are cached, so judged samples are not re-asked)"
        )
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {row["doc_id"]: row["quality"] for row in rows}


def generation_table(run_dirs: list[str], task: str, threshold: float = 0.2) -> list[dict[str, Any]]:
    """One row per run: ``label``, ``model_args``, ``cr``, ``length``, ``tokens``, ``quality`` (as used) and
    both averages."""
    lengths, tokens, quality, corrupted, labels, model_args, applied = {}, {}, {}, {}, {}, {}, {}
    for run in run_dirs:
        results = json.loads(_latest(Path(run), "results_*.json").read_text())
        model_args[run], applied[run] = model_args_of(results), (results.get("config") or {}).get(keys.INFERENCE)
        labels[run] = name_from_results(results).text
        samples_file = _latest(Path(run), f"samples_{task}_*.jsonl")
        rows = [json.loads(l) for l in samples_file.read_text().splitlines() if l.strip()]
        ids = [r["doc_id"] for r in rows]
        judged = read_judgements(samples_file)
        lengths[run] = dict(zip(ids, (float(r["length"]) for r in rows)))
        tokens[run] = dict(zip(ids, (float(r["n_tokens"]) for r in rows)))
        corrupted[run] = dict(zip(ids, (bool(r["corrupted_ratio"]) for r in rows)))
        # unparsed judgements count as corrupted for the quality average only
        quality[run] = {i: q for i in ids if (q := judged.get(i)) is not None}
    avg_len = shared_clean_average(lengths, corrupted, threshold)
    avg_tok = shared_clean_average(tokens, corrupted, threshold)
    q_corrupted = {run: {i: corrupted[run][i] or i not in quality[run] for i in corrupted[run]} for run in run_dirs}
    q_values = {run: {i: quality[run].get(i, 0.0) for i in corrupted[run]} for run in run_dirs}
    avg_q = shared_clean_average(q_values, q_corrupted, threshold)
    for run in run_dirs:  # shared or own is the run's choice by its corrupted ratio, not by its judge's parse rate
        avg_q[run]["used"] = avg_q[run]["shared"] if avg_len[run]["corrupted_ratio"] < threshold else avg_q[run]["own"]
    return [
        {
            "label": labels[run],
            "model_args": model_args[run],
            "applied": applied[run],
            "cr": avg_len[run]["corrupted_ratio"],
            "length": avg_len[run]["used"],
            "n": avg_len[run]["n_used"],
            "tokens": avg_tok[run]["used"],
            "quality": avg_q[run]["used"],
            "length_shared": avg_len[run]["shared"],
            "length_own": avg_len[run]["own"],
            "quality_shared": avg_q[run]["shared"],
            "quality_own": avg_q[run]["own"],
        }
        for run in run_dirs
    ]


def format_table(rows: list[dict[str, Any]]) -> str:
    """The PIC paper, Table 1's columns, and n: the samples each run's averages are over (Appendix A)."""
    return "\n".join(
        markdown(
            ["model", "Length", "Tokens", "Quality", "CR", "n"],
            [
                [
                    r["label"],
                    f"{r['length']:.1f}",
                    f"{r['tokens']:.1f}",
                    f"{r['quality']:.2f}",
                    f"{100 * r['cr']:.1f}%",
                    r["n"],
                ]
                for r in rows
            ],
            right=(1, 2, 3, 4, 5),
        )
    )
