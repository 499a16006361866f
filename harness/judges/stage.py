"""The judge stage: each long-form sample judged once per judge (:func:`judge`, answers cached by request), scored by
:func:`task_scores`; :func:`judge_samples_file` (``lch judge``) writes the judgements beside the logged samples. Parse
failures follow ``policy``: ``drop`` (out of the mean, counted by ``n_valid``), ``zero`` (the lowest grade) or
``rejudge`` (asked again with another seed, up to two more times, then dropped)."""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.core.errors import DataFormatError, IncompleteError, MissingDataError, UsageError
from harness.core.files import atomic_writer
from harness.core.run_files import judgements_path
from harness.data.documents import read_jsonl
from harness.data.longform import load_hellobench_weights
from harness.judges.client import JudgeClient, JudgeSettings, default_cache_dir
from harness.judges.config import JudgeConfig
from harness.judges.parsing import parse_checklist_judgement, parse_longbench_write_judgement
from harness.judges.prompts import helloeval_messages, load_longbench_write_prompt, longbench_write_messages
from harness.metrics.generation import (
    LONGBENCH_WRITE_DIMENSIONS,
    hellobench_rescale,
    hellobench_sample_score,
    hellobench_task_score,
    longbench_write_quality,
    longbench_write_total,
)

log = logging.getLogger(__name__)


@dataclass
class Judgements:
    """Per item the parsed judgement (None: unparsable or unanswered), six LongBench-Write dimension scores (1-5) or
    HelloEval checklist scores (0-1); ``provenance``: who judged (None: no judge configured)."""

    parsed: list[Any]
    provenance: dict[str, Any] | None
    failures: dict[str, int] = field(default_factory=dict)  # requests the judge never answered, per kind

    @property
    def n_valid(self) -> int:
        return sum(p is not None for p in self.parsed)

    @property
    def n_failed(self) -> int:
        return sum(self.failures.values())

    def absent_because(self) -> str | None:
        """Why the judged scores do not exist (None: they do): no judge configured, a request never answered (a mean
        over the rest would be of other samples than asked), or no parsable reply (policy not ``zero``)."""
        if self.provenance is None:
            return (
                "no judge configured (judge_base_url / judge_model): judge the logged samples (--log_samples) "
                "with `lch judge`"
            )
        if self.failures:
            kinds = ", ".join(f"{kind} x{n}" for kind, n in sorted(self.failures.items()))
            return (
                f"the judge at {self.provenance['base_url']} answered {len(self.parsed) - self.n_failed} of "
                f"{len(self.parsed)} requests ({kinds})"
            )
        if self.parsed and not self.n_valid and self.provenance.get("policy") != "zero":
            return (
                f"none of the judge's {len(self.parsed)} replies could be parsed (policy "
                f"{self.provenance.get('policy')}: unparsed replies are left out)"
            )
        return None


KINDS = ("longbench_write", "hellobench")


def item_kind(items: Sequence[dict]) -> str:
    """The items' ``kind``; items without one are HelloBench's when they have ``checklists``."""
    if not items:
        return KINDS[0]
    kind = items[0].get("kind") or ("hellobench" if "checklists" in items[0] else "longbench_write")
    if kind not in KINDS:
        raise DataFormatError(f"judged item kind {kind!r} is unknown; known: {', '.join(KINDS)}")
    return kind


def is_hellobench(items: Sequence[dict]) -> bool:
    return item_kind(items) == "hellobench"


_longbench_write_template = lru_cache(maxsize=4)(load_longbench_write_prompt)
_weights = lru_cache(maxsize=4)(load_hellobench_weights)


def judge_messages(item: dict) -> list[dict]:
    """The messages the judge is sent about one item (:func:`judge` builds them so)."""
    return _conversation_and_parser([item])[0](item)


def _conversation_and_parser(items: Sequence[dict]) -> tuple[Callable[[dict], list[dict]], Callable[[dict, str], Any]]:
    if is_hellobench(items):
        return (
            lambda it: helloeval_messages(it["instruction"], it["response"], it["checklists"]),
            lambda it, text: parse_checklist_judgement(text, len(it["checklists"])),
        )
    return (
        lambda it: longbench_write_messages(
            _longbench_write_template(it.get("prompt_path")), it["instruction"], it["response"]
        ),
        lambda it, text: parse_longbench_write_judgement(text),
    )


