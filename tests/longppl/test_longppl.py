"""LongPPL pinned to hand-built cases, a straightforward re-implementation and the reference package."""

import math
import random

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from harness.data.synthetic import synthetic_reports
from harness.longppl.estimator import compute_longppl, find_key_tokens
from harness.longppl.formulas import (
    KeySettings,
    KeyTokens,
    document_stats,
    key_token_mask,
    merge_touching,
    select_key_tokens,
    short_windows,
    soft_token_weights,
    summarize,
)
from harness.longppl.keytokens import KeyTokenCache, key_tokens_for_texts
from harness.longppl.span_files import read_span_file, write_span_file
from harness.models.tiny import build_tiny_model

SETTINGS = dict(trunc_len=200, sliding_window=50, alpha=0.2, beta=-4.0)


@pytest.fixture(scope="module")
def models(tiny_model_dir):
    """Evaluator = the session's tiny Llama; evaluated = a tiny Llama with a different tokenizer."""
    other = build_tiny_model(vocab_size=300, train_steps=100, seed=3)
    load = lambda d: (AutoModelForCausalLM.from_pretrained(d).eval(), AutoTokenizer.from_pretrained(d))
    return load(tiny_model_dir), load(other)


@pytest.fixture(scope="module")
def text():
    return synthetic_reports(1, 450, seed=9)[0]


def test_windows_hand_computed():
    # n = 10, K = 4, d = 3: targets 4-6 and 7-9
    assert short_windows(10, 4, 3) == [(0, 7), (3, 10)]
    # n = 8: the last window is cut to one target (7)
    assert short_windows(8, 4, 3) == [(0, 7), (3, 8)]
    assert short_windows(4, 4, 3) == [] and short_windows(3, 4, 3) == []


def test_span_helpers_hand_computed():
    assert merge_touching([[0, 3], [3, 5], [7, 9], [9, 9], [10, 12]]) == [[0, 5], [7, 9], [10, 12]]
    offsets = [[0, 0], [0, 3], [3, 5], [5, 8], [8, 9], [9, 12]]
    assert key_token_mask(offsets, [[3, 8]]).tolist() == [False, False, True, True, False, False]
    # a token must lie entirely inside a span; overlapping spans still count as containing it
    assert key_token_mask(offsets, [[4, 9]]).tolist() == [False, False, False, True, True, False]
    assert key_token_mask(offsets, [[0, 12], [2, 4]]).tolist() == [True] * 6
    assert key_token_mask(offsets, []).tolist() == [False] * 6


def test_document_stats_hand_computed():
    offsets = [[0, 2], [2, 4], [4, 6], [6, 8]]
    logprobs = [math.log(0.5), math.log(0.25), math.log(0.125)]  # of tokens 1, 2, 3
    stats = document_stats(logprobs, offsets, [[2, 4], [6, 8]])
    assert stats["n_key"] == 2 and stats["n_scored"] == 3
    assert stats["key_nll_sum"] == pytest.approx(math.log(2) + math.log(8))
    out = summarize(stats)
    assert out["longppl"] == pytest.approx(4.0) and out["ppl"] == pytest.approx(4.0) and out["n_token"] == 4
    assert out["longppl_soft"] is None  # spans without LSD: no soft weights
    # the first token has no prediction and is never a key token
    assert document_stats(logprobs, offsets, [[0, 2]])["n_key"] == 0


def test_soft_weights_are_character_averages():
    # evaluator tokens: [0,4) no LSD (weight 1), [4,6) LSD ln 3 -> 3, [6,8) LSD 9 -> gamma 5
    key = KeyTokens([], offsets=[[0, 4], [4, 6], [6, 8]], lsd=[None, math.log(3.0), 9.0])
    weights = soft_token_weights([[0, 2], [2, 5], [5, 8]], key, gamma=5.0)
    assert weights.tolist() == pytest.approx([1.0, (1 + 1 + 3) / 3, (3 + 5 + 5) / 3])


