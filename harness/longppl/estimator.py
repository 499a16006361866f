"""LongPPL estimators (the LongPPL paper): the forwards behind the evaluator's long / short log-probabilities, key
tokens of a text and its LongPPL under a model; the formulas live in :mod:`harness.longppl.formulas`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from harness.core.errors import UsageError, check_known
from harness.longppl.formulas import (
    KEY_TOKEN_DEFAULTS,
    SHORT_STARTS,
    SOFT_GAMMA,
    KeyTokens,
    document_stats,
    select_key_tokens,
    short_windows,
    summarize,
)
from harness.models.device_sizing import (
    MEASURE,
    device_free_bytes,
    fused_attention,
    model_dtype,
    score_bytes,
    sized_pass,
    text_config,
)
from harness.models.scoring import hidden_states, score_tokens, target_logprobs

LAYER = "models"  # harness/devtools/layers.py


@torch.no_grad()
def long_short_logprobs(
    model: Any,
    ids: torch.Tensor,
    trunc_len: int,
    sliding_window: int,
    batch_size: int | None = None,
    bos_id: int | None = None,
    progress: Callable[[int], Any] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(long, short)`` float32 log-probabilities of targets ``trunc_len .. n-1`` of a 1-D token tensor: ``long``
    from one pass, ``short`` from :func:`short_windows` (``batch_size`` per forward, default :func:`window_batch`), each
    after ``bos_id`` when given. ``progress(k)`` is told of each pass done (:func:`passes` in all)."""
    progress = progress or (lambda done: None)
    if trunc_len < 1 or sliding_window < 1:
        raise UsageError(f"trunc_len and sliding_window must be >= 1, got {trunc_len}, {sliding_window}")
    row = ids[None]
    with sized_pass(model, row, "LongPPL's long pass of") as free:  # one reading for all the document's passes
        long = target_logprobs(
            model, hidden_states(model, row, torch.ones_like(row), free=free), row, first_target=trunc_len, free=free
        )[0]
    progress(1)
    short = torch.empty_like(long)
    windows = short_windows(len(ids), trunc_len, sliding_window)
    # the first window's context is the full context: its targets take the long values (LSD = 0, not rounding noise)
    first_end = windows[0][1] if windows else trunc_len
    short[: first_end - trunc_len] = long[: first_end - trunc_len]
    by_length: dict[int, list[tuple[int, int]]] = {}
    for start, end in windows[1:]:
        by_length.setdefault(end - start, []).append((start, end))
    for length, group in by_length.items():
        size = batch_size or window_batch(model, ids.device, length + (bos_id is not None), free=free)
        for i in range(0, len(group), size):
            chunk = group[i : i + size]
            batch = torch.stack([ids[s:e] for s, e in chunk])
            first = trunc_len
            if bos_id is not None:
                batch = torch.cat([torch.full_like(batch[:, :1], bos_id), batch], dim=1)
                first += 1
            lp = target_logprobs(
                model,
                hidden_states(model, batch, torch.ones_like(batch), free=free),
                batch,
                first_target=first,
                free=free,
            )
            for (start, end), values in zip(chunk, lp):
                short[start : end - trunc_len] = values  # targets start+K .. end-1 sit at start .. end-K-1
            progress(len(chunk))
    return long, short


def passes(n_tokens: int, trunc_len: int, sliding_window: int) -> int:
    """The forward passes that finding an ``n_tokens`` text's key tokens takes: the long one and every short window but
    the first (whose context is the long pass's), or 1 for a text no longer than ``trunc_len``."""
    return 1 + max(0, len(short_windows(n_tokens, trunc_len, sliding_window)) - 1)


CPU_WINDOW_BATCH = 4  # short windows per forward on the CPU (larger batches are no faster there)
WINDOW_SHARE = 1 / 2  # share of a CUDA device's free memory a batch of short windows may take
MAX_WINDOW_BATCH = 256


