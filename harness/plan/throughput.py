"""How fast a model runs here: ``lch plan --calibrate`` times the engine (batch 1, two lengths, fastest of ``REPEATS``)
and keeps the fitted :class:`~harness.plan.cells.Throughput` under ``$LCH_CACHE/throughput/`` by setting."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict
from datetime import datetime, timezone
from typing import Any

from harness.core.cache import cache_root
from harness.core.files import read_json_or_none, write_json_atomic
from harness.plan.cells import Throughput

LAYER = "lmeval"  # harness/devtools/layers.py

DECODE_STEPS = 16
REPEATS = 2
RUN_ONLY_ARGS = ("pretrained", "device", "batch_size", "max_batch_size")  # not part of a setting's speed key


def setting_of(model: str, model_args: dict[str, Any], device: str | None) -> dict[str, str]:
    """What a run's speed depends on: the engine, the model's content identity, the device, every other model arg."""
    from harness.models.device_info import resolved_device
    from harness.models.identity import model_identity

    pretrained = model_args.get("pretrained")
    rest = {k: str(v) for k, v in sorted(model_args.items()) if k not in RUN_ONLY_ARGS}
    return {
        "engine": model,
        "model": model_identity(pretrained) if pretrained else "",
        "device": resolved_device(device),
        "model_args": json.dumps(rest, sort_keys=True),
    }


def setting_key(setting: dict[str, str]) -> str:
    """The store's file name for a setting (:func:`setting_of`)."""
    return hashlib.sha256(json.dumps(setting, sort_keys=True).encode()).hexdigest()[:20]


def stored(setting: dict[str, str]) -> Throughput | None:
    """The throughput last calibrated for ``setting`` on this machine, or None."""
    found = read_json_or_none(cache_root("throughput", setting_key(setting) + ".json"))
    if not isinstance(found, dict) or not isinstance(found.get("throughput"), dict):
        return None
    try:
        return Throughput(**found["throughput"])
    except TypeError:  # a file of another layout: calibrate again
        return None


def store(setting: dict[str, str], throughput: Throughput, points: dict[str, Any]) -> None:
    write_json_atomic(
        cache_root("throughput", setting_key(setting) + ".json"),
        {
            "setting": setting,
            "throughput": asdict(throughput),
            "points": points,
            "measured": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        },
    )


def calibration_lengths(longest_prompt: int, max_length: int) -> tuple[int, int]:
    """Two lengths to time: the plan's longest prompt (at most 8192 tokens and the model's length less the decode
    steps; at least 256) and a quarter of it."""
    high = max(256, min(longest_prompt, 8192, max_length - DECODE_STEPS - 1))
    return max(64, high // 4), high


def _fastest(call: Any) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(REPEATS):
        start = time.perf_counter()
        out = call()
        best = min(best, time.perf_counter() - start)
    return best, out


def calibrate(lm: Any, lengths: tuple[int, int]) -> tuple[Throughput, dict[str, Any]]:
    """``(fitted throughput, measured points)`` of ``lm`` (one of our engine models) timed at ``lengths``."""
    import random

    from harness.engines.requests import LongGenerationOptions

    rng = random.Random(0)
    vocab = int(getattr(lm.tokenizer, "vocab_size", 0) or len(lm.tokenizer))
    options = LongGenerationOptions()
    prefill, decode, score, points = [], [], [], {}
    for n in lengths:
        prompt = [rng.randrange(100, vocab - 1) for _ in range(n)]
        lm.generate_tokens([prompt], options, 1)  # warm-up (kernels, caches)
        # each lambda is timed and dropped within this iteration (B023: it sees this iteration's prompt)
        first, _ = _fastest(lambda: lm.generate_tokens([prompt], options, 1))  # noqa: B023
        longer, out = _fastest(lambda: lm.generate_tokens([prompt], options, DECODE_STEPS + 1))  # noqa: B023
        scored, _ = _fastest(lambda: lm.row_logprobs([prompt]))  # noqa: B023  # a perplexity's forward: every token scored
        steps = max(1, len(out[0].token_ids) - 1)
        prefill.append(first)
        decode.append(max(0.0, longer - first) / steps)
        score.append(scored)
        points[str(n)] = {
            "prefill_seconds": first,
            "decode_seconds_per_token": decode[-1],
            "decoded": steps,
            "score_seconds": scored,
        }
    record = lm.run_record()
    basis = (
        f"timed on {record.device} ({record.engine}, {record.dtype}) at {lengths[0]} and {lengths[1]} prompt "
        f"tokens, batch 1, {datetime.now(timezone.utc):%Y-%m-%d}"
    )
    return Throughput.fit(lengths, prefill, decode, basis, score), points


def load_engine(model: str, model_args: dict[str, Any], device: str | None) -> Any:
    """The run's model built as lm-eval builds it (its registry, batch size 1)."""
    from harness.core.errors import UsageError
    from harness.engines.registry import model_entry

    entry = model_entry(model)
    cls = entry.cls if entry is not None else None
    if cls is None or not callable(getattr(cls, "generate_tokens", None)):
        raise UsageError(f"lch plan --calibrate times hf-pic or vllm-pic models; {model} has no engine to time")
    extra = {"batch_size": 1, **({"device": device} if device else {})}
    return cls.create_from_arg_obj(model_args, extra)
