"""The lm-eval integration as a user meets it: `lch eval`, plain `lm_eval --include_path`, accelerate."""

import glob
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.cli import main
from harness.data.synthetic import synthetic_reports
from harness.positions.pic import dynamic_positions

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


def test_lch_eval_tasks_list_and_plain_lm_eval_include_path(user_tasks):
    listed = _run([str(BIN / "lch"), "eval", "--tasks", "list", "--include_path", str(user_tasks)])
    assert "ppl_govreport" in listed and "my_rolling" in listed and "hellaswag" in listed
    tasks_dir = _run([str(BIN / "lch"), "tasks-path"]).strip()
    plain = _run([str(BIN / "lm_eval"), "ls", "tasks", "--include_path", tasks_dir])
    assert "ppl_govreport" in plain


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


def _results(folder):
    files = glob.glob(str(Path(folder) / "**" / "results_*.json"), recursive=True)
    assert len(files) == 1, files
    return json.loads(Path(files[0]).read_text())["results"]


def test_lch_eval_runs_our_task_and_the_users_task(tiny_model_dir, docs_file, user_tasks, tmp_path):
    meta = {"data_files": str(docs_file), "min_tokens": 100, "max_tokens": 160, "num_docs": 5}
    _run([
        str(BIN / "lch"), "eval", "--model", "hf-pic",
        "--model_args", f"pretrained={tiny_model_dir},pic=dynamic,pic_ratio=3,pic_initial=4,pic_recent=16,dtype=float32"
        ",max_length=99",
        "--device", "cpu", "--batch_size", "2", "--tasks", "ppl_govreport,my_rolling",
        "--include_path", str(user_tasks), "--metadata", json.dumps(meta), "--output_path", str(tmp_path),
    ])
    results = _results(tmp_path)
    ppl, n_tokens, n_docs = _expected_ppl(tiny_model_dir, docs_file, 100, 160, 3.0, 4, 16)
    ours = results["ppl_govreport"]
    assert n_docs == 4 and ours["n_docs,none"] == n_docs and ours["n_tokens,none"] == n_tokens
    assert ours["ppl,none"] == pytest.approx(ppl, rel=1e-4)
    # every scored document (>= 100 tokens) runs past max_length=99 and is counted; skipped ones are not
    assert ours["over_length,none"] == n_docs
    assert results["my_rolling"]["word_perplexity,none"] > 1


def test_lch_eval_keeps_builtin_hf_model(tiny_model_dir, user_tasks, tmp_path):
    _run([
        str(BIN / "lch"), "eval", "--model", "hf", "--model_args", f"pretrained={tiny_model_dir},dtype=float32",
        "--device", "cpu", "--tasks", "my_rolling", "--include_path", str(user_tasks), "--output_path", str(tmp_path),
    ])
    assert _results(tmp_path)["my_rolling"]["word_perplexity,none"] > 1


def test_accelerate_data_parallel_on_cpu(tiny_model_dir, docs_file, tmp_path):
    """Two CPU processes split the documents (rank 0 logs 3 of 5) and gather the same metrics."""
    meta = {"data_files": str(docs_file), "min_tokens": 0, "max_tokens": 160, "num_docs": 5}
    common = [
        "--model", "hf-pic", "--model_args", f"pretrained={tiny_model_dir},pic=naive,pic_ratio=2,dtype=float32",
        "--device", "cpu", "--tasks", "ppl_govreport", "--metadata", json.dumps(meta), "--log_samples",
    ]
    _run([str(BIN / "lch"), "eval", *common, "--output_path", str(tmp_path / "single")])
    _run(
        [str(BIN / "accelerate"), "launch", "--multi_gpu", "--num_processes", "2", "--main_process_port", "29533",
         "-m", "harness.cli", "eval", *common, "--output_path", str(tmp_path / "dp")],
        env={"ACCELERATE_USE_CPU": "true"},
    )
    single, dp = _results(tmp_path / "single")["ppl_govreport"], _results(tmp_path / "dp")["ppl_govreport"]
    assert dp["n_docs,none"] == single["n_docs,none"] == 5
    assert dp["ppl,none"] == pytest.approx(single["ppl,none"], rel=1e-6)
    samples = glob.glob(str(tmp_path / "dp" / "**" / "samples_ppl_govreport_*.jsonl"), recursive=True)
    doc_ids = sorted(json.loads(l)["doc_id"] for l in Path(samples[0]).read_text().splitlines())
    assert doc_ids == [0, 1, 2, 3, 4]


def test_config_file_include_path_is_kept(tmp_path):
    from harness.lmeval.cli import _config_include_path

    config = tmp_path / "run.yaml"
    config.write_text("model: hf\ninclude_path: /my/tasks\n")
    assert _config_include_path(str(config)) == "/my/tasks"
    assert _config_include_path(None) is None


