"""Names of the files a run leaves beside each other: lm-eval's ``samples_<task>_<date>.jsonl`` and the judge
stage's ``judgements_<task>_<date>.jsonl`` (written by ``lch judge``, read by reporting)."""

from __future__ import annotations

from pathlib import Path


def judgements_path(samples_file: str | Path) -> Path:
    """``judgements_<task>_<date>.jsonl`` beside ``samples_<task>_<date>.jsonl``."""
    path = Path(samples_file)
    return path.with_name("judgements_" + path.name.removeprefix("samples_"))
