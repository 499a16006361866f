"""vllm-pic on a real vLLM: every request type, against hf-pic and against plain HF forwards.

vLLM runs in its own environment (the ``vllm_env`` fixture: this interpreter where vLLM is installed, else
the CPU build from ``lch vllm-env``, built once per machine), so each vLLM step here is a subprocess of
that environment's ``lch``; hf-pic, the references and ``lch agree`` run in this one. The model is the
real SmolLM2-135M-Instruct (fp32, greedy); data are synthetic reports and hand-written LongBench-Write
rows, so nothing outside the repository is needed.

Tolerances: HF and vLLM run different kernels, so log-probabilities differ by reduction order (observed
at most 7e-5 per token on these texts, 1e-5 relative on a task's PPL); greedy texts are equal token for
token (observed on every sample), which a 1e-3 log-prob margin cannot flip except at a near-tie.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.data.synthetic import synthetic_reports

TASKS = [
    "ppl_govreport",
    "longppl_govreport",
    "lsm_govreport",
    "lch_ruler_niah_single_1",
    "lch_babilong_qa1",
    "longbench_write",
]
LBW_ROWS = [
    {"prompt": "Write a 100-word note to a neighbour about a lost cat.", "type": "Community Forum", "length": 100},
    {
        "prompt": "Write a 120-word description of a river at dawn.",
        "type": "Literature and Creative Writing",
        "length": 120,
    },
]
PROBE = """
import json, sys
from types import SimpleNamespace as R
if __name__ == "__main__":  # vLLM spawns workers: build engines under this guard
    from harness.engines.vllm_pic.lm import VLLMPicLM
    model, text_file, prompts = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    lm = VLLMPicLM(pretrained=model, dtype="float32", enforce_eager=True, max_model_len=256, pic="naive", pic_ratio=2.0)
    text = open(text_file).read()
    out = {
        "token_logprobs": lm.token_logprobs([R(args=(text, {"add_special_tokens": False, "max_tokens": 600}))]),
        "generate_long": lm.generate_long([R(args=(p, {"max_gen_toks": n})) for p, n in prompts]),
        "lsm": lm.lsm(
            [R(args=(text, {"context_length": 64, "n_samples": 3, "estimator": "direct", "max_tokens": 600}))]
        ),
    }
    print("RESULT " + json.dumps(out))