def test_demo_writes_a_summary(tmp_path):
    from harness.demo.tiny import VARIANTS, run_demo

    rows = run_demo(output=tmp_path, n_docs=2, n_words=400)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [r["variant"] for r in summary["rows"]] == [name for name, _ in VARIANTS]
    assert all(r["n_docs"] == 2 and r["ppl"] > 1 for r in rows)
    assert all(r["longppl"] > 1 and r["n_key_tokens"] == rows[0]["n_key_tokens"] > 0 for r in rows)
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
    # and the runs gate as checkpoints would: vanilla against its own baseline passes, naive PIC
    # (higher PPL and LongPPL than vanilla here) fails
    assert by_name["naive s_cr=2"] > by_name["vanilla"]
    baseline = tmp_path / "baseline.json"
    runs = tmp_path / "runs"
    assert main(["regress", str(runs / "vanilla"), "--baseline", str(baseline), "--update-baseline"]) == 0
    assert main(["regress", str(runs / "vanilla"), "--baseline", str(baseline)]) == 0
    assert main(["regress", str(runs / "naive_s_cr2"), "--baseline", str(baseline)]) == 1


def test_longppl_task_end_to_end_with_precomputed_key_tokens(tiny_model_dir, tmp_path):
    """`lch keytokens` once, then `lch eval` scores another model without loading the evaluator."""
    import shutil

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.models.longppl import compute_longppl, find_key_tokens
    from harness.models.tiny import build_tiny_model

    evaluator = tmp_path / "evaluator"
    shutil.copytree(tiny_model_dir, evaluator)
    evaluated = build_tiny_model(vocab_size=300, train_steps=100, seed=3)
    docs = tmp_path / "corpus.jsonl"
    texts = synthetic_reports(3, 450, seed=30)
    docs.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    settings = {"trunc_len": 200, "sliding_window": 50, "alpha": 0.2, "beta": -4.0}
    cache = tmp_path / "keys"
    _run([str(BIN / "lch"), "keytokens", "--evaluator", str(evaluator), "--data-files", str(docs),
          "--text-field", "text", "--min-tokens", "300", "--max-tokens", "600", "--trunc-len", "200",
          "--sliding-window", "50", "--alpha", "0.2", "--beta", "-4", "--cache-dir", str(cache)])
    assert len(list(cache.glob("*.json"))) == 3
    (evaluator / "model.safetensors").unlink()  # a warm run must not need the evaluator's weights
    meta = {"evaluator": str(evaluator), "data_files": str(docs), "text_field": "text", "min_tokens": 300,
            "max_tokens": 600, "key_cache_dir": str(cache), **settings}
    _run([str(BIN / "lch"), "eval", "--model", "hf-pic", "--model_args", f"pretrained={evaluated},dtype=float32",
          "--device", "cpu", "--tasks", "longppl_govreport", "--metadata", json.dumps(meta),
          "--output_path", str(tmp_path / "out")])
    got = _results(tmp_path / "out")["longppl_govreport"]

    ev_model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    ev_tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(evaluated).eval()
    tok = AutoTokenizer.from_pretrained(evaluated)
    key_nll = n_key = nll = n = 0.0
    for text in texts:
        enc = ev_tok(text, return_offsets_mapping=True)
        text = text[: enc["offset_mapping"][599][1]] if len(enc["input_ids"]) > 600 else text
        out = compute_longppl(text, model, tok, key_spans=find_key_tokens(text, ev_model, ev_tok, **settings))
        if out["n_key_token"]:
            key_nll += math.log(out["longppl"]) * out["n_key_token"]
            n_key += out["n_key_token"]
        nll += math.log(out["ppl"]) * (out["n_token"] - 1)
        n += out["n_token"] - 1
    assert got["n_key_tokens,none"] == n_key > 0 and got["n_tokens,none"] == n
    assert got["longppl,none"] == pytest.approx(math.exp(key_nll / n_key), rel=1e-4)
    assert got["ppl,none"] == pytest.approx(math.exp(nll / n), rel=1e-4)
    assert got["longppl_soft,none"] > 1


def test_lsm_task_end_to_end(tiny_model_dir, docs_file, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.models.lsm import lsm_overlap

    meta = {"data_files": str(docs_file), "min_tokens": 100, "num_docs": 2, "context_length": 32, "n_samples": 4}
    _run([str(BIN / "lch"), "eval", "--model", "hf-pic", "--model_args", f"pretrained={tiny_model_dir},dtype=float32",
          "--device", "cpu", "--tasks", "lsm_govreport", "--metadata", json.dumps(meta),
          "--output_path", str(tmp_path)])
    got = _results(tmp_path)["lsm_govreport"]
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    texts = [json.loads(l)["report"] for l in Path(docs_file).read_text().splitlines()]
    texts = [t for t in texts if len(tok(t)["input_ids"]) >= 100][:2]
    values = [v for i, t in enumerate(texts)
              for v in lsm_overlap(model, torch.tensor(tok(t, add_special_tokens=False)["input_ids"]), 32, 4, seed=i)]
    assert got["n_samples,none"] == 8
    assert got["lsm,none"] == pytest.approx(sum(values) / len(values), rel=1e-5)
