"""A sweep file read into typed values and expanded into cells: checkpoint globs by step, adapters on their base,
one line for a bad key."""

from __future__ import annotations

import json

import pytest

from harness.core.errors import UsageError
from harness.sweep.spec import Cell, checkpoint_step, expand, load_spec, parse_spec


def test_a_checkpoint_glob_expands_by_training_step_and_every_variant(tmp_path):
    for step in (1000, 200, 30):
        (tmp_path / "run" / f"checkpoint-{step}").mkdir(parents=True)
    (tmp_path / "base").mkdir()
    spec = parse_spec(
        {
            "models": [str(tmp_path / "run" / "checkpoint-*"), str(tmp_path / "base")],
            "model_args": {"dtype": "float32"},
            "variants": {"v": {}, "ntk4": {"pic": "ntk", "pic_ratio": 4}},
            "tasks": ["ppl_govreport", "lch_ruler_niah_single_1"],
            "lengths": [4096, "8k"],
            "metadata": {"num_samples": 5},
            "lm_eval": {"batch_size": 2, "apply_chat_template": True},
        },
        "test",
    )
    cells = expand(spec)
    assert [(c.label, c.step) for c in cells] == [
        ("run/checkpoint-30 v", 30),
        ("run/checkpoint-30 ntk4", 30),
        ("run/checkpoint-200 v", 200),
        ("run/checkpoint-200 ntk4", 200),
        ("run/checkpoint-1000 v", 1000),
        ("run/checkpoint-1000 ntk4", 1000),
        ("base v", None),
        ("base ntk4", None),
    ]
    ntk = cells[1]
    assert ntk.model_args == {
        "pretrained": str(tmp_path / "run" / "checkpoint-30"),
        "dtype": "float32",
        "pic": "ntk",
        "pic_ratio": 4,
    }
    assert ntk.metadata == {"num_samples": 5, "lengths": [4096, "8k"]}
    assert ntk.argv() == [
        "--model",
        "hf-pic",
        "--model_args",
        f"pretrained={tmp_path / 'run' / 'checkpoint-30'},dtype=float32,pic=ntk,pic_ratio=4",
        "--tasks",
        "ppl_govreport,lch_ruler_niah_single_1",
        "--metadata",
        '{"lengths": [4096, "8k"], "num_samples": 5}',
        "--batch_size",
        "2",
        "--apply_chat_template",
    ]


def test_an_adapter_checkpoint_rides_on_its_base_model(tmp_path):
    adapter = tmp_path / "checkpoint-50"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "/models/base"}))
    (cell,) = expand(parse_spec({"models": [str(adapter)], "tasks": ["ppl_govreport"]}, "t"))
    assert cell == Cell(
        f"{tmp_path.name}/checkpoint-50",
        str(adapter),
        "base",
        "hf-pic",
        {"pretrained": "/models/base", "peft": str(adapter)},
        ("ppl_govreport",),
        {},
        {},
        50,
    )


def test_a_step_is_read_from_the_trainer_state_where_the_name_has_none(tmp_path):
    (tmp_path / "final").mkdir()
    (tmp_path / "final" / "trainer_state.json").write_text(json.dumps({"global_step": 777}))
    assert checkpoint_step(tmp_path / "final") == 777
    assert checkpoint_step(tmp_path / "step_12") == 12
    assert checkpoint_step(tmp_path) is None


@pytest.mark.parametrize(
    "data, message",
    [
        ({"models": ["m"], "tasks": ["t"], "variant": {}}, "sweep.yaml: variant: Extra inputs are not permitted"),
        ({"models": [], "tasks": ["t"]}, "sweep.yaml: models: List should have at least 1 item"),
        (
            {"models": ["m"], "tasks": ["t"], "engine": "hf"},
            "sweep.yaml: engine: Input should be 'hf-pic' or 'vllm-pic'",
        ),
        (
            {"models": ["m"], "tasks": ["t"], "variants": {}},
            "sweep.yaml: variants: Value error, needs at least one variant",
        ),
        (
            {"models": ["m"], "tasks": ["t"], "resources": {"retries": -1}},
            "sweep.yaml: resources.retries: Input should be greater than or equal to 0",
        ),
    ],
)
def test_a_bad_key_is_one_line_naming_it(tmp_path, data, message):
    path = tmp_path / "sweep.yaml"
    path.write_text(json.dumps(data))
    with pytest.raises(UsageError) as err:
        load_spec(path)
    assert str(err.value).startswith(message.replace("sweep.yaml", str(path)))
    assert "\n" not in str(err.value)


def test_a_glob_matching_nothing_and_a_model_listed_twice_are_refused(tmp_path):
    with pytest.raises(UsageError, match="matches no folder"):
        expand(parse_spec({"models": [str(tmp_path / "nothing-*")], "tasks": ["t"]}, "t"), "t")
    with pytest.raises(UsageError, match="two cells are both 'm'"):
        expand(parse_spec({"models": ["m", "m"], "tasks": ["t"]}, "t"), "t")