def _per_character_soft_weights(offsets, key, gamma):
    """Eq. 10 spelled out: each character takes the weight of the last evaluator token over it (NaN weighs nothing),
    each evaluated token the numpy mean of its weighed characters (1 when none)."""
    length = max([e for _, e in key.offsets] + [e for _, e in offsets] + [0])
    char_w = np.full(length, np.nan)
    for (start, end), d in zip(key.offsets, key.lsd):
        char_w[start:end] = 1.0 if d is None else min(math.exp(min(d, 50.0)), gamma)
    weights = np.ones(len(offsets))
    for i, (start, end) in enumerate(offsets):
        covered = char_w[start:end]
        covered = covered[~np.isnan(covered)]
        if covered.size:
            weights[i] = covered.mean()
    return weights


def _random_spans(rng, n, width, repeat=0.1, gap=0.1):
    """``n`` token spans in text order: some empty, some repeating the one before (a character cut into byte
    tokens), gaps between some."""
    spans, pos = [], 0
    for _ in range(n):
        if spans and rng.random() < repeat:
            spans.append(list(spans[-1]))
            continue
        pos += rng.randint(1, 3) if rng.random() < gap else 0
        w = rng.randint(0, width)
        spans.append([pos, pos + w])
        pos += w
    return spans


def test_soft_weights_equal_the_per_character_definition_bit_for_bit():
    rng = random.Random(0)
    odd = [None, float("nan"), float("inf"), -float("inf"), 0.0]
    for _ in range(2000):
        evaluator = _random_spans(rng, rng.randint(1, 50), rng.choice([1, 3, 12, 40]))
        lsd = [rng.choice(odd) if rng.random() < 0.2 else rng.uniform(-3.0, 4.0) for _ in evaluator]
        same = rng.random() < 0.3  # the model its own evaluator: every token over characters of one weight
        evaluated = (
            [list(s) for s in evaluator] if same else _random_spans(rng, rng.randint(0, 50), rng.choice([1, 12]))
        )
        key = KeyTokens([], offsets=evaluator, lsd=lsd)
        expected = _per_character_soft_weights(evaluated, key, 5.0)
        for given in (evaluated, np.asarray(evaluated, dtype=np.int64).reshape(-1, 2)):
            assert np.array_equal(soft_token_weights(given, key, gamma=5.0), expected, equal_nan=True)
    assert soft_token_weights([[0, 2]], KeyTokens([[0, 2]]), gamma=5.0) is None  # spans read from files: no LSD


def test_key_token_selection_from_arrays_and_lists_alike():
    # K = 2: targets 2..4; LSD 3 - 1 = 2 (not > 2), 0.5 - (-2) = 2.5 (key), -1 - (-4) = 3 with LCL -1 > beta (key)
    offsets = [(0, 0), (0, 3), (3, 5), (5, 9), (9, 12)]
    expected = KeyTokens(
        [[5, 12]], [[0, 0], [0, 3], [3, 5], [5, 9], [9, 12]], [None, None, 2.0, 2.5, 3.0], [None, None, 3.0, 0.5, -1.0]
    )
    for long, short in (
        ([3.0, 0.5, -1.0], [1.0, -2.0, -4.0]),
        (np.array([3.0, 0.5, -1.0], np.float32), np.array([1.0, -2.0, -4.0], np.float32)),
    ):
        found = select_key_tokens(offsets, long, short, 2, alpha=2.0, beta=-2.0)
        assert found == expected and all(type(v) is float for v in found.lsd[2:] + found.lcl[2:])
    assert select_key_tokens(offsets, [], [], 7, 2.0, -2.0) == KeyTokens([], expected.offsets, [None] * 5, [None] * 5)


