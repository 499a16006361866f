"""Which request types our tasks send and which models serve them: the table that `lch eval` checks before
any model loads, held against the model classes and the task folder."""

import pytest

from harness.core.errors import UsageError
from harness.plugin.discovery import tasks_path
from harness.plugin.task_index import check_model_serves, served, task_request_types


def test_what_each_model_serves_is_what_its_class_answers():
    """A model serves a request type when lm-eval finds the method of that name on its class and, for the engine
    core's requests, the class supplies the primitives they need; lm-eval's own models serve lm-eval's types."""
    from harness.engines.core import EngineCore
    from harness.engines.registry import LM_EVAL_TYPES, models
    from harness.engines.requests import REQUESTS

    every_type = set(REQUESTS) | LM_EVAL_TYPES
    table = {entry.name: entry for entry in models()}
    assert set(table) == {"hf-pic", "vllm-pic", "compressor"}
    for entry in table.values():
        assert {t for t in every_type if callable(getattr(entry.cls, t, None))} >= set(entry.serves)
    assert table["hf-pic"].serves == table["vllm-pic"].serves == LM_EVAL_TYPES | set(EngineCore.NEEDS)
    assert table["compressor"].serves == LM_EVAL_TYPES | {"compress_ae", "compress_lm"}
    assert served("hf") == LM_EVAL_TYPES and served("no-such-model") is None


def test_request_types_of_our_tasks_and_groups():
    known = task_request_types(tasks_path())
    expected = {
        "ppl_govreport": {"token_logprobs"},
        "longppl_govreport": {"token_logprobs"},
        "lsm_govreport": {"lsm"},
        "longbench_write": {"generate_long"},
        "hellobench_htg_8k": {"generate_long"},
        "lch_ruler": {"generate_until"},
        "lch_ruler_niah_m": {"generate_until"},
        "lch_babilong": {"generate_until"},
        "mrqa": {"generate_until"},
        "compress_ae": {"compress_ae"},
        "compress_lm": {"compress_lm"},
    }
    assert {task: set(known[task]) for task in expected} == expected


@pytest.mark.parametrize(
    "model, task, message",
    [
        (
            "hf",
            "ppl_govreport",
            "ppl_govreport sends token_logprobs requests, which the hf model does not serve: use "
            "--model hf-pic or --model vllm-pic",
        ),
        (
            "vllm",
            "longbench_write",
            "longbench_write sends generate_long requests, which the vllm model does not serve: "
            "use --model hf-pic or --model vllm-pic",
        ),
        (
            "hf-pic",
            "compress_lm",
            "compress_lm sends compress_lm requests, which the hf-pic model does not serve: use --model compressor",
        ),
        (
            "compressor",
            "lsm_govreport",
            "lsm_govreport sends lsm requests, which the compressor model does not serve: use "
            "--model hf-pic or --model vllm-pic",
        ),
    ],
)
def test_unserved_requests_are_refused_naming_the_models_that_serve_them(model, task, message):
    with pytest.raises(UsageError) as err:
        check_model_serves(model, ["lch_ruler_niah_single_1", task], tasks_path())
    assert str(err.value) == message


def test_what_is_served_or_unknown_passes():
    for model in ("hf-pic", "vllm-pic"):
        check_model_serves(model, ["ppl_govreport", "lsm_govreport", "longbench_write", "lch_ruler"], tasks_path())
    check_model_serves("hf", ["lch_ruler", "mrqa", "arc_easy"], tasks_path())  # lm-eval's own types; not our task
    check_model_serves("some-plugin-model", ["ppl_govreport"], tasks_path())  # a model we do not know: lm-eval decides
    with pytest.raises(UsageError, match="data_parallel_size=1 only"):
        check_model_serves("vllm-pic", ["lsm_govreport"], tasks_path(), {"data_parallel_size": 2})


def test_scoring_on_a_gpu_leaves_room_for_the_pooling_engine(monkeypatch):
    """lsm and token_logprobs requests are answered from a pooling engine's hidden states beside the generating
    engine: both must fit on the GPU (token_logprobs under data parallelism come from prompt_logprobs)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for task, request_type in (("lsm_govreport", "lsm"), ("ppl_govreport", "token_logprobs")):
        with pytest.raises(
            UsageError,
            match=rf"^{task} sends {request_type} requests, for which vllm-pic starts a "
            r"second \(pooling\) engine on the same GPU: pass gpu_memory_utilization="
            r"0.45 \(or less\) in --model_args so that both fit \(now 0.9\)$",
        ):
            check_model_serves("vllm-pic", [task], tasks_path(), {})
        check_model_serves("vllm-pic", [task], tasks_path(), {"gpu_memory_utilization": "0.4"})
    check_model_serves("vllm-pic", ["ppl_govreport"], tasks_path(), {"data_parallel_size": 2})
    check_model_serves("vllm-pic", ["lch_ruler"], tasks_path(), {})  # generation only: one engine