def judge(items: Sequence[dict]) -> Judgements:
    """Ask the judge configured in ``items[0]["judge"]`` about every item, concurrently (module docstring)."""
    config = JudgeConfig.from_json(items[0].get("judge")) if items and items[0].get("judge") else None
    if config is None or not config.base_url or not config.model:
        log.warning("no judge configured (judge_base_url / judge_model): the judged metrics are left out")
        return Judgements([None] * len(items), None)
    cfg = config.to_json()
    build, parse = _conversation_and_parser(items)
    parsed: list[Any] = [None] * len(items)
    failed: dict[int, str] = {}  # item -> the kind of failure of its last request, while unanswered
    models: set[str] = set()
    fingerprints: set[str] = set()
    pending = list(range(len(items)))
    request = {k: v for k, v in cfg.items() if k != "policy"}  # the rest of the config is the client's settings
    for attempt in range(3 if cfg["policy"] == "rejudge" else 1):
        client = JudgeClient(JudgeSettings(**request, extra={"seed": attempt} if attempt else {}))
        answers = client.ask_many([build(items[i]) for i in pending], progress=False)
        models.update(a.model for a in answers if a.model)
        fingerprints.update(a.fingerprint for a in answers if a.fingerprint)
        for i, answer in zip(pending, answers):
            parsed[i] = parse(items[i], answer.text) if answer.text is not None else None
            if answer.failure is not None:
                failed[i] = answer.failure
            else:
                failed.pop(i, None)
        pending = [i for i in pending if parsed[i] is None]
        if not pending or client.server_silent:  # a dead server is not asked again by another rejudge pass
            break
    failures = dict(Counter(failed.values()))
    provenance = _provenance(
        cfg, models, fingerprints, len(items), failures, sum(p is None for p in parsed) - len(failed)
    )
    if failures:
        log.warning(
            "judge: %s; rerun to ask them again (answers received are cached)",
            Judgements(parsed, provenance, failures).absent_because(),
        )
    return Judgements(parsed, provenance, failures)


def _provenance(
    cfg: dict, models: set[str], fingerprints: set[str], requests: int, failures: dict[str, int], unparsed: int
) -> dict[str, Any]:
    return {
        "model": cfg["model"],
        "base_url": cfg["base_url"],
        "policy": cfg["policy"],
        "reported_models": sorted(models),
        "fingerprints": sorted(fingerprints),
        "requests": requests,
        "unanswered": failures,
        "unparsed": unparsed,
    }


def unanswered(items: Sequence[dict], kind: str) -> Judgements:
    """The judgements of a judge that could not be asked at all (``kind``: e.g. ``unreachable``): every item unanswered,
    so the judged scores are absent with the reason and the run keeps its generations."""
    cfg = JudgeConfig.from_json(items[0]["judge"]).to_json()
    failures = {kind: len(items)} if items else {}
    return Judgements([None] * len(items), _provenance(cfg, set(), set(), len(items), failures, 0), failures)


def _policy_filled(items: Sequence[dict], judged: Judgements) -> list[Any]:
    """Judgements with policy ``zero`` applied (unparsed = lowest grade everywhere)."""
    if not (judged.provenance and judged.provenance["policy"] == "zero"):
        return list(judged.parsed)
    if is_hellobench(items):
        return [p if p is not None else [0.0] * len(it["checklists"]) for p, it in zip(judged.parsed, items)]
    return [p if p is not None else dict.fromkeys(LONGBENCH_WRITE_DIMENSIONS, 1.0) for p in judged.parsed]


def sample_quality(items: Sequence[dict], judged: Judgements) -> list[float | None]:
    """Per-sample judged quality (None when unparsed and the policy drops it): HelloEval ``s_i`` (rescaled
    ``4 (s_i - 75)`` when the items say ``rescale``, as the task's quality is), or for LongBench-Write the
    mean over the six dimensions of ``25 (score - 1)`` (whose mean over samples is S_q)."""
    filled = _policy_filled(items, judged)
    if is_hellobench(items):
        scores = [
            None if p is None else hellobench_sample_score(it["category"], p, _weights(it["weights_file"]))
            for it, p in zip(items, filled)
        ]
        return [hellobench_rescale(s) if s is not None and it.get("rescale") else s for s, it in zip(scores, items)]
    return [None if p is None else longbench_write_quality([p]) for p in filled]