def _straightforward_key_positions(model, ids, trunc_len, sliding_window, alpha, beta):
    """Full-logit re-implementation: each target's short context spelled out explicitly."""
    with torch.no_grad():
        full = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)
        keys = []
        for t in range(trunc_len, len(ids)):
            start = ((t - trunc_len) // sliding_window) * sliding_window
            short = torch.log_softmax(model(torch.tensor([ids[start:t]])).logits[0, -1].float(), -1)
            lcl = full[t - 1, ids[t]].item()
            if lcl - short[ids[t]].item() > alpha and lcl > beta:
                keys.append(t)
    return keys


def test_key_tokens_match_straightforward_definition(models, text):
    (ev, ev_tok), _ = models
    ids = ev_tok(text)["input_ids"]
    expected = _straightforward_key_positions(ev, ids, **SETTINGS)
    assert len(expected) >= 3
    found = find_key_tokens(text, ev, ev_tok, **SETTINGS, batch_size=3)
    offsets = ev_tok(text, return_offsets_mapping=True)["offset_mapping"]
    assert found.spans == merge_touching([list(offsets[p]) for p in expected])
    assert all(v is None for v in found.lsd[: SETTINGS["trunc_len"]])


def test_matches_reference_package_across_tokenizers(models, text):
    ref = pytest.importorskip("longppl.longppl")
    (ev, ev_tok), (model, tok) = models
    assert tok("Agency")["input_ids"] != ev_tok("Agency")["input_ids"]  # really two tokenizers
    for settings in (SETTINGS, dict(trunc_len=128, sliding_window=32, alpha=0.05, beta=-5.0)):
        ours = compute_longppl(text, model, tok, ev, ev_tok, **settings)
        theirs = ref.compute_longppl(text, model, ev, tok, ev_tok, **settings)
        assert ours["n_key_token"] == theirs["n_key_token"] > 0 and ours["n_token"] == theirs["n_token"]
        assert ours["longppl"] == pytest.approx(float(theirs["longppl"]), rel=1e-4)
        assert ours["ppl"] == pytest.approx(float(theirs["ppl"]), rel=1e-4)
        ref_spans = ref.find_key_token(
            text,
            ev,
            ev_tok,
            settings["trunc_len"],
            settings["sliding_window"],
            None,
            settings["alpha"],
            settings["beta"],
        ).tolist()
        assert find_key_tokens(text, ev, ev_tok, **settings).spans == ref_spans


def test_document_shorter_than_trunc_len(models):
    (ev, ev_tok), (model, tok) = models
    short_text = "Section 1. The Agency reported that the program cost 5 million dollars."
    key = find_key_tokens(short_text, ev, ev_tok, trunc_len=4096)
    assert key.spans == [] and all(v is None for v in key.lsd)
    out = compute_longppl(short_text, model, tok, key_spans=key)
    assert out["longppl"] is None and out["n_key_token"] == 0 and out["ppl"] > 1


def test_key_token_progress_counts_window_passes(models, tmp_path, capsys):
    """The bar of "Finding key tokens" moves by the evaluator's passes over windows (a document of the default
    protocol is minutes of them), with a total known up front: 100 tokens, K 32, d 16: the long pass and short
    windows starting at 16, 32, 48, 64 (the one at 0 reuses the long pass) = 5; a text of K tokens or fewer: 1."""
    import torch

    from harness.longppl.estimator import passes

    (ev, ev_tok), _ = models
    assert passes(100, 32, 16) == 5 and passes(32, 32, 16) == 1 and passes(33, 32, 16) == 1 + 0
    ids = torch.randint(5, 200, (100,)).tolist()
    text = ev_tok.decode(ids)
    n = len(ev_tok(text)["input_ids"])
    told = []
    find_key_tokens(text, ev, ev_tok, trunc_len=32, sliding_window=16, batch_size=2, progress=told.append)
    assert sum(told) == passes(n, 32, 16) and len(told) > 2  # the long pass, then each forward of short windows
    key_tokens_for_texts(
        [text, text + " more"],
        (ev, ev_tok),
        KeySettings(trunc_len=32, sliding_window=16),
        cache=KeyTokenCache(tmp_path),
        evaluator_id="ev",
    )
    bar = capsys.readouterr().err.replace("\r", "\n").splitlines()
    last = [line for line in bar if line.startswith("Finding key tokens (2 documents)")][-1]
    total = passes(n, 32, 16) + passes(len(ev_tok(text + " more")["input_ids"]), 32, 16)
    assert f"{total}/{total} [" in last and "window/s" in last


def test_cache_second_run_runs_no_evaluator(models, tmp_path):
    (ev, ev_tok), _ = models
    texts = synthetic_reports(2, 200, seed=12)
    calls = []
    hook = ev.get_decoder().register_forward_pre_hook(lambda *a: calls.append(1))
    try:
        cache = KeyTokenCache(tmp_path)
        first = key_tokens_for_texts(texts, (ev, ev_tok), KeySettings(**SETTINGS), cache=cache, evaluator_id="ev")
        assert calls and len(list(tmp_path.glob("*.json"))) == 2
        calls.clear()
        loaded = []
        second = key_tokens_for_texts(
            texts,
            "never-loaded",
            KeySettings(**SETTINGS),
            cache=cache,
            evaluator_id="ev",
            loader=lambda name: loaded.append(name),
        )
        assert not calls and not loaded
        assert [k.to_json() for k in second] == [k.to_json() for k in first]
        # any setting change is a different key
        key_tokens_for_texts(
            texts[:1], (ev, ev_tok), KeySettings(**{**SETTINGS, "alpha": 0.6}), cache=cache, evaluator_id="ev"
        )
        assert calls
    finally:
        hook.remove()


def test_reference_span_files(tmp_path):
    (tmp_path / "0.txt").write_text("[12, 15];[20, 31]")
    assert read_span_file(tmp_path / "0.txt") == [[12, 15], [20, 31]]
    write_span_file(tmp_path / "1.txt", [[1, 2], [5, 9]])
    assert (tmp_path / "1.txt").read_text() == "[1, 2];[5, 9]"
    assert read_span_file(tmp_path / "1.txt") == [[1, 2], [5, 9]]


@pytest.mark.parametrize("short_start", ["text", "bos"])
def test_short_window_start_against_plain_forwards(models, text, short_start):
    """Every LSD equals LCL minus the log-prob of a plain forward over the token's short window: the slice
    ``ids[s:i]`` (``text``) or the tokenizer's BOS followed by it (``bos``), s the window that scores i."""
    (ev, ev_tok), _ = models
    keys = find_key_tokens(text, ev, ev_tok, **SETTINGS, short_start=short_start)
    ids = ev_tok(text)["input_ids"]
    bos = [ev_tok.bos_token_id] if short_start == "bos" else []
    K, d = SETTINGS["trunc_len"], SETTINGS["sliding_window"]
    with torch.no_grad():
        for i in range(K + d, len(ids), 37):  # a spread of targets past the first window
            start = (i - K) // d * d
            window = torch.tensor([bos + ids[start:i]])
            short = torch.log_softmax(ev(input_ids=window).logits[0, -1].float(), -1)[ids[i]].item()
            assert keys.lsd[i] == pytest.approx(keys.lcl[i] - short, abs=1e-4)


def test_short_start_bos_differs_and_is_cached_apart(models, text, tmp_path):
    (ev, ev_tok), _ = models
    found = {s: find_key_tokens(text, ev, ev_tok, **SETTINGS, short_start=s) for s in ("text", "bos")}
    assert found["text"].lcl == found["bos"].lcl and found["text"].lsd != found["bos"].lsd
    cache = KeyTokenCache(tmp_path)
    for s in ("text", "bos"):
        got = key_tokens_for_texts(
            [text], (ev, ev_tok), KeySettings(**SETTINGS, short_start=s), cache=cache, evaluator_id="ev"
        )
        assert got[0].lsd == found[s].lsd
    assert len(list(tmp_path.glob("*.json"))) == 2
    with pytest.raises(ValueError, match="short_start 'eos' is unknown; allowed: text, bos"):
        find_key_tokens(text, ev, ev_tok, **SETTINGS, short_start="eos")
