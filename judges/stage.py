"""Judged metrics: the stage after generation that asks an LLM judge about every logged sample.

Tasks put one *item* per sample into their judged metrics (instruction, response, what the judge needs,
and the judge settings from task metadata). lm-eval hands all items of a metric to its aggregation at
once, so judging runs concurrently over the whole task; every answer is cached by request, so the
second and third judged metric of a task (and any re-run, or ``lch judge`` with the same judge) re-ask
nothing. Parse failures follow ``policy``: ``drop`` (left out of the mean, counted), ``zero`` (scored
as the lowest grade) or ``rejudge`` (asked again with a different seed, up to two more times, then dropped).
"""

from __future__ import annotations

import logging
import math
import os
from functools import lru_cache
from typing import Any, Callable, Sequence

from harness.data.longform import load_hellobench_weights
from harness.judges.client import JudgeClient, JudgeSettings
from harness.judges.parsing import parse_checklist_judgement, parse_longbench_write_judgement
from harness.judges.prompts import helloeval_messages, load_longbench_write_prompt, longbench_write_messages
from harness.metrics.generation import (
    LONGBENCH_WRITE_DIMENSIONS,
    hellobench_sample_score,
    hellobench_rescale,
    longbench_write_quality,
)

log = logging.getLogger(__name__)
POLICIES = ("drop", "zero", "rejudge")
# What the servers reported while judging, per (base_url, model): model names and system fingerprints.
PROVENANCE: dict[tuple[str, str], dict[str, set]] = {}


def provenance(items: Sequence[dict]) -> dict[str, Any] | None:
    """The judge behind ``items`` as configured and as the server reported it (for the results JSON)."""
    cfg = items[0].get("judge") if items else None
    if not cfg:
        return None
    seen = PROVENANCE.get((cfg["base_url"], cfg["model"]), {})
    return {"model": cfg["model"], "base_url": cfg["base_url"], "policy": cfg["policy"],
            "reported_models": sorted(seen.get("models", ())), "fingerprints": sorted(seen.get("fingerprints", ()))}


def judge_settings_from_metadata(meta: dict, temperature: float, max_tokens: int) -> dict | None:
    """The JSON-able judge settings carried by each item (None when no judge is configured)."""
    base_url = meta.get("judge_base_url") or os.environ.get("LCH_JUDGE_BASE_URL")
    model = meta.get("judge_model") or os.environ.get("LCH_JUDGE_MODEL")
    if not base_url or not model:
        return None
    policy = str(meta.get("judge_policy", "drop"))
    if policy not in POLICIES:
        raise ValueError(f"judge_policy {policy!r} is unknown; allowed: {', '.join(POLICIES)}")
    return {
        "base_url": base_url, "model": model, "policy": policy,
        "temperature": float(meta.get("judge_temperature", temperature)),
        "max_tokens": int(meta.get("judge_max_tokens", max_tokens)),
        "concurrency": int(meta.get("judge_concurrency", 8)),
        "cache_dir": meta.get("judge_cache_dir"),
    }


def _judge(items: Sequence[dict], build: Callable[[dict], list[dict]], parse: Callable[[dict, str], Any]) -> list[Any]:
    """Parsed judgement per item (None when unparsable or unanswered), judged concurrently."""
    if not items or items[0].get("judge") is None:
        log.warning("no judge configured (judge_base_url / judge_model): judged metrics are NaN")
        return [None] * len(items)
    cfg = items[0]["judge"]
    parsed: list[Any] = [None] * len(items)
    pending = list(range(len(items)))
    attempts = 3 if cfg["policy"] == "rejudge" else 1
    for attempt in range(attempts):
        extra = {"seed": attempt} if attempt else {}
        client = JudgeClient(JudgeSettings(
            base_url=cfg["base_url"], model=cfg["model"], temperature=cfg["temperature"],
            max_tokens=cfg["max_tokens"], concurrency=cfg["concurrency"], cache_dir=cfg["cache_dir"], extra=extra,
        ))
        answers = client.ask_many([build(items[i]) for i in pending], progress=False)
        seen = PROVENANCE.setdefault((cfg["base_url"], cfg["model"]), {"models": set(), "fingerprints": set()})
        seen["models"].update(a.model for a in answers if a.model)
        seen["fingerprints"].update(a.fingerprint for a in answers if a.fingerprint)
        for i, answer in zip(pending, answers):
            parsed[i] = parse(items[i], answer.text) if answer.text is not None else None
        pending = [i for i in pending if parsed[i] is None]
        if not pending:
            break
    return parsed


# --------------------------------------------------------------------------- LongBench-Write


@lru_cache(maxsize=4)
def _longbench_write_template(path: str | None) -> str:
    return load_longbench_write_prompt(path)


