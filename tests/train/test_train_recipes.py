"""``lch train`` recipes on the tiny model: the positions the model sees while training (captured at the
rotary embedding and compared with RoPE computed here from the formulas), the Dynamic PIC-SFT split,
held-out loss going down, the variant file, resuming, and merging."""

from __future__ import annotations

import json
import random

import pytest
import torch

from harness.cli import main
from harness.core.errors import UsageError
from harness.pic.variants import read_variant
from harness.train import trainer as train_run
from harness.train.config import TrainConfig
from harness.train.trainer import train_recipe

WORDS = (
    "the agency said funding rose while costs fell and new rules apply to every program in the report "
    "committee members reviewed budgets schedules and risks"
).split()


def _sentence(rng: random.Random, n: int = 9) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    rng = random.Random(0)
    root = tmp_path_factory.mktemp("train-data")
    rows = [
        {"instruction": f"Write report {i} on the program.", "response": " ".join(_sentence(rng) for _ in range(14))}
        for i in range(10)
    ]
    texts = [{"text": " ".join(_sentence(rng) for _ in range(40))} for _ in range(6)]
    (root / "inst.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "texts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in texts))
    return root


def _rope(positions: torch.Tensor, base: float, dim: int) -> torch.Tensor:
    """cos of HF's RoPE at ``positions`` [T] (frequencies base^(-2j/d), the two halves repeated)."""
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    angles = positions.double()[:, None] * inv_freq[None]
    return torch.cat([angles, angles], dim=-1).cos()


RECIPES = {  # name -> (cfg overrides, data file)
    "sft": ({"recipe": "sft"}, "inst.jsonl"),
    "naive": ({"recipe": "pic-sft", "pic": "naive", "pic_ratio": 2.0}, "inst.jsonl"),
    "ntk": ({"recipe": "pic-sft", "pic": "ntk", "pic_ratio": 4.0}, "inst.jsonl"),
    "dynamic": (
        {
            "recipe": "pic-sft",
            "pic": "dynamic",
            "pic_ratio": 2.0,
            "pic_initial": 4,
            "pic_recent": 16,
            "segment_length": 32,
        },
        "inst.jsonl",
    ),
    "longce": ({"recipe": "longce", "seq_len": 128, "short_context": 48, "sliding_window": 16}, "texts.jsonl"),
    "lsm-reg": ({"recipe": "lsm-reg", "context_length": 64}, "texts.jsonl"),
    "longrecipe": (
        {"recipe": "longrecipe", "target_length": 2048, "rope_base": 40000.0, "train_length": 120},
        "texts.jsonl",
    ),
}


def _config(tiny_model_dir, data, tmp_path, name, **extra) -> TrainConfig:
    overrides, data_file = RECIPES[name]
    return TrainConfig.for_recipe(
        model=str(tiny_model_dir),
        data=str(data / data_file),
        output=str(tmp_path / name),
        progress=False,
        **{**overrides, **extra},
    )


@pytest.mark.parametrize("name", list(RECIPES))
def test_positions_seen_while_training(tiny_model_dir, data, tmp_path, monkeypatch, name):
    """One optimiser step; every rotation applied in training mode (the ``(cos, sin)`` the attention layers
    hand to the model's ``apply_rotary_pos_emb``; for LongRecipe also the position ids the rotary embedding
    is called with) is checked against the formula."""
    from transformers.models.llama import modeling_llama

    calls, applied = [], []
    load = train_run.load_model
    rotate = modeling_llama.apply_rotary_pos_emb

    def watch_rotation(q, k, cos, sin, *args, **kwargs):
        if torch.is_grad_enabled():  # the training step (the held-out loss runs without gradients)
            applied.append(cos.detach().double())
        return rotate(q, k, cos, sin, *args, **kwargs)

    monkeypatch.setattr(modeling_llama, "apply_rotary_pos_emb", watch_rotation)

    def load_and_watch(cfg):
        model, tokenizer = load(cfg)

        def hook(module, args, kwargs, output):
            if module.training:
                ids = args[1] if len(args) > 1 else kwargs["position_ids"]
                calls.append((args[0].numel() == 0, ids.detach().clone(), output[0].detach().double()))

        model.get_decoder().rotary_emb.register_forward_hook(hook, with_kwargs=True)
        return model, tokenizer

    monkeypatch.setattr(train_run, "load_model", load_and_watch)
    cfg = _config(tiny_model_dir, data, tmp_path, name, max_steps=1, heldout=0.0)
    train_recipe(cfg)
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(tiny_model_dir)
    base, dim = float(config.rope_parameters["rope_theta"]), config.hidden_size // config.num_attention_heads
    layers = config.num_hidden_layers
    assert calls and applied
    if name == "longrecipe":  # skip positions, at the LongRecipe base, as the rotary embedding is called
        for _, ids, cos in calls:
            pos = ids[0].double()
            steps = pos[1:] - pos[:-1]
            assert pos[0] == 0 and pos[-1] < 2048
            assert bool(((steps == 1) | (steps >= 2)).all()) and int((steps >= 2).sum()) >= 2  # sentences skip ahead
            torch.testing.assert_close(cos[0], _rope(pos, 40000.0, dim), atol=1e-5, rtol=0)
        assert len(applied) == layers * len(calls)
        return
    for cos in applied:
        n = cos.shape[1]
        m = torch.arange(n, dtype=torch.float64)
        expected = {
            "naive": (m / 2.0, base),
            "ntk": (m, base * 4.0),
            # Eq. 9, l_c = the example's whole length: the middle compressed by 2
            "dynamic": (torch.where((m >= 4) & (m < n - 16), m / 2.0, m), base),
        }.get(name, (m, base))
        torch.testing.assert_close(cos[0], _rope(expected[0], expected[1], dim), atol=1e-5, rtol=0)
    if name == "dynamic":  # one training forward, every layer at the same g_{l_c}, with a compressed middle
        assert len(applied) == layers and applied[0].shape[1] > 4 + 16
    if name == "lsm-reg":  # one forward of window A (its CE and distributions) and one of window B, each at 0 .. L-1
        assert [c.shape[1] for c in applied] == [64] * (2 * layers)


