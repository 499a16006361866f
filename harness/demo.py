"""The embedded offline demo behind README's main command (``lch demo``).

A tiny Llama and its tokenizer are built on the fly (cached), synthetic long reports are written to
the output folder, and ``ppl_govreport`` runs through lm-eval with ``hf-pic`` once per PIC variant.
Each run's lm-eval results JSON is saved next to ``summary.json``; a table is printed.
"""

from __future__ import annotations

import json
from pathlib import Path

VARIANTS: list[tuple[str, dict]] = [
    ("vanilla", {"pic": "none"}),
    ("naive s_cr=2", {"pic": "naive", "pic_ratio": 2.0}),
    ("ntk s_rr=4", {"pic": "ntk", "pic_ratio": 4.0}),
    ("dynamic s_cr=2 paper", {"pic": "dynamic", "pic_ratio": 2.0, "pic_layout": "paper"}),
    ("dynamic s_cr=2 contiguous", {"pic": "dynamic", "pic_ratio": 2.0, "pic_layout": "contiguous"}),
]


def run_demo(output: str | Path = "results/demo", n_docs: int = 4, n_words: int = 1500) -> list[dict]:
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager
    from lm_eval.utils import handle_non_serializable

    from harness.data.synthetic import synthetic_reports
    from harness.plugin import register, tasks_path
    from harness.tiny import build_tiny_model

    register()
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    model_dir = build_tiny_model(train_steps=300, train_length=128)
    docs_file = out / "synthetic_reports.jsonl"
    with docs_file.open("w", encoding="utf-8") as f:
        for text in synthetic_reports(n_docs, n_words, seed=1):
            f.write(json.dumps({"report": text}) + "\n")
    metadata = {"data_files": str(docs_file), "min_tokens": 256, "max_tokens": 4096, "num_docs": n_docs}

    task_manager = TaskManager(include_path=tasks_path(), metadata=metadata)  # indexing is slow: once
    rows = []
    for name, pic_args in VARIANTS:
        model_args = {"pretrained": str(model_dir), "device": "cpu", "dtype": "float32", **pic_args}
        results = simple_evaluate(
            model="hf-pic",
            model_args=model_args,
            tasks=["ppl_govreport"],
            task_manager=task_manager,
            batch_size=2,
        )
        metrics = results["results"]["ppl_govreport"]
        slug = name.replace(" ", "_").replace("=", "")
        (out / f"{slug}.json").write_text(
            json.dumps(results, indent=2, default=handle_non_serializable), encoding="utf-8"
        )
        rows.append(
            {"variant": name, **pic_args, "ppl": metrics["ppl,none"], "n_tokens": metrics["n_tokens,none"],
             "n_docs": metrics["n_docs,none"]}
        )
    (out / "summary.json").write_text(json.dumps({"model": str(model_dir), "rows": rows}, indent=2))
    print(f"\nppl_govreport on {n_docs} synthetic reports, tiny Llama trained on 128-token windows ({model_dir.name})")
    print(f"{'variant':<28} {'ppl':>10} {'tokens':>8} {'docs':>5}")
    for row in rows:
        print(f"{row['variant']:<28} {row['ppl']:>10.3f} {int(row['n_tokens']):>8d} {int(row['n_docs']):>5d}")
    print(f"results written to {out}/")
    return rows
