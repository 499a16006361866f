"""The tiny-model demo (``lch demo --tiny``): seconds, no real model, the whole pipeline. Two shipped tiny Llamas (the
same bytes everywhere, so ``results/baselines/demo-vanilla.json`` holds) run ``ppl_govreport`` and
``longppl_govreport`` on synthetic reports per PIC variant; the runs, a leaderboard and a correlation are written."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harness.core.files import atomic_writer, write_json_atomic
from harness.demo.shared import slug, variants, write_reports

VARIANTS: list[tuple[str, dict]] = [
    *variants()[:3],  # vanilla, naive s_cr=2, ntk s_rr=4
    ("dynamic s_cr=2 paper", {"pic": "dynamic", "pic_ratio": 2.0, "pic_layout": "paper"}),
    ("dynamic s_cr=2 contiguous", {"pic": "dynamic", "pic_ratio": 2.0, "pic_layout": "contiguous"}),
]


def run_demo(output: str | Path = "results/demo", n_docs: int = 4, n_words: int = 1500) -> list[dict]:
    from harness.data.synthetic import synthetic_reports
    from harness.models.tiny import build_tiny_model
    from harness.plugin.in_process import evaluate, save_run, task_manager
    from harness.reporting.labels import name_from_results, split_shared

    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    model_dir = build_tiny_model(train_steps=300, train_length=128)  # both shipped: harness.models.tiny.SHIPPED
    evaluator_dir = build_tiny_model(train_steps=300, train_length=256, seed=1)
    docs_file = out / "synthetic_reports.jsonl"
    with atomic_writer(docs_file) as f:
        for text in synthetic_reports(n_docs, n_words, seed=1):
            f.write(json.dumps({"report": text}) + "\n")
    metadata = {
        "data_files": str(docs_file),
        "min_tokens": 256,
        "max_tokens": 4096,
        "num_docs": n_docs,
        # LongPPL on tiny models: short windows of 128-191 tokens, thresholds scaled to their small LSDs
        "evaluator": str(evaluator_dir),
        "trunc_len": 128,
        "sliding_window": 64,
        "alpha": 0.5,
        "beta": -4.0,
        "key_cache_dir": str(out / "keytokens"),
    }

    manager = task_manager(metadata=metadata, ours_only=True)  # our tasks only: lm-eval's own are not indexed
    rows = []
    for number, (name, pic_args) in enumerate(VARIANTS, 1):
        print(f"variant {number}/{len(VARIANTS)}: {name}", file=sys.stderr, flush=True)
        model_args = {"pretrained": str(model_dir), "device": "cpu", "dtype": "float32", **pic_args}
        results = evaluate(model_args, ["ppl_govreport", "longppl_govreport"], manager, batch_size=2)
        metrics = results["results"]["ppl_govreport"]
        longppl = results["results"]["longppl_govreport"]
        save_run(results, out / "runs" / slug(name))
        rows.append(
            {
                "variant": name,
                "run": name_from_results(results).text,
                **pic_args,
                "ppl": metrics["ppl,none"],
                "n_tokens": metrics["n_tokens,none"],
                "n_docs": metrics["n_docs,none"],
                "longppl": longppl["longppl,none"],
                "longppl_soft": longppl["longppl_soft,none"],
                "n_key_tokens": longppl["n_key_tokens,none"],
            }
        )
    write_json_atomic(out / "summary.json", {"model": str(model_dir), "rows": rows}, indent=2)
    print(
        f"\n{n_docs} synthetic reports; tiny Llama trained on 128-token windows ({model_dir.name}); "
        f"LongPPL evaluator {evaluator_dir.name}"
    )
    shared, names = split_shared([row["run"] for row in rows])  # runs named as the leaderboard and plots name them
    width = max(len(n) for n in names + ["run"]) + 2
    print(f"runs of {shared}" if shared else "")
    print(f"{'run':<{width}} {'ppl':>9} {'longppl':>9} {'longppl_soft':>13} {'key tokens':>11} {'tokens':>7}")
    for row, name in zip(rows, names):
        print(
            f"{name:<{width}} {row['ppl']:>9.3f} {row['longppl']:>9.3f} {row['longppl_soft']:>13.3f} "
            f"{int(row['n_key_tokens']):>11d} {int(row['n_tokens']):>7d}"
        )
    print(f"results written to {out}/")
    paths, stats = write_reports(out / "runs", out)
    p = stats["pearson"]
    print(
        f"LongPPL vs PPL over {stats['n']} variants: Pearson r = {p['r']:.3f} (p = {p['p']:.3g}), "
        f"Spearman {stats['spearman']['r']:.3f}, Kendall {stats['kendall']['r']:.3f}"
    )
    for path in paths:
        print(f"  {path}")
    return rows