"""


def run(command: list[str], env: dict | None = None, timeout: int = 900) -> subprocess.CompletedProcess:
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)
    assert done.returncode == 0, f"{command[:4]} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done


def write_corpus(folder: Path) -> Path:
    docs = folder / "docs.jsonl"
    docs.write_text("".join(json.dumps({"text": t}) + "\n" for t in synthetic_reports(2, 450, seed=5)))
    return docs


def results_of(folder: Path) -> dict:
    return json.loads(next(folder.rglob("results_*.json")).read_text())


@pytest.fixture(scope="module")
def engine_runs(vllm_env, smollm2_dir, tmp_path_factory):
    """One run per engine of every kind of task on SmolLM2 under NTK-aware PIC (s_rr 4), same metadata."""
    tmp = tmp_path_factory.mktemp("engines")
    docs, lbw = write_corpus(tmp), tmp / "lbw.jsonl"
    lbw.write_text("".join(json.dumps(r) + "\n" for r in LBW_ROWS))
    keys = tmp / "keys"
    key_settings = {"trunc_len": 256, "sliding_window": 128, "alpha": 0.5, "beta": -4.0}
    run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "keytokens",
            "--evaluator",
            str(smollm2_dir),
            "--data-files",
            str(docs),
            "--text-field",
            "text",
            "--min-tokens",
            "300",
            "--max-tokens",
            "600",
            "--num-docs",
            "2",
            "--trunc-len",
            "256",
            "--sliding-window",
            "128",
            "--alpha",
            "0.5",
            "--beta",
            "-4",
            "--cache-dir",
            str(keys),
        ]
    )
    meta = {
        "data_files": str(docs),
        "text_field": "text",
        "min_tokens": 300,
        "max_tokens": 600,
        "num_docs": 2,
        "evaluator": str(smollm2_dir),
        "key_cache_dir": str(keys),
        **key_settings,
        "context_length": 128,
        "n_samples": 2,
        "lengths": [1024],
        "num_samples": 2,
        "essays": "synthetic",
        "source": "synthetic",
        "chat_template": True,
        "longbench_write_data": str(lbw),
        "min_required_length": 0,
        "max_gen_toks": 48,
    }
    common = ["--tasks", ",".join(TASKS), "--metadata", json.dumps(meta), "--apply_chat_template", "--log_samples"]
    base = f"pretrained={smollm2_dir},dtype=float32,pic=ntk,pic_ratio=4"
    out = {"hf": tmp / "hf", "vllm": tmp / "vllm"}
    # 960 tokens: the templated 1k RULER / BABILong prompts do not fit with their budgets, so the tasks cut them
    # (truncation middle, the default) before either engine sees them
    run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "eval",
            "--model",
            "hf-pic",
            "--model_args",
            f"{base},max_length=960",
            "--device",
            "cpu",
            "--output_path",
            str(out["hf"]),
            *common,
        ]
    )
    run(
        vllm_env.command(
            "eval",
            "--model",
            "vllm-pic",
            "--model_args",
            f"{base},max_model_len=960,enforce_eager=True",
            "--output_path",
            str(out["vllm"]),
            *common,
        ),
        env=vllm_env.environ(),
    )
    return out


def test_vllm_pic_serves_every_request_type_and_agrees_with_hf_pic(engine_runs, tmp_path):
    """`lch agree` over the two runs: every task agrees (exit 0); greedy texts identical (RULER, BABILong
    and long-form generation), token log-probs within 1e-3 and PPL / LongPPL within 1e-4 relative."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "agree",
            str(engine_runs["hf"]),
            str(engine_runs["vllm"]),
            "-o",
            str(tmp_path / "agree"),
        ],
        capture_output=True,
        text=True,
    )
    report = json.loads((tmp_path / "agree.json").read_text())
    assert done.returncode == 0, done.stdout[-3000:]
    assert report["agrees"] and (tmp_path / "agree.md").read_text().startswith("# Agreement of two runs: agree")
    tasks = {t["task"]: t for t in report["tasks"]}
    assert sorted(tasks) == sorted(TASKS)
    for task in ("lch_ruler_niah_single_1", "lch_babilong_qa1", "longbench_write"):
        assert tasks[task]["exact_match"] == 1.0 and tasks[task]["n_paired"] == 2
    for task in ("ppl_govreport", "longppl_govreport"):
        assert tasks[task]["n_paired"] == 2 and tasks[task]["token_mismatch"] == 0
        assert tasks[task]["max_logprob_diff"] < 1e-3
    assert tasks["longppl_govreport"]["metrics"]["n_key_tokens"]["a"] > 0  # LongPPL rests on key tokens
    for name in ("ppl_nobos", "longppl"):
        assert tasks["longppl_govreport"]["metrics"][name]["rel"] < 1e-4
    assert tasks["ppl_govreport"]["metrics"]["ppl"]["rel"] < 1e-4
    assert tasks["lsm_govreport"]["max_value_diff"] < 1e-3
    vllm = results_of(engine_runs["vllm"])
    assert vllm["config"]["model"] == "vllm-pic" and "NTK-aware PIC" in vllm["config"]["lch_evaluated_as"]


def test_both_engines_are_sent_the_same_cut_prompts(engine_runs):
    """The over-long prompts are cut by the task (truncation middle), not by either engine: each run counts the same
    cuts, every prompt sent is the same text on both engines, and each keeps its document's instruction and question
    (the text outside the document's ``context_span``) whole, in order."""
    hf, vllm = results_of(engine_runs["hf"]), results_of(engine_runs["vllm"])
    for task in ("lch_ruler_niah_single_1", "lch_babilong_qa1"):
        assert hf["results"][task]["n_truncated,none"] == vllm["results"][task]["n_truncated,none"] > 0
        assert hf["results"][task]["n_truncated_tokens,none"] == vllm["results"][task]["n_truncated_tokens,none"]
        prompts = {}
        for name, folder in engine_runs.items():
            rows = [json.loads(line) for line in next(folder.rglob(f"samples_{task}_*.jsonl")).read_text().splitlines()]
            prompts[name] = {row["doc_id"]: row["arguments"] for row in rows}
            for row in rows:
                text = row["doc"]["prompt" if task.startswith("lch_babilong") else "input"]
                start, end = row["doc"]["context_span"]
                sent = row["arguments"]["gen_args_0"]["arg_0"]  # lm-eval's samples file spells the request so
                assert text[:start] in sent and text[end:] in sent, (name, task)
                assert sent.index(text[:start]) + start <= sent.rindex(text[end:]), (name, task)
        assert prompts["hf"] == prompts["vllm"] and len(prompts["hf"]) == 2


