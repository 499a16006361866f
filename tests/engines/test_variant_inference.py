"""A trained variant is evaluated with the inference it was trained for: ``hf-pic`` reads the adapter's
``lch_variant.json``, explicit model args override it with a warning, and the results record it."""

from __future__ import annotations

import glob
import json
import logging
import random
from pathlib import Path

import pytest

from harness.cli import main
from harness.data.synthetic import synthetic_reports
from harness.engines.hf_pic import HFPicLM
from harness.pic.hf import Inference, pic_settings, rope_base
from harness.train.config import TrainConfig
from harness.train.trainer import train_recipe


@pytest.fixture(scope="module")
def adapters(tiny_model_dir, tmp_path_factory):
    """A Dynamic PIC-SFT adapter (s_cr 2, l_ic 4, l_rc 16) and a LongRecipe one (RoPE base 40000), one step each."""
    root = tmp_path_factory.mktemp("variants")
    rng = random.Random(1)
    words = "the agency reviewed funding and costs of each program in the report".split()
    text = lambda n: " ".join(rng.choice(words) for _ in range(n)) + "."  # noqa: E731
    (root / "inst.jsonl").write_text(
        "".join(json.dumps({"instruction": f"Report {i}.", "response": text(80)}) + "\n" for i in range(4))
    )
    (root / "texts.jsonl").write_text(
        "".join(json.dumps({"text": " ".join(text(9) for _ in range(20))}) + "\n" for _ in range(3))
    )
    common = dict(model=str(tiny_model_dir), max_steps=1, heldout=0.0, progress=False, lr=1e-2)
    train_recipe(
        TrainConfig.for_recipe(
            recipe="pic-sft",
            data=str(root / "inst.jsonl"),
            output=str(root / "dyn"),
            pic="dynamic",
            pic_ratio=2.0,
            pic_initial=4,
            pic_recent=16,
            segment_length=32,
            **common,
        )
    )
    train_recipe(
        TrainConfig.for_recipe(
            recipe="longrecipe",
            data=str(root / "texts.jsonl"),
            output=str(root / "lr"),
            target_length=1024,
            rope_base=40000.0,
            **common,
        )
    )
    return root


def test_variant_file_sets_the_inference_and_args_override_it(tiny_model_dir, adapters, caplog):
    lm = HFPicLM(pretrained=str(tiny_model_dir), peft=str(adapters / "dyn"), device="cpu")
    assert pic_settings(lm.model) == Inference("dynamic", 2.0, 4, 16, "paper", impl="cached")
    assert lm.get_model_info()["lch_evaluated_as"] == "Dynamic PIC-SFT (s_cr 2, l_ic 4, l_rc 16)"

    with caplog.at_level(logging.WARNING, logger="harness.engines.core"):
        plain = HFPicLM(pretrained=str(tiny_model_dir), peft=str(adapters / "dyn"), pic="none", device="cpu")
    assert pic_settings(plain.model) is None  # the paper's standard inference of a PIC-SFT model
    assert plain.get_model_info()["lch_evaluated_as"] == (
        "Dynamic PIC-SFT (s_cr 2, l_ic 4, l_rc 16), evaluated with standard inference"
    )
    assert [r.getMessage() for r in caplog.records if r.name == "harness.engines.core"] == [
        f"model_arg pic=none (variant: dynamic) overrides the variant file of {adapters / 'dyn'} "
        "(Dynamic PIC-SFT (s_cr 2, l_ic 4, l_rc 16))"
    ]

    other = HFPicLM(pretrained=str(tiny_model_dir), peft=str(adapters / "dyn"), pic_ratio="3", device="cpu")
    assert pic_settings(other.model) == Inference("dynamic", 3.0, 4, 16, "paper", impl="cached")  # one key overridden

    longrecipe = HFPicLM(pretrained=str(tiny_model_dir), peft=str(adapters / "lr"), device="cpu")
    assert rope_base(longrecipe.model) == 40000.0 and pic_settings(longrecipe.model) is None


def _ppl_run(tiny_model_dir, docs: Path, out: Path, model_args: str) -> dict:
    meta = {"data_files": str(docs), "min_tokens": 60, "max_tokens": 120, "num_docs": 2}
    assert (
        main(
            [
                "eval",
                "--model",
                "hf-pic",
                "--model_args",
                f"pretrained={tiny_model_dir},{model_args}",
                "--device",
                "cpu",
                "--tasks",
                "ppl_govreport",
                "--metadata",
                json.dumps(meta),
                "--output_path",
                str(out),
            ]
        )
        == 0
    )
    files = glob.glob(str(out / "**" / "results_*.json"), recursive=True)
    assert len(files) == 1
    return json.loads(Path(files[0]).read_text())