def _lbw_judgements(items: Sequence[dict]) -> list[dict[str, float] | None]:
    build = lambda it: longbench_write_messages(_longbench_write_template(it.get("prompt_path")), it["instruction"], it["response"])
    return _judge(items, build, lambda it, text: parse_longbench_write_judgement(text))


def _zero_policy(items: Sequence[dict]) -> bool:
    return bool(items) and bool(items[0].get("judge")) and items[0]["judge"]["policy"] == "zero"


def longbench_write_quality_agg(items: Sequence[dict]) -> float:
    """S_q over the samples whose judgement parsed (policy ``zero``: unparsed ones score 1 everywhere)."""
    parsed = _lbw_judgements(items)
    if _zero_policy(items):
        parsed = [p if p is not None else dict.fromkeys(LONGBENCH_WRITE_DIMENSIONS, 1.0) for p in parsed]
    return longbench_write_quality([p for p in parsed if p is not None])


def longbench_write_valid_agg(items: Sequence[dict]) -> int:
    return sum(p is not None for p in _lbw_judgements(items))


def longbench_write_total_agg(items: Sequence[dict]) -> float:
    """S = (S_l + S_q) / 2 with S_l the mean length score of all samples."""
    s_l = sum(it["length_score"] for it in items) / len(items) if items else math.nan
    return (s_l + longbench_write_quality_agg(items)) / 2.0


# --------------------------------------------------------------------------- HelloBench


@lru_cache(maxsize=4)
def _weights(path: str) -> dict[str, list[float]]:
    return load_hellobench_weights(path)


def _hellobench_judgements(items: Sequence[dict]) -> list[list[float] | None]:
    build = lambda it: helloeval_messages(it["instruction"], it["response"], it["checklists"])
    return _judge(items, build, lambda it, text: parse_checklist_judgement(text, len(it["checklists"])))


def hellobench_quality_agg(items: Sequence[dict]) -> float:
    """Mean weighted checklist score ``s_i`` (rescaled when the items say so) over parsed judgements
    (policy ``zero``: unparsed ones score 0 on every item)."""
    scores = []
    all_parsed = _hellobench_judgements(items)
    if _zero_policy(items):
        all_parsed = [p if p is not None else [0.0] * len(it["checklists"]) for p, it in zip(all_parsed, items)]
    for item, parsed in zip(items, all_parsed):
        if parsed is not None:
            s = hellobench_sample_score(item["category"], parsed, _weights(item["weights_file"]))
            scores.append(hellobench_rescale(s) if item.get("rescale") else s)
    return sum(scores) / len(scores) if scores else math.nan


def hellobench_valid_agg(items: Sequence[dict]) -> int:
    return sum(p is not None for p in _hellobench_judgements(items))


def sample_quality(items: Sequence[dict]) -> list[float | None]:
    """Per-sample judged quality (None when unparsed): HelloEval ``s_i``, or for LongBench-Write the mean
    over the six dimensions of ``25 (score - 1)`` (whose mean over samples is S_q)."""
    if items and "checklists" in items[0]:
        return [None if p is None else hellobench_sample_score(it["category"], p, _weights(it["weights_file"]))
                for it, p in zip(items, _hellobench_judgements(items))]
    return [None if p is None else sum(25.0 * (p[d] - 1.0) for d in LONGBENCH_WRITE_DIMENSIONS) / 6
            for p in _lbw_judgements(items)]


def rejudge_samples(
    samples_file: str, judge: dict, prompt_path: str | None = None, weights_file: str | None = None
) -> dict[str, Any]:
    """Judged metrics of logged lm-eval samples under another judge (``judge`` overrides base_url, model,
    policy, concurrency, cache_dir; temperature and max_tokens stay as logged)."""
    import json
    from pathlib import Path

    rows = [json.loads(line) for line in Path(samples_file).read_text(encoding="utf-8").splitlines() if line.strip()]
    items = [dict(row["quality"]) for row in rows]
    if not items:
        raise ValueError(f"{samples_file} holds no samples")
    for item in items:
        base = item.get("judge") or {"temperature": 0.0, "max_tokens": 1024}
        item["judge"] = {**base, **{k: v for k, v in judge.items() if v is not None}}
        if prompt_path:
            item["prompt_path"] = prompt_path
        if weights_file:
            item["weights_file"] = weights_file
    meta = {"samples": samples_file, "judge_model": judge["model"], "n_total": len(items)}
    if "checklists" in items[0]:
        return {**meta, "quality": hellobench_quality_agg(items), "n_valid": hellobench_valid_agg(items)}
    return {**meta, "quality": longbench_write_quality_agg(items), "score": longbench_write_total_agg(items),
            "length_score": sum(it["length_score"] for it in items) / len(items),
            "n_valid": longbench_write_valid_agg(items)}
