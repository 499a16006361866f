"""The lm-eval integration as a user meets it: `lch eval`, plain `lm_eval` (accelerate: test_data_parallel.py)."""

import argparse
import glob
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.cli import main
from harness.data.synthetic import synthetic_reports
from harness.pic.positions import dynamic_positions

BIN = Path(sys.executable).parent


def _run(args, env=None, timeout=400):
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=full_env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.fixture(scope="module")
def docs_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("docs") / "reports.jsonl"
    texts = synthetic_reports(5, 150, seed=5)
    texts[2] = texts[2][:120]  # too short: must be left out by the min_tokens selection
    path.write_text("".join(json.dumps({"report": t}) + "\n" for t in texts))
    return path


@pytest.fixture(scope="module")
def user_tasks(tmp_path_factory, docs_file):
    """A user's own task folder: a loglikelihood_rolling task on a local JSON file."""
    folder = tmp_path_factory.mktemp("user_tasks")
    (folder / "my_rolling.yaml").write_text(
        "task: my_rolling\n"
        "dataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {docs_file}\n"
        "output_type: loglikelihood_rolling\n"
        "test_split: test\n"
        "doc_to_text: ''\n"
        "doc_to_target: '{{report}}'\n"
        "metric_list:\n  - metric: word_perplexity\n"
        "metadata:\n  version: 1.0\n"
    )
    return folder


def test_tasks_path_prints_the_task_folder(capsys):
    assert main(["tasks-path"]) == 0
    folder = Path(capsys.readouterr().out.strip())
    assert (folder / "ppl_govreport" / "ppl_govreport.yaml").is_file()


@pytest.mark.slow  # indexes all of lm-eval's tasks twice; plain lm_eval running ours: test_plugin.py
def test_lch_eval_tasks_list_and_plain_lm_eval_ls_tasks(user_tasks):
    """`lch eval --tasks list` keeps the user's --include_path beside ours; plain `lm_eval ls tasks` lists every
    task of ours with no flag (our task folder found as an lm-eval task plugin)."""
    from harness.plugin.discovery import tasks_path
    from harness.plugin.task_index import task_folder

    listed = _run([str(BIN / "lch"), "eval", "--tasks", "list", "--include_path", str(user_tasks)])
    assert "ppl_govreport" in listed and "my_rolling" in listed and "hellaswag" in listed
    plain = _run([str(BIN / "lm_eval"), "ls", "tasks"], env={"HF_HUB_OFFLINE": "1"})
    listed_names = {line.split("|")[1].strip() for line in plain.splitlines() if line.count("|") > 2}
    ours = set(task_folder(tasks_path()).tasks)
    assert len(ours) > 40 and ours <= listed_names, sorted(ours - listed_names)