def test_dynamic_split_examples_are_prefixes_with_the_loss_on_one_segment(tiny_model_dir, data):
    from transformers import AutoTokenizer

    from harness.train.examples import dynamic_sft_examples, encode_instruction

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    row = json.loads((data / "inst.jsonl").read_text().splitlines()[0])
    prompt, answer = encode_instruction(tokenizer, row, "row 0", chat_template=False)
    examples = dynamic_sft_examples(prompt, answer, 32)
    full = prompt + answer
    assert len(examples) == -(-len(answer) // 32)
    covered = []
    for ex in examples:
        assert ex["input_ids"] == full[: len(ex["input_ids"])]  # input = prompt + the answer before the segment
        targets = [i for i, m in enumerate(ex["loss_mask"]) if m]
        assert targets == list(range(targets[0], len(ex["input_ids"])))  # the segment ends the example
        covered += targets
    assert covered == list(range(len(prompt), len(full)))  # the segments tile the answer, last one = 32 tokens
    assert sum(examples[-1]["loss_mask"]) == 32


@pytest.mark.parametrize("name", ["dynamic", "ntk", "longce", "lsm-reg", "longrecipe"])
def test_recipe_lowers_heldout_loss_and_saves_its_variant(tiny_model_dir, data, tmp_path, name, capsys):
    overrides, data_file = RECIPES[name]
    argv = [
        "train",
        overrides["recipe"],
        "--model",
        str(tiny_model_dir),
        "--data",
        str(data / data_file),
        "--output",
        str(tmp_path / name),
        "--max-steps",
        "8",
        "--lr",
        "3e-3",
        "--warmup",
        "0",
        "--heldout",
        "0.2",
        "--save-steps",
        "4",
        "--quiet",
    ]
    for key, value in overrides.items():
        if key != "recipe":
            argv += [f"--{key.replace('_', '-')}", str(value)]
    assert main(argv) == 0
    out = tmp_path / name
    summary = json.loads((out / "training_summary.json").read_text())
    assert summary["steps"] == 8 and summary["heldout_examples"] >= 1
    assert summary["heldout_loss_after"] < summary["heldout_loss_before"]
    assert len((out / "loss_log.jsonl").read_text().splitlines()) == 8
    variant = read_variant(out)
    assert variant.base_model == str(tiny_model_dir) and variant == read_variant(out / "checkpoint-8")
    expected = {
        "dynamic": ("pic-sft", {"pic": "dynamic", "pic_ratio": 2.0, "pic_initial": 4, "pic_recent": 16}),
        "ntk": ("pic-sft", {"pic": "ntk", "pic_ratio": 4.0}),
        "longce": ("longce", {"pic": "none"}),
        "lsm-reg": ("lsm-reg", {"pic": "none"}),
        "longrecipe": ("longrecipe", {"pic": "none", "rope_base": 40000.0}),
    }[name]
    assert variant.recipe == expected[0]
    assert {k: variant.inference.to_variant_json()[k] for k in expected[1]} == expected[1]
    assert variant.settings["lr"] == 3e-3 and variant.settings["max_steps"] == 8
    assert (out / "adapter_model.safetensors").is_file()
    printed = capsys.readouterr()
    assert f"held-out loss {summary['heldout_loss_before']:.4f} -> {summary['heldout_loss_after']:.4f}" in printed.out
    assert summary["warning"] is None and "warning" not in printed.err


def test_a_diverging_run_says_so(tiny_model_dir, data, tmp_path, capsys):
    """A checkpoint whose held-out loss rose 61-fold (1.82 -> 111 was seen) was saved without a word: the summary
    and stderr now say that the training diverged."""
    from harness.train.heldout import heldout_warning

    assert heldout_warning(1.82, 111.0) == (
        "the held-out loss rose from 1.82 to 111 (x61): the training diverged; "
        "lower --lr or raise --warmup before using this checkpoint"
    )
    assert heldout_warning(2.0, 2.9) is None and heldout_warning(2.0, 3.01) is not None  # the line: 1.5 x before
    assert "is nan after training" in heldout_warning(2.0, float("nan"))
    assert heldout_warning(None, 3.0) is None  # no held-out rows
    argv = [
        "train",
        "sft",
        "--model",
        str(tiny_model_dir),
        "--data",
        str(data / RECIPES["sft"][1]),
        "--output",
        str(tmp_path / "wild"),
        "--max-steps",
        "6",
        "--lr",
        "1e30",
        "--warmup",
        "0",
        "--heldout",
        "0.2",
        "--quiet",
    ]
    capsys.readouterr()
    assert main(argv) == 2  # lr 1e30: the weights overflow, the held-out loss is no number: nothing usable is kept
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("lch: error: the held-out loss is nan after training") and last.endswith("is not kept)")
    assert not (tmp_path / "wild").exists()


def test_resume_continues_from_the_last_checkpoint(tiny_model_dir, data, tmp_path):
    first = _config(tiny_model_dir, data, tmp_path, "sft", max_steps=2, save_steps=2, lr=3e-3, heldout=0.0)
    train_recipe(first)
    with pytest.raises(UsageError, match="holds an earlier training run: add --resume"):
        train_recipe(_config(tiny_model_dir, data, tmp_path, "sft", max_steps=4, heldout=0.0))
    summary = train_recipe(
        _config(tiny_model_dir, data, tmp_path, "sft", max_steps=4, save_steps=2, lr=3e-3, heldout=0.0, resume=True)
    )
    assert summary["steps"] == 4
    steps = [json.loads(line)["step"] for line in (tmp_path / "sft" / "loss_log.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4]  # steps 1-2 from the first run, 3-4 after resuming from checkpoint-2


def test_merge_halves_the_adapter_and_averages_full_weights(tiny_model_dir, data, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    adapter = tmp_path / "longrecipe"
    train_recipe(_config(tiny_model_dir, data, tmp_path, "longrecipe", max_steps=3, lr=1e-2, heldout=0.0))
    assert (
        main(
            ["train", "merge", "--base", str(tiny_model_dir), "--tuned", str(adapter), "--output", str(tmp_path / "m1")]
        )
        == 0
    )
    assert (
        main(
            [
                "train",
                "merge",
                "--base",
                str(tiny_model_dir),
                "--tuned",
                str(adapter),
                "--output",
                str(tmp_path / "m2"),
                "--weights",
                "0.4",
                "0.7",
            ]
        )
        == 0
    )
    load = lambda: AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)  # noqa: E731
    original = load().state_dict()
    tuned = PeftModel.from_pretrained(load(), str(adapter)).merge_and_unload().state_dict()
    x = torch.tensor([[1, 5, 9, 13, 17, 21]])
    for folder, (l1, l2) in (("m1", (0.5, 0.5)), ("m2", (0.4, 0.7))):  # m2: weights not summing to 1
        reference = load()
        reference.load_state_dict({k: l1 * original[k] + l2 * tuned[k] for k in original})
        merged_dir = tmp_path / folder
        merged = (
            PeftModel.from_pretrained(load(), str(merged_dir))
            if (merged_dir / "adapter_config.json").exists()
            else AutoModelForCausalLM.from_pretrained(merged_dir, dtype=torch.float32)
        )
        with torch.no_grad():
            torch.testing.assert_close(merged(x).logits, reference(x).logits, atol=1e-5, rtol=1e-5)
        variant = read_variant(merged_dir)
        assert variant.recipe == "longrecipe" and variant.inference.rope_base == 40000.0
        assert variant.settings["merged"]["weights"] == [l1, l2]
    assert (tmp_path / "m1" / "adapter_config.json").exists() and not (tmp_path / "m2" / "adapter_config.json").exists()


# The variant file's `settings` of each recipe, as `lch train` wrote them before the recipes had one config
# class each (pinned: a record must not change when options move between classes).
_TRAINING = {
    "data": "hf/ds",
    "max_length": None,
    "heldout": 0.1,
    "max_steps": -1,
    "batch_size": 1,
    "grad_accum": 1,
    "seed": 0,
    "dtype": "float32",
}
_LORA = {"full": False, "lora_r": 8, "lora_alpha": 16, "lora_targets": "q_proj,k_proj,v_proj,o_proj"}
_INSTRUCTIONS = {"chat_template": True, "prompt_field": "instruction", "response_field": "response"}
SETTINGS = {  # name -> (options, recipe after check_config, settings)
    "sft": (
        {"recipe": "sft"},
        "sft",
        {**_TRAINING, **_LORA, **_INSTRUCTIONS, "lr": 5e-05, "warmup": 0.1, "epochs": 3.0, "weight_decay": 0.0},
    ),
    "pic-sft-none": (
        {"recipe": "pic-sft"},
        "sft",
        {**_TRAINING, **_LORA, **_INSTRUCTIONS, "lr": 5e-05, "warmup": 0.1, "epochs": 3.0, "weight_decay": 0.0},
    ),
    "pic-sft-dynamic": (
        {"recipe": "pic-sft", "pic": "dynamic", "segment_length": 64},
        "pic-sft",
        {
            **_TRAINING,
            **_LORA,
            **_INSTRUCTIONS,
            "segment_length": 64,
            "lr": 5e-05,
            "warmup": 0.1,
            "epochs": 3.0,
            "weight_decay": 0.0,
        },
    ),
    "sft-ntk-full": (
        {"recipe": "sft", "pic": "ntk", "full": True},
        "pic-sft",
        {**_TRAINING, "full": True, **_INSTRUCTIONS, "lr": 5e-05, "warmup": 0.1, "epochs": 3.0, "weight_decay": 0.0},
    ),
    "longce": (
        {"recipe": "longce", "seq_len": 128, "lr": 1e-3},
        "longce",
        {
            **_TRAINING,
            **_LORA,
            "seq_len": 128,
            "gamma": 5.0,
            "short_context": 4096,
            "sliding_window": 1024,
            "lr": 0.001,
            "warmup": 20,
            "epochs": 1.0,
            "weight_decay": 0.0,
        },
    ),
    "lsm-reg": (
        {"recipe": "lsm-reg", "context_length": 64},
        "lsm-reg",
        {
            **_TRAINING,
            **_LORA,
            "lam": 0.1,
            "context_length": 64,
            "delta": 16,
            "lr": 2e-05,
            "warmup": 20,
            "epochs": 1.0,
            "weight_decay": 0.0,
        },
    ),
    "longrecipe": (
        {"recipe": "longrecipe", "target_length": 2048, "rope_base": 40000.0},
        "longrecipe",
        {
            **_TRAINING,
            **_LORA,
            "stage": "extend",
            "target_length": 2048,
            "train_length": None,
            "max_skip": None,
            "top_fraction": 0.2,
            "extended_model": None,
            "lr": 5e-05,
            "warmup": 0.1,
            "epochs": 1.0,
            "weight_decay": 0.0,
        },
    ),
    "longrecipe-replay": (
        {"recipe": "longrecipe", "stage": "replay", "init": "adapter", "rope_base": 40000.0},
        "longrecipe",
        {
            **_TRAINING,
            **_LORA,
            "stage": "replay",
            "seq_len": 1024,
            "lr": 5e-06,
            "warmup": 0.1,
            "epochs": 1.0,
            "weight_decay": 0.1,
        },
    ),
}


@pytest.mark.parametrize("name", list(SETTINGS))
def test_variant_settings_of_each_recipe_are_unchanged(name):
    from harness.train.config import check_config

    options, recipe, settings = SETTINGS[name]
    cfg = check_config(TrainConfig.for_recipe(model="m", data="hf/ds", output="o", **options))
    assert cfg.recipe == recipe and cfg.settings() == settings


def test_an_option_of_another_recipe_or_an_unknown_recipe_is_refused():
    with pytest.raises(UsageError, match=r"^--stage is not an option of `lch train sft`$"):
        TrainConfig.for_recipe("sft", model="m", data="d", output="o", stage="replay")
    with pytest.raises(
        UsageError, match=r"^recipe 'longsft' is unknown; allowed: sft, pic-sft, longce, lsm-reg, longrecipe$"
    ):
        TrainConfig.for_recipe("longsft", model="m", data="d", output="o")
    with pytest.raises(TypeError, match="is LongCEConfig: build it with TrainConfig.for_recipe"):
        TrainConfig(recipe="longce", model="m", data="d", output="o")
