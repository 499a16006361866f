"""Compressor training (Table 8 loop) and the `compressor` lm-eval model: a tiny pretrain + fine-tune run
saves a checkpoint that `lch eval` evaluates under DPL and EPL on MRQA, compress_ae and compress_lm."""

from __future__ import annotations

import ast
import glob
import json
import math
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

from harness.compressor.model import Compressor, CompressorConfig
from harness.compressor.train import TrainSettings, pretrain_windows, train
from harness.metrics.qa import corpus_bleu4
from tests.conftest import SHARED_DATA
from tests.tasks.test_mrqa import rouge1_by_hand, squad_em_f1

BIN = Path(sys.executable).parent
SAMPLE = SHARED_DATA / "mrqa" / "NewsQA_sample.jsonl"


def test_windows_split_context_and_completion():
    settings = TrainSettings(min_length=6, max_length=9, seed=1)
    windows = pretrain_windows([list(range(100))], settings)
    for _ in range(20):
        context, completion = next(windows)
        size = len(context) + len(completion)
        assert 6 <= size <= 9 and len(context) == size // 2
        assert completion[0] == context[-1] + 1  # consecutive tokens of the text


def test_training_fits_a_text(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    comp = Compressor(base, CompressorConfig(chunk_size=8, n_memory=4, lora_r=4, lora_alpha=8, layout="epl"))
    text = [list(range(10, 42))]
    # AE only: reconstructing the context is what memory + LoRA can learn (the decoder is frozen)
    settings = TrainSettings(steps=60, batch_size=1, lr=1e-2, warmup=1, min_length=32, max_length=32, alpha=1.0)
    losses = train(comp, settings, pretrain_tokens=text, progress=False)
    assert losses[-1] < 0.6 * losses[0] and min(losses[-10:]) < min(losses[:10])


def bleu4_by_hand(pairs):
    """Corpus BLEU-4 x 100 as NLTK's corpus_bleu defines it (one reference, uniform weights, no smoothing),
    written out: clipped n-gram matches and n-gram counts summed over the corpus (each sentence counts at
    least 1 n-gram), geometric mean, brevity penalty exp(1 - r/c) when c <= r; 0 when an order has no match."""
    matches, totals, c, r = [0] * 4, [0] * 4, 0, 0
    for reference, prediction in pairs:
        ref, hyp = reference.split(), prediction.split()
        c, r = c + len(hyp), r + len(ref)
        for n in range(1, 5):
            grams = Counter(tuple(hyp[i : i + n]) for i in range(len(hyp) - n + 1))
            ref_grams = Counter(tuple(ref[i : i + n]) for i in range(len(ref) - n + 1))
            matches[n - 1] += sum((grams & ref_grams).values())
            totals[n - 1] += max(1, sum(grams.values()))
    if min(matches) == 0:
        return 0.0
    brevity = 1.0 if c > r else math.exp(1 - r / c)
    return 100.0 * brevity * math.exp(sum(math.log(m / t) for m, t in zip(matches, totals)) / 4)


def test_corpus_bleu4_hand_computed():
    assert corpus_bleu4([("a b c d e", "a b c d e")]) == pytest.approx(100.0)
    assert corpus_bleu4([("a b c d e f", "x y z w v u")]) == pytest.approx(0.0)
    # a partial match worked out by hand: 7 predicted tokens, matches 6/7 unigrams, 4/6 bigrams,
    # 2/5 trigrams, 1/4 4-grams, no brevity penalty (7 = 7)
    pairs = [("the cat sat on the mat today", "the cat sat on a mat today")]
    by_hand = 100 * (6 / 7 * 4 / 6 * 2 / 5 * 1 / 4) ** 0.25
    assert corpus_bleu4(pairs) == pytest.approx(by_hand) == pytest.approx(bleu4_by_hand(pairs))
    # corpus level: n-gram counts are pooled before the mean, and a short corpus pays the brevity penalty
    pairs = [("a b c d e f", "a b c d"), ("u v w x y", "u v w x y")]
    # c = 9, r = 11; matches 9/9, 7/7, 5/5, 3/3
    assert corpus_bleu4(pairs) == pytest.approx(100 * math.exp(1 - 11 / 9)) == pytest.approx(bleu4_by_hand(pairs))


@pytest.mark.skipif(not SAMPLE.exists(), reason="../shared/data not present")
def test_train_then_evaluate_under_dpl_and_epl(tiny_model_dir, tmp_path):
    common = [
        "--base",
        str(tiny_model_dir),
        "--chunk-size",
        "32",
        "--n-memory",
        "8",
        "--lora-r",
        "4",
        "--lora-alpha",
        "8",
        "--batch-size",
        "2",
        "--steps",
        "3",
        "--warmup",
        "1",
    ]
    subprocess.run(
        [
            str(BIN / "lch"),
            "train-compressor",
            *common,
            "--stage",
            "pretrain",
            "--output",
            str(tmp_path / "pre"),
            "--carrier",
            "500x",
            "--layout",
            "epl",
            "--min-length",
            "64",
            "--max-length",
            "128",
        ],
        check=True,
        capture_output=True,
    )
    saved = json.loads((tmp_path / "pre" / "compressor.json").read_text())
    assert (
        saved["carrier"] == "500x" and saved["layout"] == "epl" and saved["chunk_size"] == 32 and saved["n_memory"] == 8
    )
    assert (tmp_path / "pre" / "adapter_config.json").exists() and (
        tmp_path / "pre" / "compressor_embeddings.pt"
    ).exists()
    subprocess.run(
        [
            str(BIN / "lch"),
            "train-compressor",
            *common,
            "--stage",
            "finetune",
            "--init",
            str(tmp_path / "pre"),
            "--output",
            str(tmp_path / "ft"),
            "--mrqa-data",
            str(SAMPLE),
        ],
        check=True,
        capture_output=True,
    )
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.data.synthetic import synthetic_reports

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)  # completion = the text's tokens after the first half
    texts = synthetic_reports(2, 60, seed=0)
    sizes = [min(96, len(tok(t, add_special_tokens=False)["input_ids"])) for t in texts]
    expected_tokens = sum(n - n // 2 for n in sizes)
    for layout in ("dpl", "epl"):
        out = tmp_path / f"eval-{layout}"
        subprocess.run(
            [
                str(BIN / "lch"),
                "eval",
                "--model",
                "compressor",
                "--model_args",
                f"pretrained={tiny_model_dir},checkpoint={tmp_path / 'ft'},layout={layout},max_gen_toks=8",
                "--device",
                "cpu",
                "--tasks",
                "mrqa_newsqa,compress_ae,compress_lm",
                "--output_path",
                str(out),
                "--log_samples",
                "--metadata",
                json.dumps(
                    {"mrqa_data": str(SAMPLE), "limit_docs": 2, "num_docs": 2, "max_tokens": 96, "synthetic_words": 60}
                ),
            ],
            check=True,
            capture_output=True,
        )
        results = json.loads(Path(glob.glob(str(out / "**" / "results_*.json"), recursive=True)[0]).read_text())[
            "results"
        ]
        samples = {
            task: [
                json.loads(l)
                for l in Path(glob.glob(str(out / "**" / f"samples_{task}_*.jsonl"), recursive=True)[0])
                .read_text()
                .splitlines()
            ]
            for task in ("mrqa_newsqa", "compress_ae", "compress_lm")
        }
        # MRQA: every logged answer re-scored with the SQuAD / ROUGE-1 scorers written in test_mrqa
        answers = [(s["filtered_resps"][0].strip(), s["doc"]["answers"]) for s in samples["mrqa_newsqa"]]
        assert len(answers) == 2
        mrqa = results["mrqa_newsqa"]
        assert mrqa["em,none"] == pytest.approx(sum(squad_em_f1(p, g)[0] for p, g in answers) / 2)
        assert mrqa["f1,none"] == pytest.approx(sum(squad_em_f1(p, g)[1] for p, g in answers) / 2)
        assert mrqa["rouge1,none"] == pytest.approx(sum(rouge1_by_hand(p, g) for p, g in answers) / 2)
        # compress_ae / compress_lm recomputed directly: the saved checkpoint under this layout, each text's
        # first half (of its first 96 tokens) compressed, the reconstruction greedy, the completion scored
        base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
        comp = Compressor.load(base, tmp_path / "ft", layout=layout).eval()
        pairs, logprobs = [], []
        with torch.no_grad():
            for text in texts:
                ids = torch.tensor(tok(text, add_special_tokens=False)["input_ids"][:96])
                context, completion = ids[: len(ids) // 2], ids[len(ids) // 2 :]
                reconstruction = comp.generate(context, context[:0], len(context), task="ae")
                pairs.append((tok.decode(context.tolist()), tok.decode(reconstruction)))
                logprobs.append(comp.target_logprobs(comp.compress(context), "lm", completion[:0], completion).tolist())
        nll, n_tokens = -sum(sum(lp) for lp in logprobs), sum(len(lp) for lp in logprobs)
        # lm-eval logs each response as the str() of the dict the model returned
        logged = {
            task: {s["doc"]["doc_id"]: ast.literal_eval(s["filtered_resps"][0]) for s in samples[task]}
            for task in ("compress_ae", "compress_lm")
        }
        assert [
            (logged["compress_ae"][i]["reference"], logged["compress_ae"][i]["prediction"]) for i in range(2)
        ] == pairs
        for i in range(2):
            assert logged["compress_lm"][i]["logprobs"] == pytest.approx(logprobs[i], abs=1e-4)
        assert results["compress_ae"]["bleu4,none"] == pytest.approx(bleu4_by_hand(pairs), abs=1e-6)
        assert results["compress_ae"]["n_docs,none"] == 2
        assert results["compress_lm"]["n_tokens,none"] == n_tokens == expected_tokens
        assert results["compress_lm"]["ppl,none"] == pytest.approx(math.exp(nll / n_tokens), rel=1e-4)