def _expected_ppl(model_dir, docs_file, min_tokens, max_tokens, ratio, initial, recent):
    """Pooled PPL by hand: the first docs with >= min_tokens tokens, head max_tokens, Eq. 9 positions."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    nll, count, n_docs = 0.0, 0, 0
    for line in Path(docs_file).read_text().splitlines():
        ids = tok(json.loads(line)["report"])["input_ids"]
        if len(ids) < min_tokens:
            continue
        ids = torch.tensor([ids[:max_tokens]])
        g = dynamic_positions(torch.arange(ids.shape[1]), ids.shape[1], ratio, initial, recent)
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=torch.ones_like(ids), position_ids=g[None]).logits[0]
        lp = torch.log_softmax(logits[:-1].float(), -1).gather(-1, ids[0, 1:, None])
        nll -= lp.sum().item()
        count += lp.numel()
        n_docs += 1
    return math.exp(nll / count), count, n_docs


def _word_perplexity_by_hand(model_dir, docs_file, max_length, positions):
    """lm-eval's loglikelihood_rolling + word_perplexity, written out: each report's tokens as the tokenizer
    gives them (its BOS included) are predicted in disjoint chunks of max_length, each chunk scored by one
    forward over the max_length tokens before its last target (the first one starts at the BOS prefix),
    with ``positions(window length)`` as position ids; exp(-sum loglik / sum words), words = pieces
    between runs of whitespace."""
    import re

    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    loglik, words = 0.0, 0
    for line in Path(docs_file).read_text().splitlines():
        text = json.loads(line)["report"]
        ids = tok(text)["input_ids"]
        sequence = [tok.bos_token_id] + ids
        for start in range(0, len(ids), max_length):
            end = min(start + max_length, len(ids))
            window = sequence[max(0, end - max_length) : end]
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([window]), position_ids=positions(len(window))[None]).logits[0]
            lp = torch.log_softmax(logits[-(end - start) :].double(), -1)
            loglik += lp.gather(-1, torch.tensor(ids[start:end])[:, None]).sum().item()
        words += len(re.split(r"\s+", text))
    return math.exp(-loglik / words)


def _results(folder):
    files = glob.glob(str(Path(folder) / "**" / "results_*.json"), recursive=True)
    assert len(files) == 1, files
    return json.loads(Path(files[0]).read_text())["results"]


def test_lch_eval_runs_our_task_and_the_users_task(tiny_model_dir, docs_file, user_tasks, tmp_path):
    # 4 of the 5 documents are long enough: scored with allow_fewer_docs (without it, an error)
    meta = {"data_files": str(docs_file), "min_tokens": 100, "max_tokens": 160, "num_docs": 5, "allow_fewer_docs": True}
    _run(
        [
            str(BIN / "lch"),
            "eval",
            "--model",
            "hf-pic",
            "--model_args",
            f"pretrained={tiny_model_dir},pic=dynamic,pic_ratio=3,pic_initial=4,pic_recent=16,dtype=float32"
            ",max_length=99",
            "--device",
            "cpu",
            "--batch_size",
            "2",
            "--tasks",
            "ppl_govreport,my_rolling",
            "--include_path",
            str(user_tasks),
            "--metadata",
            json.dumps(meta),
            "--output_path",
            str(tmp_path),
        ]
    )
    results = _results(tmp_path)
    ppl, n_tokens, n_docs = _expected_ppl(tiny_model_dir, docs_file, 100, 160, 3.0, 4, 16)
    ours = results["ppl_govreport"]
    assert n_docs == 4 and ours["n_docs,none"] == n_docs and ours["n_tokens,none"] == n_tokens
    assert ours["ppl,none"] == pytest.approx(ppl, rel=1e-4)
    # every scored document (>= 100 tokens) runs past max_length=99 and is counted; skipped ones are not
    assert ours["over_length,none"] == n_docs

    # the user's loglikelihood_rolling task, by hand: lm-eval's rolling windows of max_length=99 tokens,
    # each forward under Dynamic PIC positions of its own length (s_cr 3, l_ic 4, l_rc 16, docs/formulas.md §1)
    def dynamic(n):
        m = torch.arange(n, dtype=torch.float32)
        return torch.where((m >= 4) & (m < n - 16), m / 3, m)

    expected = _word_perplexity_by_hand(tiny_model_dir, docs_file, 99, dynamic)
    assert results["my_rolling"]["word_perplexity,none"] == pytest.approx(expected, rel=1e-4)


def test_lch_eval_keeps_builtin_hf_model(tiny_model_dir, docs_file, user_tasks, tmp_path):
    """lm-eval's own ``hf`` model; the device and batch size given in --model_args, which lm-eval 0.4.13 would
    also pass from its --device (default cuda:0) / --batch_size flags (a TypeError: lch eval moves them)."""
    _run(
        [
            str(BIN / "lch"),
            "eval",
            "--model",
            "hf",
            "--model_args",
            f"pretrained={tiny_model_dir},dtype=float32,device=cpu,batch_size=2",
            "--tasks",
            "my_rolling",
            "--include_path",
            str(user_tasks),
            "--output_path",
            str(tmp_path),
        ]
    )
    # lm-eval's own HF model, max_length 4096 from the config: each report is one window, plain positions
    expected = _word_perplexity_by_hand(tiny_model_dir, docs_file, 4096, lambda n: torch.arange(n))
    assert _results(tmp_path)["my_rolling"]["word_perplexity,none"] == pytest.approx(expected, rel=1e-4)


def test_readme_regression_gate_example_runs_as_written(tmp_path, monkeypatch, capsys):
    """README's comparison example, its commands read from README itself and run in a fresh folder holding the
    committed baseline: the vanilla run passes its own baseline (exit 0); the run README names next is another
    configuration (exit 3, the inference named), and compared anyway with --allow-mismatch it fails (exit 1).

    The demo runs as on another machine: in a process on ATen's scalar kernels (``ATEN_CPU_CAPABILITY=default``,
    another ISA path than the AVX-512 / AVX2 one the baseline was made on) with a cache of its own, so that its tiny
    models are made afresh there; the committed baseline must hold on it (harness/models/tiny.py)."""
    import shlex
    import shutil

    repo = Path(__file__).resolve().parents[2]
    readme = " ".join((repo / "README.md").read_text(encoding="utf-8").split())
    example = re.search(r"`(lch demo --tiny && lch regress [^`]+)`", readme).group(1)
    other = re.search(r"gating `(results/demo/runs/[\w.-]+)` on it exits 3", readme).group(1)
    (tmp_path / "results" / "baselines").mkdir(parents=True)
    shutil.copy(repo / "results" / "baselines" / "demo-vanilla.json", tmp_path / "results" / "baselines")
    monkeypatch.chdir(tmp_path)
    demo, gate = (shlex.split(part) for part in example.split("&&"))
    assert demo[0] == gate[0] == "lch"
    _run(
        [str(BIN / "lch"), *demo[1:]],
        env={"ATEN_CPU_CAPABILITY": "default", "LCH_CACHE": str(tmp_path / "cache")},
        timeout=600,
    )
    assert main(gate[1:]) == 0, capsys.readouterr().out
    gate_other = [other if word == "results/demo/runs/vanilla" else word for word in gate[1:]]
    assert main(gate_other) == 3
    assert (
        "lch: error: not comparable: inference standard inference (baseline) vs Naive PIC (s_cr 2) (run)"
        in capsys.readouterr().err
    )
    assert main(gate_other + ["--allow-mismatch"]) == 1
    assert "longppl_govreport/longppl" in [
        line.split()[0] for line in capsys.readouterr().out.splitlines() if line.endswith("regressed")
    ]


def test_demo_writes_a_summary(tmp_path):
    from harness.demo.tiny import VARIANTS, run_demo

    rows = run_demo(output=tmp_path, n_docs=2, n_words=400)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [r["variant"] for r in summary["rows"]] == [name for name, _ in VARIANTS]
    # each run has the name the leaderboard and plots give it (the model's folder, then the inference in words)
    model = Path(summary["model"]).name
    assert [r["run"] for r in summary["rows"]] == [
        f"{model} · {words}"
        for words in (
            "base model",
            "Naive PIC (s_cr 2)",
            "NTK-aware PIC (s_rr 4)",
            "Dynamic PIC (s_cr 2, l_ic 4, l_rc 200)",
            "Dynamic PIC (s_cr 2, l_ic 4, l_rc 200, contiguous layout)",
        )
    ]
    import csv

    with (tmp_path / "leaderboard.csv").open() as f:
        assert sorted(r["run"] for r in csv.DictReader(f)) == sorted(r["run"] for r in summary["rows"])
    # every variant's PPL and LongPPL by hand: the demo's reports, plain forwards of its model with the
    # variant's position ids (docs/formulas.md §1; hf-pic's l_ic = 4, l_rc = 200) or, for NTK, RoPE base x s_rr;
    # key tokens found again by its evaluator (settings from the run's task metadata)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.longppl.estimator import find_key_tokens

    run = json.loads(next((tmp_path / "runs" / "vanilla").rglob("results_*.json")).read_text())
    meta = run["configs"]["longppl_govreport"]["metadata"]

    def positions(n, pic="none", pic_ratio=1.0, pic_layout="paper"):
        m = torch.arange(n, dtype=torch.float32)
        if pic == "naive":
            return m / pic_ratio
        if pic != "dynamic":
            return m
        initial, b = 4, n - 200
        middle = (m >= initial) & (m < b)
        if pic_layout == "paper":
            return torch.where(middle, m / pic_ratio, m)
        squeezed = torch.where(
            middle, initial + (m - initial) / pic_ratio, initial + (b - initial) / pic_ratio + (m - b)
        )
        return torch.where(m < initial, m, squeezed)

    def nll(model, ids, variant):
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids]), position_ids=positions(len(ids), **variant)[None]).logits[0]
        return -torch.log_softmax(logits[:-1].double(), -1).gather(-1, torch.tensor(ids[1:])[:, None])[:, 0]

    tok = AutoTokenizer.from_pretrained(summary["model"])
    ev_tok = AutoTokenizer.from_pretrained(meta["evaluator"])
    ev_model = AutoModelForCausalLM.from_pretrained(meta["evaluator"]).eval()
    texts = [json.loads(l)["report"] for l in (tmp_path / "synthetic_reports.jsonl").read_text().splitlines()]
    ppl_docs = [tok(t)["input_ids"][:4096] for t in texts if len(tok(t)["input_ids"]) >= 256]
    key_docs = []  # (evaluated ids without BOS, key mask of tokens 1..n-1): inside a key span of the evaluator
    for t in texts:
        assert 256 <= len(ev_tok(t)["input_ids"]) <= 4096  # selected, not cut
        spans = find_key_tokens(
            t, ev_model, ev_tok, **{k: meta[k] for k in ("trunc_len", "sliding_window", "alpha", "beta")}
        ).spans
        enc = tok(t, add_special_tokens=False, return_offsets_mapping=True)
        key_docs.append(
            (
                enc["input_ids"],
                torch.tensor([any(a <= s and e <= b for a, b in spans) for s, e in enc["offset_mapping"][1:]]),
            )
        )
    assert len(ppl_docs) == 2
    for (name, variant), row in zip(VARIANTS, rows):
        model = AutoModelForCausalLM.from_pretrained(summary["model"], dtype=torch.float32).eval()
        if variant["pic"] == "ntk":
            rotary = model.model.rotary_emb
            d = 2 * rotary.inv_freq.numel()
            base = model.config.rope_parameters["rope_theta"] * variant["pic_ratio"]
            rotary.inv_freq.copy_(1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
        doc_nll = [nll(model, ids, variant) for ids in ppl_docs]
        key_nll = [nll(model, ids, variant)[is_key] for ids, is_key in key_docs]
        n_key = sum(x.numel() for x in key_nll)
        assert (
            row["n_docs"] == 2 and row["n_tokens"] == sum(x.numel() for x in doc_nll) and row["n_key_tokens"] == n_key
        )
        assert row["ppl"] == pytest.approx(
            math.exp(sum(x.sum().item() for x in doc_nll) / row["n_tokens"]), rel=1e-4
        ), name
        assert row["longppl"] == pytest.approx(math.exp(sum(x.sum().item() for x in key_nll) / n_key), rel=1e-4), name
    assert n_key > 0  # LongPPL was defined
    by_name = {r["variant"]: r["ppl"] for r in rows}
    assert by_name["naive s_cr=2"] != pytest.approx(by_name["vanilla"], rel=1e-4)
    assert len(list((tmp_path / "runs").glob("*/results_*.json"))) == len(VARIANTS)
    # the demo ends with a leaderboard and a correlation report made from its own runs
    import csv

    from scipy import stats

    with (tmp_path / "leaderboard.csv").open() as f:
        board = list(csv.DictReader(f))
    by_longppl = sorted(rows, key=lambda r: r["longppl"])  # lower is better: best first
    assert [float(r["longppl_govreport/longppl"]) for r in board] == [r["longppl"] for r in by_longppl]
    assert [float(r["ppl_govreport/ppl"]) for r in board] == [r["ppl"] for r in by_longppl]
    assert [json.loads(r["model_args"])["pic"] for r in board] == [r["pic"] for r in by_longppl]
    report = tmp_path / "correlation" / "longppl_govreport_longppl_vs_ppl_govreport_ppl"
    corr = json.loads(report.with_suffix(".json").read_text())
    expected = stats.pearsonr([r["ppl"] for r in rows], [r["longppl"] for r in rows])
    assert corr["n"] == len(VARIANTS) and corr["pearson"]["r"] == pytest.approx(expected.statistic)
    assert report.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # and the runs gate as checkpoints would: vanilla against its own baseline passes; naive PIC is another
    # configuration (not comparable: exit 3), and compared anyway (higher PPL and LongPPL than vanilla here) fails
    assert by_name["naive s_cr=2"] > by_name["vanilla"]
    baseline = tmp_path / "baseline.json"
    runs = tmp_path / "runs"
    assert main(["regress", str(runs / "vanilla"), "--baseline", str(baseline), "--update-baseline"]) == 0
    assert main(["regress", str(runs / "vanilla"), "--baseline", str(baseline)]) == 0
    assert main(["regress", str(runs / "naive_s_cr2"), "--baseline", str(baseline)]) == 3
    assert main(["regress", str(runs / "naive_s_cr2"), "--baseline", str(baseline), "--allow-mismatch"]) == 1
    # the baseline gates scores, not the run's bookkeeping
    assert sorted(json.loads(baseline.read_text())["metrics"]) == [
        "longppl_govreport/longppl",
        "longppl_govreport/longppl_soft",
        "longppl_govreport/ppl_nobos",
        "ppl_govreport/ppl",
    ]


def test_longppl_task_end_to_end_with_precomputed_key_tokens(tiny_model_dir, tmp_path):
    """`lch keytokens` once, then `lch eval` scores another model without loading the evaluator."""
    import shutil

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.longppl.estimator import compute_longppl, find_key_tokens
    from harness.models.tiny import build_tiny_model

    evaluator = tmp_path / "evaluator"
    shutil.copytree(tiny_model_dir, evaluator)
    evaluated = build_tiny_model(vocab_size=300, train_steps=100, seed=3)
    docs = tmp_path / "corpus.jsonl"
    texts = synthetic_reports(3, 450, seed=30)
    docs.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    settings = {"trunc_len": 200, "sliding_window": 50, "alpha": 0.2, "beta": -4.0}
    cache = tmp_path / "keys"
    printed = _run(
        [
            str(BIN / "lch"),
            "keytokens",
            "--evaluator",
            str(evaluator),
            "--data-files",
            str(docs),
            "--text-field",
            "text",
            "--min-tokens",
            "300",
            "--max-tokens",
            "600",
            "--num-docs",
            "3",
            "--trunc-len",
            "200",
            "--sliding-window",
            "50",
            "--alpha",
            "0.2",
            "--beta",
            "-4",
            "--cache-dir",
            str(cache),
        ]
    )
    assert len(list(cache.glob("*.json"))) == 3
    meta = {
        "evaluator": str(evaluator),
        "data_files": str(docs),
        "text_field": "text",
        "min_tokens": 300,
        "max_tokens": 600,
        "num_docs": 3,
        "key_cache_dir": str(cache),
        **settings,
    }
    warm = subprocess.run(
        [
            str(BIN / "lch"),
            "eval",
            "--model",
            "hf-pic",
            "--model_args",
            f"pretrained={evaluated},dtype=float32",
            "--device",
            "cpu",
            "--tasks",
            "longppl_govreport",
            "--metadata",
            json.dumps(meta),
            "--output_path",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert warm.returncode == 0, warm.stderr[-3000:]
    # a warm run finds every text's key tokens in the cache (the evaluator is identified by its files' content,
    # never loaded or run: no "Finding key tokens" progress, which only shows for misses)
    assert "Finding key tokens" not in warm.stderr
    got = _results(tmp_path / "out")["longppl_govreport"]

    ev_model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    ev_tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(evaluated).eval()
    tok = AutoTokenizer.from_pretrained(evaluated)
    key_nll = n_key = nll = n = soft_nll = soft_weight = 0.0
    lines, dropped = [], 0
    for i, text in enumerate(texts):
        enc = ev_tok(text, return_offsets_mapping=True)
        text = text[: enc["offset_mapping"][599][1]] if len(enc["input_ids"]) > 600 else text
        key = find_key_tokens(text, ev_model, ev_tok, **settings)
        inside = lambda a, b, spans: any(s <= a and b <= e for s, e in spans)  # noqa: E731
        lines.append(
            f"document {i}: {sum(inside(a, b, key.spans) for a, b in key.offsets if b > a)} key tokens of "
            f"{min(len(enc['input_ids']), 600)}"
        )
        evaluated_spans = [
            (a, b)
            for a, b in tok(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
            if b > a
        ]
        dropped += sum(not any(s <= a and b <= e for a, b in evaluated_spans) for s, e in key.spans)
        out = compute_longppl(text, model, tok, key_spans=key)
        if out["n_key_token"]:
            key_nll += math.log(out["longppl"]) * out["n_key_token"]
            n_key += out["n_key_token"]
        nll += math.log(out["ppl"]) * (out["n_token"] - 1)
        n += out["n_token"] - 1
        # LongPPL-soft by hand: each evaluated token (after the first) weighs the mean, over its characters,
        # of the evaluator's min(exp(LSD), 5) (1 for its first trunc_len tokens, which have no LSD, and
        # for a token covering no evaluator character); exp(weighted NLL sum / weight sum), pooled
        char_weight = {}
        for (a, b), lsd in zip(key.offsets, key.lsd):
            for c in range(a, b):
                char_weight[c] = 1.0 if lsd is None else (5.0 if lsd > math.log(5.0) else math.exp(lsd))
        ev = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        ids = torch.tensor([ev["input_ids"]])
        with torch.no_grad():
            lp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].double(), -1).gather(-1, ids[0, 1:, None])[:, 0]
        for (a, b), token_lp in zip(ev["offset_mapping"][1:], lp.tolist()):
            covered = [char_weight[c] for c in range(a, b) if c in char_weight]
            weight = sum(covered) / len(covered) if covered else 1.0
            soft_nll, soft_weight = soft_nll - weight * token_lp, soft_weight + weight
    assert got["n_key_tokens,none"] == n_key > 0 and got["n_tokens,none"] == n
    assert got["key_spans_dropped,none"] == dropped  # spans of the evaluator no token of the other tokenizer fits
    total = sum(int(line.split(": ")[1].split()[0]) for line in lines)
    assert printed.splitlines() == lines + [
        f"{total} key tokens in 3 documents, cached in {cache}"
        + (" (fewer than 100: a LongPPL over them is noise)" if total < 100 else "")
    ]
    assert got["longppl,none"] == pytest.approx(math.exp(key_nll / n_key), rel=1e-4)
    assert got["ppl_nobos,none"] == pytest.approx(math.exp(nll / n), rel=1e-4)
    assert got["longppl_soft,none"] == pytest.approx(math.exp(soft_nll / soft_weight), rel=1e-4)


def test_lsm_task_end_to_end(tiny_model_dir, docs_file, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.lsm.estimator import lsm_overlap

    meta = {"data_files": str(docs_file), "min_tokens": 100, "num_docs": 2, "context_length": 32, "n_samples": 4}
    _run(
        [
            str(BIN / "lch"),
            "eval",
            "--model",
            "hf-pic",
            "--model_args",
            f"pretrained={tiny_model_dir},dtype=float32",
            "--device",
            "cpu",
            "--tasks",
            "lsm_govreport",
            "--metadata",
            json.dumps(meta),
            "--output_path",
            str(tmp_path),
        ]
    )
    got = _results(tmp_path)["lsm_govreport"]
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    texts = [json.loads(l)["report"] for l in Path(docs_file).read_text().splitlines()]
    texts = [t for t in texts if len(tok(t)["input_ids"]) >= 100][:2]
    values = [
        v
        for i, t in enumerate(texts)
        for v in lsm_overlap(model, torch.tensor(tok(t, add_special_tokens=False)["input_ids"]), 32, 4, seed=i)
    ]
    assert got["n_samples,none"] == 8
    assert got["lsm,none"] == pytest.approx(sum(values) / len(values), rel=1e-5)


def test_help_is_plain_text():
    """Descriptions come from docstrings: no reST markup reaches the terminal, in lch's help or any command's."""
    import argparse
    import re

    from harness.cli import build_parser, plain_text

    assert (
        plain_text("``lch eval`` runs :func:`~harness.apply_pic` and :mod:`harness.cli`")
        == "lch eval runs harness.apply_pic and harness.cli"
    )
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    helps = [parser.format_help()] + [sub.format_help() for sub in commands.values()]
    assert len(helps) > 15
    for text in helps:
        assert not re.search(r"``|:(func|mod|class|data|meth):`", text), text[:200]


def test_train_options_take_their_defaults_from_the_config_only():
    """`lch train` writes no default of its own: an option not given is not passed, so TrainConfig's applies;
    LongCE's K / d / gamma are LongPPL's, in the config and in the loss functions alike."""
    import inspect
    from dataclasses import fields

    from harness.cli import build_parser
    from harness.longppl.formulas import KEY_TOKEN_DEFAULTS, SOFT_GAMMA
    from harness.train.config import config_class
    from harness.train.losses import longce_loss, longce_weights

    for recipe in ("sft", "pic-sft", "longce", "lsm-reg", "longrecipe"):
        ns = build_parser().parse_args(["train", recipe, "--model", "m", "--data", "d", "--output", "o"])
        assert set(vars(ns)) == {"command", "handler", "recipe", "model", "data", "output"}
    given = build_parser().parse_args(
        ["train", "longce", "--model", "m", "--data", "d", "--output", "o", "--gamma", "3", "--quiet", "--full"]
    )
    assert (given.gamma, given.progress, given.full) == (3.0, False, True)
    defaults = {f.name: f.default for f in fields(config_class("longce"))}
    paper = (KEY_TOKEN_DEFAULTS["trunc_len"], KEY_TOKEN_DEFAULTS["sliding_window"], SOFT_GAMMA)
    assert (defaults["short_context"], defaults["sliding_window"], defaults["gamma"]) == paper == (4096, 1024, 5.0)
    for loss in (longce_loss, longce_weights):
        params = inspect.signature(loss).parameters
        assert (params["trunc_len"].default, params["sliding_window"].default, params["gamma"].default) == paper
    from harness.cli.options import default_text

    _default = lambda name: default_text(config_class("longce"), name)  # noqa: E731
    assert _default("gamma") == " (default 5.0)" and _default("pic_ratio") == ""  # help reads the same defaults


def test_building_the_parser_loads_no_tensor_library():
    """`lch --help` and argument errors stay fast: the parser (help defaults included) imports no torch."""
    import subprocess
    import sys

    code = "import sys; from harness.cli import build_parser; build_parser(); print('torch' in sys.modules)"
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
        == "False"
    )


def _recipe_parsers(parser=None) -> dict[str, argparse.ArgumentParser]:
    from harness.cli import build_parser

    parser = parser or build_parser()
    sub = lambda p: next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices  # noqa: E731
    return {name: p for name, p in sub(sub(parser)["train"]).items() if name != "merge"}


# each recipe's own options, written here so that an option moving between configs is noticed
OWN_OPTIONS = {
    "sft": {"chat_template", "prompt_field", "response_field", "segment_length"},
    "pic-sft": {"chat_template", "prompt_field", "response_field", "segment_length"},
    "longce": {"gamma", "short_context", "sliding_window"},
    "lsm-reg": {"lam", "context_length", "delta"},
    "longrecipe": {"stage", "target_length", "train_length", "max_skip", "top_fraction", "extended_model", "init"},
}


def test_each_recipe_lists_exactly_its_config_fields_and_the_common_ones():
    from dataclasses import fields

    from harness.train.config import TrainConfig, config_class

    common = {f.name for f in fields(TrainConfig)} - {"recipe"}  # the recipe is the subcommand
    parsers = _recipe_parsers()
    assert set(parsers) == set(OWN_OPTIONS)
    for name, p in parsers.items():
        dests = {a.dest for a in p._actions if a.dest != "help"}
        assert dests == {f.name for f in fields(config_class(name))} - {"recipe"} == common | OWN_OPTIONS[name], name
        switches = {a.option_strings[0]: (a.dest, a.const) for a in p._actions if a.nargs == 0 and a.dest != "help"}
        expected = {"--full": ("full", True), "--resume": ("resume", True), "--quiet": ("progress", False)}
        if name in ("sft", "pic-sft"):
            expected["--no-chat-template"] = ("chat_template", False)
        assert switches == expected, name
        assert {a.dest for a in p._actions if a.required} == {"model", "data", "output"}


def test_every_default_in_the_recipe_help_is_the_dataclass_default():
    from dataclasses import MISSING, fields

    from harness.train.config import NTK_SFT_RATIO, PIC_SFT_INITIAL, PIC_SFT_RATIO, PIC_SFT_RECENT, config_class

    for name, p in _recipe_parsers().items():
        cls = config_class(name)
        text = " ".join(p.format_help().split())
        actions = {a.dest: a for a in p._actions}
        shown = 0
        for f in fields(cls):
            if f.name == "recipe" or actions[f.name].nargs == 0:  # switches show no default
                continue
            helped = actions[f.name].help % {}
            found = re.findall(r"\(default ([^)]*)\)", helped)
            if f.default not in (MISSING, None):
                expected = str(f.default)
            elif f.name in cls.OPTIMISER:  # None: the recipe's paper default
                expected = str(cls.OPTIMISER[f.name])
            else:  # resolved later (check_config, the recipe's check): the help says how
                continue
            assert len(found) == 1 and found[0].split(";")[0] == expected, (name, f.name, helped)
            assert f"(default {found[0]})" in text
            shown += 1
        assert shown >= 20
        pic = {dest: actions[dest].help for dest in ("pic_ratio", "pic_initial", "pic_recent")}
        assert f"default {PIC_SFT_RATIO:g})" in pic["pic_ratio"] and f"default {NTK_SFT_RATIO:g})" in pic["pic_ratio"]
        assert f"default {PIC_SFT_INITIAL}," in pic["pic_initial"] and f"default {PIC_SFT_RECENT}," in pic["pic_recent"]
    longrecipe = " ".join(_recipe_parsers()["longrecipe"].format_help().split())
    assert "learning rate (default 5e-05; --stage replay: 5e-06)" in longrecipe


def test_a_field_added_to_a_recipe_config_becomes_its_option(monkeypatch):
    """No other edit: the new field is a flag of its recipe only, with its help and default, kept out of the
    namespace when not given, passed to the config when given, and recorded in the variant settings."""
    from dataclasses import dataclass

    from harness.cli import build_parser
    from harness.cli.options import given_options
    from harness.train import config

    @dataclass
    class Extended(config.LongCEConfig):
        warm_tokens: int = config.option(7, "tokens of warm-up text")
        fancy: bool = config.option(False, "a new switch")

    monkeypatch.setitem(config.RECIPE_CONFIGS, "longce", Extended)
    parsers = _recipe_parsers()
    assert "--warm-tokens" in parsers["longce"].format_help() and "tokens of warm-up text (default 7)" in " ".join(
        parsers["longce"].format_help().split()
    )
    assert "--warm-tokens" not in parsers["lsm-reg"].format_help()
    required = ["--model", "m", "--data", "d", "--output", "o"]
    assert not {"warm_tokens", "fancy"} & set(vars(build_parser().parse_args(["train", "longce", *required])))
    args = build_parser().parse_args(["train", "longce", *required, "--warm-tokens", "9", "--fancy"])
    cfg = config.TrainConfig.for_recipe(**given_options(config.config_class(args.recipe), args))
    assert isinstance(cfg, Extended) and (cfg.warm_tokens, cfg.fancy, cfg.gamma) == (9, True, 5.0)
    assert cfg.settings()["warm_tokens"] == 9 and cfg.settings()["fancy"] is True


def test_run_settings_in_model_args_move_to_lm_evals_flags():
    """``device`` / ``batch_size`` / ``max_batch_size`` in --model_args become lm-eval's flags for a run of ours (as
    lm-eval's parser leaves them: ``--batch_size`` absent unless given); the same key given both ways with different
    values is one line."""
    from argparse import Namespace

    from harness.core.errors import UsageError
    from harness.plugin.command_line import front

    def parsed(model_args: dict, device: str | None = None) -> Namespace:
        return Namespace(
            command="run",
            model="hf-pic",
            tasks=["ppl_govreport"],
            include_path=None,
            config=None,
            model_args=model_args,
            device=device,
            max_batch_size=None,
        )

    args = parsed({"pretrained": "m", "device": "cpu", "batch_size": 4})
    assert front(args) is not None
    assert (args.model_args, args.device, args.batch_size) == ({"pretrained": "m"}, "cpu", 4)
    same = parsed({"pretrained": "m", "device": "cpu"}, device="cpu")
    front(same)
    assert (same.model_args, same.device) == ({"pretrained": "m"}, "cpu")
    clash = parsed({"pretrained": "m", "device": "cpu"}, device="cuda")
    with pytest.raises(UsageError, match=r"device is given twice, cpu in --model_args and cuda by --device"):
        front(clash)


def test_lch_options_prints_a_tasks_options_and_the_pic_args_from_their_dataclasses(capsys):
    """``lch options``: the GovReport protocol's defaults (16384 / 32767 tokens, 50 documents: docs/formulas.md §3),
    RULER's per-task key named once for the group, the PIC args with the paper's Dynamic PIC defaults (l_ic 4,
    l_rc 200), and a task name that is not ours refused in one line."""
    assert main(["options", "ppl_govreport"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ppl_govreport: TokenLogprobOptions")
    assert "| min_tokens | an integer (int) | 16384 | between 0 and 10000000 |" in out
    assert (
        "| max_tokens | an integer (int) or none | 32767 |" in out
        and "| num_docs | an integer (int) or none | 50 |" in out
    )
    assert main(["options", "lch_ruler"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("13 tasks (") and "set per task by its YAML: ruler_task" in out
    assert main(["options", "--model", "vllm-pic"]) == 0
    out = capsys.readouterr().out
    assert "| pic | a string (str) | none | none, naive, ntk, dynamic |" in out
    assert (
        "| pic_initial | an integer (int) | 4 | >= 0 |" in out
        and "| pic_recent | an integer (int) | 200 | >= 0 |" in out
    )
    assert main(["options", "ppl_govreprot"]) == 2
    assert "ppl_govreprot is no task or group of ours; did you mean ppl_govreport?" in capsys.readouterr().err
