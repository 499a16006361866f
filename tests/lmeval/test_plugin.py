"""Registration with lm-eval: our models next to, never instead of, the built-in ones."""

from importlib.metadata import entry_points

from lm_eval.api.registry import get_model
from lm_eval.models.huggingface import HFLM

from harness.lmeval.hf_pic import HFPicLM
from harness.lmeval.plugin import register
from harness.lmeval.vllm_pic import VLLMPicLM


def test_register_adds_our_models_and_keeps_builtins():
    register()
    register()  # idempotent
    assert get_model("hf-pic") is HFPicLM and issubclass(HFPicLM, HFLM)
    assert get_model("vllm-pic") is VLLMPicLM
    assert get_model("hf") is HFLM


def test_entry_points_are_declared_for_plugin_aware_lm_eval():
    declared = {ep.name: ep.value for ep in entry_points(group="lm_eval.models")}
    assert declared["hf-pic"] == "harness.lmeval.hf_pic:HFPicLM"
    assert declared["vllm-pic"] == "harness.lmeval.vllm_pic:VLLMPicLM"


def test_task_folder_is_declared_for_lm_evals_task_plugins():
    """The installed distribution declares ``lm_eval.tasks`` -> a callable returning our task folder."""
    from importlib.metadata import entry_points
    from pathlib import Path

    (point,) = [p for p in entry_points(group="lm_eval.tasks") if p.name == "lch"]
    folder = Path(point.load()())
    assert (folder / "longppl_govreport" / "longppl_govreport.yaml").is_file()
