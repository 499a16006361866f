"""vllm-pic: PIC as vLLM config overrides (pure, CPU) and its import guard."""

import importlib.util

import pytest

from harness.lmeval.vllm_pic import VLLMPicLM, rope_parameters, vllm_pic_overrides

V5_CONFIG = {"model_type": "llama", "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}}
V4_CONFIG = {"model_type": "llama", "rope_theta": 10000.0, "rope_scaling": None}


def test_naive_is_linear_scaling_by_s_cr():
    assert vllm_pic_overrides(V5_CONFIG, "naive", 4.0) == {
        "rope_parameters": {"rope_type": "linear", "rope_theta": 500000.0, "factor": 4.0}
    }


def test_ntk_multiplies_the_base():
    assert vllm_pic_overrides(V4_CONFIG, "ntk", 16.0) == {
        "rope_parameters": {"rope_type": "default", "rope_theta": 160000.0}
    }
    llama3 = {"rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0}}
    assert vllm_pic_overrides(llama3, "ntk", 2.0)["rope_parameters"] == {
        "rope_type": "llama3", "rope_theta": 1000000.0, "factor": 8.0
    }


def test_errors():
    assert vllm_pic_overrides(V5_CONFIG, "none", 1.0) == {}
    with pytest.raises(ValueError, match="hf-pic"):
        vllm_pic_overrides(V5_CONFIG, "dynamic", 2.0)
    with pytest.raises(ValueError, match="ratio must be > 0"):
        vllm_pic_overrides(V5_CONFIG, "naive", 0.0)
    with pytest.raises(ValueError, match="plain RoPE"):
        vllm_pic_overrides({"rope_scaling": {"type": "linear", "factor": 2.0}}, "naive", 2.0)
    assert rope_parameters({"rope_scaling": {"type": "linear", "factor": 2.0}})["rope_type"] == "linear"


def test_dynamic_points_to_hf_pic(tiny_model_dir):
    with pytest.raises(ValueError, match="use --model hf-pic"):
        VLLMPicLM(pretrained=str(tiny_model_dir), pic="dynamic", pic_ratio=2.0)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM installed")
def test_without_vllm_the_error_names_the_extra(tiny_model_dir):
    with pytest.raises(ImportError, match=r"\[vllm\]"):
        VLLMPicLM(pretrained=str(tiny_model_dir), pic="naive", pic_ratio=2.0)