def test_lch_eval_applies_and_records_the_variant(tiny_model_dir, adapters, tmp_path):
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"report": t}) + "\n" for t in synthetic_reports(2, 150, seed=3)))
    adapter = adapters / "dyn"
    auto = _ppl_run(tiny_model_dir, docs, tmp_path / "auto", f"peft={adapter}")
    explicit = _ppl_run(
        tiny_model_dir,
        docs,
        tmp_path / "explicit",
        f"peft={adapter},pic=dynamic,pic_ratio=2,pic_initial=4,pic_recent=16",
    )
    plain = _ppl_run(tiny_model_dir, docs, tmp_path / "plain", f"peft={adapter},pic=none")
    ppl = lambda r: r["results"]["ppl_govreport"]["ppl,none"]  # noqa: E731
    assert ppl(auto) == ppl(explicit) != ppl(plain)
    config = auto["config"]
    assert config["lch_evaluated_as"] == "Dynamic PIC-SFT (s_cr 2, l_ic 4, l_rc 16)"
    assert {k: config["lch_inference"][k] for k in ("pic", "pic_ratio", "pic_initial", "pic_recent")} == {
        "pic": "dynamic",
        "pic_ratio": 2.0,
        "pic_initial": 4,
        "pic_recent": 16,
    }
    assert config["lch_variant"]["recipe"] == "pic-sft"
    assert plain["config"]["lch_inference"]["pic"] == "none"
    # the run record: what actually ran (lm-eval's own "device" says cuda:0 unless told; ours is the model's)
    saved = json.loads((Path(tiny_model_dir) / "config.json").read_text())
    record = config["lch_run"]
    assert {k: record[k] for k in ("engine", "dtype", "device", "max_length", "architecture")} == {
        "engine": "hf-pic",
        "dtype": "float32",
        "device": "cpu",
        "max_length": str(saved["max_position_embeddings"]),
        "architecture": f"LlamaForCausalLM ({saved['num_hidden_layers']} layers, hidden {saved['hidden_size']}, "
        f"vocab {saved['vocab_size']})",
    }
    assert record["inference"] == "Dynamic PIC (s_cr 2, l_ic 4, l_rc 16)" != plain["config"]["lch_run"]["inference"]
    assert record["model"].startswith("sha256:") and record["adapter"].startswith("sha256:")
    assert record["chat_template"] == "none"  # lch eval without --apply_chat_template: none applied, said so
    # what each metric is, for the regression gate: the perplexity, and bookkeeping that describes the run
    assert auto["configs"]["ppl_govreport"]["metadata"]["lch_metric_roles"] == {
        "ppl": "perplexity",
        "n_tokens": "bookkeeping",
        "n_docs": "bookkeeping",
        "docs_skipped": "bookkeeping",
        "over_length": "bookkeeping",
    }
    # what the task measured with (the regression gate compares it): the options in effect, files by their names
    metadata = auto["configs"]["ppl_govreport"]["metadata"]
    assert metadata["lch_configuration"] == {
        "version": 1.0,
        "data_files": "docs.jsonl",
        "text_field": "report",
        "min_tokens": 60,
        "max_tokens": 120,
        "num_docs": 2,
    }
    # what the perplexity rests on: the 2 documents asked for, all found, so the results carry no caution
    assert metadata["lch_support"] == [
        {
            "metric": "ppl",
            "count": "n_docs",
            "minimum": 2,
            "items": "documents",
            "why": "fewer long-enough documents were found than num_docs asked for, so it is not the corpus asked for",
        }
    ]
    assert auto["lch_cautions"] == {}
    assert (
        main(["leaderboard", str(tmp_path / "auto"), str(tmp_path / "plain"), "-o", str(tmp_path / "board.csv")]) == 0
    )
    board = (tmp_path / "board.csv").read_text()
    assert "Dynamic PIC-SFT (s_cr 2, l_ic 4, l_rc 16)," in board and "evaluated with standard inference" in board


def test_vllm_takes_a_dynamic_variant(adapters, tiny_model_dir, tmp_path):
    """A Dynamic PIC-SFT checkpoint on vllm-pic resolves to Dynamic PIC, which vLLM runs on any architecture it
    builds natively (checked before vLLM is imported); an engine arg that contradicts what it needs, or RoPE it
    cannot follow, is one line."""
    import json
    import shutil

    from harness.core.errors import UsageError
    from harness.engines.model_args import check_hf_pic_args, check_pic_on_vllm

    resolved = check_hf_pic_args({"pretrained": str(tiny_model_dir), "peft": str(adapters / "dyn")})
    assert resolved.inference.method == "dynamic"
    check_pic_on_vllm(resolved, {"pretrained": str(tiny_model_dir)})
    with pytest.raises(UsageError, match=r"pic=dynamic on vLLM needs enable_prefix_caching=False"):
        check_pic_on_vllm(resolved, {"pretrained": str(tiny_model_dir), "enable_prefix_caching": True})
    alien = tmp_path / "alien"
    shutil.copytree(tiny_model_dir, alien)
    config = json.loads((alien / "config.json").read_text())
    (alien / "config.json").write_text(json.dumps({**config, "architectures": ["Qwen2ForCausalLM"]}))
    check_pic_on_vllm(check_hf_pic_args({"pretrained": str(alien), "pic": "dynamic"}), {"pretrained": str(alien)})
    (alien / "config.json").write_text(json.dumps({**config, "rope_parameters": {"rope_type": "yarn", "factor": 4.0}}))
    with pytest.raises(UsageError, match=r"this LlamaForCausalLM uses 'yarn' RoPE: use --model hf-pic"):
        check_pic_on_vllm(check_hf_pic_args({"pretrained": str(alien), "pic": "dynamic"}), {"pretrained": str(alien)})
    check_pic_on_vllm(check_hf_pic_args({"pretrained": str(alien), "pic": "none"}), {"pretrained": str(alien)})