def test_vllm_token_logprobs_equal_plain_forwards(engine_runs, smollm2):
    """The vLLM run's per-token log-probabilities of the first document equal a plain HF forward's fp32
    log-softmax under NTK-aware PIC (RoPE base x 4, set here by hand), independently of hf-pic."""
    from transformers import AutoModelForCausalLM

    model, _ = smollm2
    config = model.config.to_dict()
    config["rope_parameters"] = {**config["rope_parameters"], "rope_theta": config["rope_parameters"]["rope_theta"] * 4}
    ntk = AutoModelForCausalLM.from_config(type(model.config).from_dict(config), dtype=torch.float32).eval()
    ntk.load_state_dict(model.state_dict())
    sample = json.loads(next(engine_runs["vllm"].rglob("samples_ppl_govreport_*.jsonl")).read_text().splitlines()[0])
    import ast

    response = ast.literal_eval(sample["resps"][0][0])
    ids = torch.tensor([response["token_ids"]])
    with torch.no_grad():
        expected = torch.log_softmax(ntk(input_ids=ids).logits[0, :-1].float(), -1).gather(-1, ids[0, 1:, None])[:, 0]
    assert len(response["logprobs"]) == ids.shape[1] - 1 > 300
    assert (torch.tensor(response["logprobs"]) - expected).abs().max().item() < 1e-3


def test_windows_generation_and_lsm_against_hf(vllm_env, smollm2_dir, smollm2, tmp_path):
    """vllm-pic built directly (naive PIC s_cr 2, max_model_len 256): a 600-token text is scored in windows of 255
    tokens advancing by 127, each equal to a plain HF forward over its window; greedy ``generate_long`` equals HF
    ``generate`` token for token, ending with EOS (``ended_with_eos``, EOS not counted in ``n_tokens``) or
    with the budget; direct-estimator LSM equals hf-pic's estimator on the same draws."""
    from harness import apply_pic, remove_pic
    from harness.engines.windows import scoring_windows
    from harness.lsm.estimator import lsm_direct

    model, tokenizer = smollm2
    text = tmp_path / "text.txt"
    text.write_text(" ".join(synthetic_reports(2, 400, seed=9)))
    chat = lambda q: tokenizer.apply_chat_template(
        [{"role": "user", "content": q}],
        tokenize=False,  # noqa: E731
        add_generation_prompt=True,
    )
    prompts = [[chat("What is the capital of France?"), 40], [chat("Write a story about a dragon."), 12]]
    done = run(
        [str(vllm_env.python), "-c", PROBE, str(smollm2_dir), str(text), json.dumps(prompts)], env=vllm_env.environ()
    )
    got = json.loads(next(l for l in done.stdout.splitlines() if l.startswith("RESULT "))[len("RESULT ") :])
    try:
        apply_pic(model, "naive", ratio=2.0)
        scored = got["token_logprobs"][0]
        ids = scored["token_ids"]
        assert len(ids) == 600 and len(scored["logprobs"]) == 599
        expected = []
        for w in scoring_windows(600, 255):
            assert w.stop - w.start <= 255
            window = torch.tensor([ids[w.start : w.stop]])
            with torch.no_grad():
                logprobs = torch.log_softmax(model(input_ids=window).logits[0].float(), -1)
            expected += [logprobs[t - w.start - 1, ids[t]].item() for t in range(w.first_target, w.stop)]
        assert max(abs(a - b) for a, b in zip(expected, scored["logprobs"])) < 1e-3
        eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
        for (prompt, budget), response in zip(prompts, got["generate_long"]):
            enc = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
            with torch.no_grad():
                out = model.generate(**enc, max_new_tokens=budget, do_sample=False)[
                    0, enc["input_ids"].shape[1] :
                ].tolist()
            ended = eos in out or tokenizer.eos_token_id in out
            tokens = out[: next((i for i, t in enumerate(out) if t in (eos, tokenizer.eos_token_id)), len(out))]
            assert response == {
                "text": tokenizer.decode(tokens, skip_special_tokens=True),
                "ended_with_eos": ended,
                "n_tokens": len(tokens),
            }
        assert [r["ended_with_eos"] for r in got["generate_long"]] == [True, False]  # one EOS, one budget end
        ids_t = torch.tensor(ids)
        assert got["lsm"][0]["sce"] == pytest.approx(lsm_direct(model, ids_t, 64, 3, seed=0), abs=1e-4)
    finally:
        remove_pic(model)


BAD_INPUT = """
import contextlib, io, json, sys
if __name__ == "__main__":
    from harness.cli import main
    out = []
    for argv in json.loads(sys.argv[1]):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = main(argv)
        out.append({"code": code, "stderr": err.getvalue()})
    print("RESULT " + json.dumps(out))
"""