def window_batch(model: Any, device: torch.device | str, width: int, free: Any = MEASURE) -> int:
    """Short windows of ``width`` tokens per forward: :data:`CPU_WINDOW_BATCH` on the CPU; on CUDA as many as
    :data:`WINDOW_SHARE` of the headroom holds at ``16 x hidden`` fp32 activations a token plus, unless
    :func:`~harness.models.device_sizing.fused_attention`, ``heads x width^2`` scores (model dtype and fp32)."""
    free = device_free_bytes(device) if free is MEASURE else free
    if free is None:
        return CPU_WINDOW_BATCH
    config = text_config(model)
    heads = int(getattr(config, "num_attention_heads", 8) or 8)
    hidden = int(getattr(config, "hidden_size", 4096) or 4096)
    dtype = model_dtype(model)
    scores = 0 if fused_attention(model, device, dtype) else heads * width * score_bytes(dtype)
    per_window = width * (scores + 4 * 16 * hidden)
    return max(1, min(MAX_WINDOW_BATCH, int(free * WINDOW_SHARE) // per_window))


def find_key_tokens(
    text: str,
    evaluator_model: Any,
    evaluator_tokenizer: Any,
    trunc_len: int = KEY_TOKEN_DEFAULTS["trunc_len"],
    sliding_window: int = KEY_TOKEN_DEFAULTS["sliding_window"],
    alpha: float = KEY_TOKEN_DEFAULTS["alpha"],
    beta: float = KEY_TOKEN_DEFAULTS["beta"],
    short_start: str = KEY_TOKEN_DEFAULTS["short_start"],
    batch_size: int | None = None,
    progress: Callable[[int], Any] | None = None,
) -> KeyTokens:
    """Key tokens of ``text`` under the evaluator (:mod:`~harness.longppl.formulas`); ``short_start``: ``text`` or
    ``bos`` (:data:`~harness.longppl.formulas.KEY_TOKEN_DEFAULTS`); ``progress`` as :func:`long_short_logprobs`'s."""
    bos_id = _short_window_bos(evaluator_tokenizer, short_start)
    enc = evaluator_tokenizer(text, return_offsets_mapping=True)
    offsets = enc["offset_mapping"]
    n = len(enc["input_ids"])
    if n <= trunc_len:
        if progress is not None:
            progress(1)
        return select_key_tokens(offsets, [], [], trunc_len, alpha, beta)
    device = next(evaluator_model.parameters()).device
    ids = torch.tensor(enc["input_ids"], device=device)
    long, short = long_short_logprobs(evaluator_model, ids, trunc_len, sliding_window, batch_size, bos_id, progress)
    return select_key_tokens(offsets, long.cpu().numpy(), short.cpu().numpy(), trunc_len, alpha, beta)


def _short_window_bos(tokenizer: Any, short_start: str) -> int | None:
    check_known("short_start", short_start, SHORT_STARTS)
    if short_start == "text":
        return None
    if tokenizer.bos_token_id is None:
        raise UsageError("short_start=bos needs an evaluator tokenizer with a BOS token; this one has none")
    return int(tokenizer.bos_token_id)


@torch.no_grad()
def compute_longppl(
    text: str,
    model: Any,
    tokenizer: Any,
    evaluator_model: Any = None,
    evaluator_tokenizer: Any = None,
    key_spans: KeyTokens | Sequence[Sequence[int]] | None = None,
    trunc_len: int = KEY_TOKEN_DEFAULTS["trunc_len"],
    sliding_window: int = KEY_TOKEN_DEFAULTS["sliding_window"],
    alpha: float = KEY_TOKEN_DEFAULTS["alpha"],
    beta: float = KEY_TOKEN_DEFAULTS["beta"],
    gamma: float = SOFT_GAMMA,
    short_start: str = KEY_TOKEN_DEFAULTS["short_start"],
) -> dict[str, Any]:
    """LongPPL of ``text`` under ``model``: ``{"longppl", "ppl", "longppl_soft", "n_key_token", "n_token"}``; key tokens
    from ``key_spans`` or the evaluator. ``longppl`` is None without key tokens; ``longppl_soft`` needs the LSD."""
    if key_spans is None:
        if evaluator_model is None or evaluator_tokenizer is None:
            raise UsageError("compute_longppl needs evaluator_model and evaluator_tokenizer, or key_spans")
        key_spans = find_key_tokens(
            text, evaluator_model, evaluator_tokenizer, trunc_len, sliding_window, alpha, beta, short_start
        )
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    device = next(model.parameters()).device
    ids = torch.tensor([enc["input_ids"]], device=device)
    logprobs = score_tokens(model, ids, torch.ones_like(ids))[0].numpy()
    stats = document_stats(logprobs, enc["offset_mapping"], key_spans, gamma)
    return summarize(stats, n_token=len(enc["input_ids"]))
