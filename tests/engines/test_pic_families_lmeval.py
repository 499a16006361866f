"""``hf-pic`` on every RoPE family, through lm-eval: a PPL task and a RULER task per family, under Dynamic
PIC, on random-init tiny models (2 layers, hidden 64) saved with a tiny tokenizer.

The PPL is recomputed here, document by document, from the reference forward of
tests/pic/test_pic_families.py (the never-patched model at explicit Eq. 9 positions, fp32 log-softmax
of its full logits): independent of hf-pic's batching, padding and chunked scoring.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from harness.models.tiny import ARCHITECTURES, build_tiny_model
from harness.pic.positions import dynamic_positions
from tests.pic.test_pic_families import reference_logits

PIC = {"pic": "dynamic", "pic_ratio": 2.0, "pic_initial": 4, "pic_recent": 32}


@pytest.fixture(scope="module")
def manager(tmp_path_factory):
    from harness.data.synthetic import synthetic_reports
    from harness.plugin.in_process import task_manager

    folder = tmp_path_factory.mktemp("family-docs")
    docs = folder / "reports.jsonl"
    docs.write_text("".join(json.dumps({"report": t}) + "\n" for t in synthetic_reports(3, 90, seed=4)))
    # every family's tiny model has the same tokenizer (trained from the same seed): RULER sizes prompts by it
    metadata = {
        "data_files": str(docs),
        "min_tokens": 32,
        "max_tokens": 4096,
        "num_docs": 3,
        "lengths": [512],
        "num_samples": 2,
        "source": "synthetic",
        "tokenizer": str(build_tiny_model()),
    }
    return task_manager(metadata=metadata, ours_only=True)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_hf_pic_runs_ppl_and_ruler_on_every_family(arch, manager):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.plugin.in_process import evaluate

    folder = build_tiny_model(arch=arch)
    assert (folder / "tokenizer.json").read_bytes() == (build_tiny_model() / "tokenizer.json").read_bytes()
    results = evaluate(
        {"pretrained": str(folder), "dtype": "float32", "device": "cpu", **PIC},
        ["ppl_govreport", "lch_ruler_niah_single_1"],
        manager,
        batch_size=2,
        log_samples=True,
        gen_kwargs={"max_gen_toks": 8},
    )
    info = results["config"]["model_args"]
    assert info["pic"] == "dynamic"

    plain = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    total, count = 0.0, 0
    samples = results["samples"]["ppl_govreport"]
    assert len(samples) == 3
    for sample in samples:
        ids = torch.tensor([tokenizer(sample["doc"]["text"])["input_ids"]])
        n = ids.shape[1]
        g = dynamic_positions(torch.arange(n)[None], n, PIC["pic_ratio"], PIC["pic_initial"], PIC["pic_recent"])
        logits = reference_logits(plain, ids, torch.ones_like(ids), g)[0, :-1].float()
        total += torch.log_softmax(logits, -1).gather(-1, ids[0, 1:, None]).sum().item()
        count += n - 1
    ppl = results["results"]["ppl_govreport"]
    assert ppl["n_tokens,none"] == count
    assert ppl["ppl,none"] == pytest.approx(math.exp(-total / count), rel=1e-4)

    ruler = results["samples"]["lch_ruler_niah_single_1"]
    assert len(ruler) == 2
    for sample in ruler:  # a random model finds no needle; the rule is still applied sample by sample
        output = sample["filtered_resps"][0].strip().lower()
        expected = 100.0 * sum(r.lower() in output for r in sample["doc"]["outputs"]) / len(sample["doc"]["outputs"])
        assert sample["score"] == expected
        assert sample["prompt_tokens"] <= 512 - 128  # the answer budget of niah is 128 tokens
