"""One name per run: the labeller every report uses, on runs of each kind a results file can hold."""

from __future__ import annotations

from pathlib import Path

from harness.reporting.labels import RunName, distinct_labels, name_from_results, name_of, split_shared, unique_labels


def test_a_run_is_named_by_what_was_evaluated_and_how():
    # what hf-pic records wins over the model args (a checkpoint's variant file applied Dynamic PIC-SFT)
    recorded = name_of(
        "hf-pic", {"pretrained": "/m/Llama-3.1-8B", "peft": "/ck/dyn-sft"}, "Dynamic PIC-SFT (s_cr 2, l_ic 4, l_rc 600)"
    )
    assert recorded == RunName("dyn-sft", "Dynamic PIC-SFT (s_cr 2, l_ic 4, l_rc 600)")
    assert recorded.text == "dyn-sft · Dynamic PIC-SFT (s_cr 2, l_ic 4, l_rc 600)"
    # no record: the words of the inference the args ask for; a model run as is is the base model, an adapter run
    # as is is not
    assert name_of("hf-pic", {"pretrained": "/m/SmolLM2", "pic": "none"}).text == "SmolLM2 · base model"
    assert name_of("hf", {"pretrained": "/m/SmolLM2", "peft": "/ck/sft"}).text == "sft · standard inference"
    assert (
        name_of("hf-pic", {"pretrained": "/m/SmolLM2", "pic": "ntk", "pic_ratio": 4}).text
        == "SmolLM2 · NTK-aware PIC (s_rr 4)"
    )
    # the applied inference (lch_inference) wins over the args
    assert (
        name_of("hf-pic", {"pretrained": "/m/q"}, applied={"pic": "naive", "pic_ratio": 2}).variant
        == "Naive PIC (s_cr 2)"
    )
    # other args that tell configurations apart are named; where the model is and how it runs are not
    assert (
        name_of(
            "compressor",
            {"checkpoint": "/c/epl-500x", "epl_layout": "upl", "dtype": "bfloat16", "device": "cuda", "batch_size": 4},
        ).text
        == "epl-500x · standard inference · epl_layout=upl"
    )
    # lm-eval's class name when no path was given
    assert name_of("dummy", {}).text == "dummy · base model"


def test_runs_shown_together_share_a_title_and_differ_in_their_labels():
    names = [
        RunName("SmolLM2", "base model"),
        RunName("SmolLM2", "Naive PIC (s_cr 2)"),
        RunName("SmolLM2", "Dynamic PIC (s_cr 2, l_ic 4, l_rc 200)"),
    ]
    assert distinct_labels(names) == (
        "SmolLM2",
        ["base model", "Naive PIC (s_cr 2)", "Dynamic PIC (s_cr 2, l_ic 4, l_rc 200)"],
    )
    # two models under one setting: the setting is the title
    assert distinct_labels([RunName("SmolLM2", "base model"), RunName("gemma3", "base model")]) == (
        "base model",
        ["SmolLM2", "gemma3"],
    )
    # a single run keeps its whole name and no title
    assert distinct_labels([RunName("SmolLM2", "base model")]) == ("", ["SmolLM2 · base model"])
    # equal names are told apart by their results folders, else by a count: never two equal labels
    twins = [RunName("SmolLM2", "base model")] * 2
    assert distinct_labels(twins, [Path("runs/cpu/results_1.json"), Path("runs/cuda/results_2.json")]) == (
        "SmolLM2",
        ["base model (cpu)", "base model (cuda)"],
    )
    assert unique_labels(["a", "a", "b"]) == ["a (1)", "a (2)", "b"]
    assert split_shared(["x · y", "x · z"]) == ("x", ["y", "z"])


def test_a_results_object_is_named_as_a_run_read_from_its_file():
    data = {
        "config": {
            "model": "vllm-pic",
            "model_args": "pretrained=/m/gemma3-270m,dtype=float32",
            "lch_evaluated_as": "base model",
        }
    }
    assert name_from_results(data).text == "gemma3-270m · base model"