def task_scores(items: Sequence[dict], judged: Judgements) -> dict[str, float]:
    """The task's judged metrics (NaN: absent). LongBench-Write: ``quality`` = S_q over parsed samples, ``score`` = S =
    (S_l + S_q) / 2 with S_l the mean length score of all samples, ``n_valid``. HelloBench: ``quality`` = mean HelloEval
    ``s_i`` (rescaled when the items say so) over parsed samples, ``n_valid``."""
    filled = _policy_filled(items, judged)
    n_valid = judged.n_valid  # parsed judgements, whatever the policy made of the others
    if not items:
        return {"quality": math.nan, "n_valid": 0}
    absent = judged.absent_because() is not None  # NaN: the judged scores do not exist (the results leave them out)
    if is_hellobench(items):
        if absent:
            return {"quality": math.nan, "n_valid": n_valid}
        weights = _weights(items[0]["weights_file"])
        scored = hellobench_task_score(
            ((it["category"], p) for it, p in zip(items, filled)), weights, bool(items[0].get("rescale"))
        )
        return {"quality": scored["score"], "n_valid": n_valid}
    quality = math.nan if absent else longbench_write_quality([p for p in filled if p is not None])
    s_l = sum(it["length_score"] for it in items) / len(items)
    return {"quality": quality, "score": longbench_write_total(s_l, quality), "length_score": s_l, "n_valid": n_valid}


def save_unjudged(task: str, items: Sequence[dict]) -> Path:
    """Keeps the judged items of a run whose judge failed as a samples file that ``lch judge`` reads (rows ``doc_id``,
    ``quality``): ``unjudged/samples_<task>_<digest>.jsonl`` under the judge cache folder. Returns its path."""
    judge = (items[0].get("judge") or {}) if items else {}
    folder = Path(judge.get("cache_dir") or default_cache_dir()) / "unjudged"
    digest = hashlib.sha256(json.dumps(list(items), sort_keys=True, default=str).encode()).hexdigest()[:16]
    path = folder / f"samples_{task}_{digest}.jsonl"
    with atomic_writer(path) as f:
        for i, item in enumerate(items):
            f.write(json.dumps({"doc_id": i, "quality": item}) + "\n")
    return path


def judge_samples_file(
    samples_file: str | Path,
    judge_overrides: dict | None = None,
    prompt_path: str | None = None,
    weights_file: str | None = None,
) -> dict[str, Any]:
    """Judges the logged samples of a long-form task (``lch judge``), writing ``doc_id``, ``judge``, ``parsed``,
    ``quality`` rows beside them; the non-None ``judge_overrides`` replace the logged judge settings. Returns the judged
    metrics (absent ones left out, ``absent`` says why), file, judge and counts; IncompleteError, nothing written, when
    a request was never answered (the same command resumes)."""
    if not Path(samples_file).is_file():
        raise MissingDataError(
            f"samples file {samples_file} does not exist: give a samples_<task>_*.jsonl that "
            "lm-eval wrote with --log_samples"
        )
    rows = read_jsonl(samples_file, "an lm-eval samples file")
    if not rows:
        raise UsageError(f"{samples_file} holds no samples")
    bad = next(
        (i for i, row in enumerate(rows) if not isinstance(row.get("quality"), dict) or "doc_id" not in row), None
    )
    if bad is not None:
        raise DataFormatError(
            f"{samples_file}: sample {bad} has no judged item ('quality'): give the samples file of a "
            "judged task (longbench_write, hellobench_htg*) logged with --log_samples"
        )
    items = [dict(row["quality"]) for row in rows]
    overrides = {k: v for k, v in (judge_overrides or {}).items() if v is not None}
    for item in items:
        item["judge"] = JudgeConfig.from_json({**(item.get("judge") or {}), **overrides}).to_json()
        if prompt_path:
            item["prompt_path"] = prompt_path
        if weights_file:
            item["weights_file"] = weights_file
    judged = judge(items)
    if judged.failures:
        raise IncompleteError(
            f"{samples_file}: {judged.absent_because()}: no judgements written; the answers "
            "received are cached, so the same command asks only the others again"
        )
    quality = sample_quality(items, judged)
    out = judgements_path(samples_file)
    with atomic_writer(out) as f:  # a reader (lch gentable) never sees half a judgements file
        for row, parsed, q in zip(rows, judged.parsed, quality):
            f.write(
                json.dumps(
                    {"doc_id": row["doc_id"], "judge": items[0]["judge"].get("model"), "parsed": parsed, "quality": q}
                )
                + "\n"
            )
    scores = {k: v for k, v in task_scores(items, judged).items() if not (isinstance(v, float) and math.isnan(v))}
    absent = judged.absent_because()
    return {
        "samples": str(samples_file),
        "judgements": str(out),
        "judge_model": items[0]["judge"].get("model"),
        "n_total": len(items),
        **scores,
        **({"absent": absent} if absent else {}),
    }
