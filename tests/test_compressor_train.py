"""Compressor training (Table 8 loop) and the `compressor` lm-eval model: a tiny pretrain + fine-tune run
saves a checkpoint that `lch eval` evaluates under DPL and EPL on MRQA, compress_ae and compress_lm."""

from __future__ import annotations

import glob
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.metrics.qa import corpus_bleu4
from harness.models.compressor import Compressor, CompressorConfig
from harness.train.compressor import TrainSettings, pretrain_windows, train
from tests.conftest import SHARED_DATA

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


def test_corpus_bleu4_hand_computed():
    assert corpus_bleu4([("a b c d e", "a b c d e")]) == pytest.approx(100.0)
    assert corpus_bleu4([("a b c d e f", "x y z w v u")]) == pytest.approx(0.0)
    # a partial match: the NLTK definition itself
    from nltk.translate.bleu_score import corpus_bleu

    pairs = [("the cat sat on the mat today", "the cat sat on a mat today")]
    assert corpus_bleu4(pairs) == pytest.approx(100 * corpus_bleu([[pairs[0][0].split()]], [pairs[0][1].split()]))


@pytest.mark.skipif(not SAMPLE.exists(), reason="../shared/data not present")
def test_train_then_evaluate_under_dpl_and_epl(tiny_model_dir, tmp_path):
    common = ["--base", str(tiny_model_dir), "--chunk-size", "32", "--n-memory", "8", "--lora-r", "4", "--lora-alpha",
              "8", "--batch-size", "2", "--steps", "3", "--warmup", "1"]
    subprocess.run([str(BIN / "lch"), "train-compressor", *common, "--stage", "pretrain", "--output", str(tmp_path / "pre"),
                    "--carrier", "500x", "--layout", "epl", "--min-length", "64", "--max-length", "128"],
                   check=True, capture_output=True)
    saved = json.loads((tmp_path / "pre" / "compressor.json").read_text())
    assert saved["carrier"] == "500x" and saved["layout"] == "epl" and saved["chunk_size"] == 32 and saved["n_memory"] == 8
    assert (tmp_path / "pre" / "adapter_config.json").exists() and (tmp_path / "pre" / "compressor_embeddings.pt").exists()
    subprocess.run([str(BIN / "lch"), "train-compressor", *common, "--stage", "finetune", "--init", str(tmp_path / "pre"),
                    "--output", str(tmp_path / "ft"), "--mrqa-data", str(SAMPLE)], check=True, capture_output=True)
    from transformers import AutoTokenizer

    from harness.data.synthetic import synthetic_reports

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)  # completion = the text's tokens after the first half
    sizes = [min(96, len(tok(t, add_special_tokens=False)["input_ids"])) for t in synthetic_reports(2, 60, seed=0)]
    expected_tokens = sum(n - n // 2 for n in sizes)
    for layout in ("dpl", "epl"):
        out = tmp_path / f"eval-{layout}"
        subprocess.run([str(BIN / "lch"), "eval", "--model", "compressor", "--model_args",
                        f"pretrained={tiny_model_dir},checkpoint={tmp_path / 'ft'},layout={layout},max_gen_toks=8",
                        "--device", "cpu", "--tasks", "mrqa_newsqa,compress_ae,compress_lm", "--output_path", str(out), "--log_samples",
                        "--metadata", json.dumps({"mrqa_data": str(SAMPLE), "limit_docs": 2, "num_docs": 2,
                                                  "max_tokens": 96, "synthetic_words": 60})],
                       check=True, capture_output=True)
        results = json.loads(Path(glob.glob(str(out / "**" / "results_*.json"), recursive=True)[0]).read_text())["results"]
        assert {"em,none", "f1,none", "rouge1,none"} <= set(results["mrqa_newsqa"])
        assert 0 <= results["compress_ae"]["bleu4,none"] <= 100 and results["compress_ae"]["n_docs,none"] == 2
        assert results["compress_lm"]["ppl,none"] > 1 and results["compress_lm"]["n_tokens,none"] == expected_tokens