def test_bad_vllm_input_is_one_line_before_the_model_loads(vllm_env, smollm2_dir, tmp_path):
    """Bad vllm-pic input in the vLLM environment (one process, so vLLM is imported once): exit 2, one
    `lch: error:` line that names the problem, no traceback, no results written."""
    import re
    import shutil

    model = str(smollm2_dir)
    alien, olmo, damaged, empty = tmp_path / "alien", tmp_path / "olmo", tmp_path / "damaged", tmp_path / "empty"
    for folder in (alien, olmo, damaged, empty):
        folder.mkdir()
    config = json.loads((smollm2_dir / "config.json").read_text())
    for folder, arch in ((alien, "NotAModelForCausalLM"), (olmo, "Olmo2ForCausalLM")):
        (folder / "config.json").write_text(json.dumps({**config, "architectures": [arch]}))
        for name in (
            "model.safetensors",
            "tokenizer.json",
            "tokenizer_config.json",
        ):  # complete but for its architecture
            (folder / name).symlink_to(smollm2_dir / name)
    shutil.copy(smollm2_dir / "config.json", damaged / "config.json")
    (damaged / "model.safetensors").write_bytes((smollm2_dir / "model.safetensors").read_bytes()[:100_000])
    ruler = json.dumps({"lengths": [1024], "num_samples": 1, "essays": "synthetic"})
    lsm = json.dumps({"data_files": str(write_corpus(tmp_path)), "text_field": "text", "min_tokens": 300})

    def case(model_args: str, tasks: str = "lch_ruler_niah_single_1", metadata: str = ruler, name: str = "vllm-pic"):
        return [
            "eval",
            "--model",
            name,
            "--model_args",
            model_args,
            "--tasks",
            tasks,
            "--metadata",
            metadata,
            "--output_path",
            str(tmp_path / "out"),
        ]

    cases = [
        (case(f"pretrained={model},bogus_arg=1"), r"^lch: error: vllm-pic: unknown model arg bogus_arg$"),
        (
            case(f"pretrained={model},max_model_lenn=4096"),
            r"vllm-pic: unknown model arg max_model_lenn; did you mean "
            r"max_model_len\?",
        ),
        (
            case(f"pretrained={model},pic=naive,pic_impl=reference"),
            r"unknown model arg pic_impl \(hf-pic's Algorithm-1 "
            r"oracle\): use --model hf-pic",
        ),
        (
            case(f"pretrained={model},pic=dynamic,pic_ratio=2,enable_prefix_caching=True"),
            r"pic=dynamic on vLLM needs enable_prefix_caching=False",
        ),
        (
            case(f"pretrained={olmo},pic=dynamic,pic_ratio=2"),
            r"PIC on vLLM: vLLM runs Olmo2ForCausalLM through its "
            r"Transformers backend .*; use --model hf-pic$",
        ),
        (
            case(f"pretrained={alien}"),
            r"vLLM cannot load .*alien: its architecture NotAModelForCausalLM is not one this "
            r"vLLM supports; use --model hf-pic",
        ),
        (
            case(f"pretrained={damaged}"),
            r"damaged/model.safetensors is not a readable safetensors file .*fetch or save",
        ),
        (case(f"pretrained={empty}"), r"empty has no config.json: give pretrained= a model folder"),
        (
            case(f"pretrained={model},data_parallel_size=2", "lsm_govreport", lsm),
            r"lsm_govreport sends lsm requests, which vllm-pic serves with data_parallel_size=1 only",
        ),
        (
            case(f"pretrained={model},max_model_len=100000,enforce_eager=True"),
            r"vLLM refused the engine args \(ModelConfig\): User-specified max_model_len \(100000\) is greater",
        ),
        (
            case(f"pretrained={model}", "ppl_govreport", lsm, name="vllm"),
            r"ppl_govreport sends token_logprobs requests, which the vllm model does not serve: use --model hf-pic or "
            r"--model vllm-pic",
        ),
    ]
    done = run([str(vllm_env.python), "-c", BAD_INPUT, json.dumps([argv for argv, _ in cases])], env=vllm_env.environ())
    got = json.loads(next(l for l in done.stdout.splitlines() if l.startswith("RESULT "))[len("RESULT ") :])
    failures = []
    for (argv, pattern), outcome in zip(cases, got):
        lines = [l for l in outcome["stderr"].splitlines() if l.startswith("lch: error: ")]
        if (
            outcome["code"] != 2
            or len(lines) != 1
            or not re.search(pattern, lines[0])
            or "Traceback" in outcome["stderr"]
        ):
            failures.append(f"{argv[4]}: exit {outcome['code']}, {lines or outcome['stderr'][-600:]}")
    assert not failures, "\n".join(failures)
    assert not list((tmp_path / "out").rglob("results_*.json"))
