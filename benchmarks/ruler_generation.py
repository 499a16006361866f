"""RULER sample generation: ours (harness.tasks.lch_ruler.dataset) vs lm-eval's built-in RULER tasks, same tokenizer,
lengths and sample count (lm-eval's fixed 500 per task), all 13 tasks.

Each side runs in a fresh process (imports included: that is what a user waits for). Ours runs twice:
cold (empty cache) and warm (cache filled by the cold run). Offline, both sides get the same text: the
essay haystack and the SQuAD / HotpotQA files are seeded synthetic text in the official formats (lm-eval's
downloaders are pointed at them, and its NLTK Punkt sentence splitter, a download, is replaced by our regex
splitter). The tokenizer is a 32k byte-level BPE trained here on that text.

    python benchmarks/ruler_generation.py --lengths 4096 16384

Prints a table and saves benchmarks/results/ruler_generation.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TASKS = [
    "niah_single_1",
    "niah_single_2",
    "niah_single_3",
    "niah_multikey_1",
    "niah_multikey_2",
    "niah_multikey_3",
    "niah_multivalue",
    "niah_multiquery",
    "vt",
    "cwe",
    "fwe",
    "qa_squad",
    "qa_hotpot",
]
SAMPLES = 500  # lm-eval's RULER tasks generate 500 samples per task and length, not configurable


def prepare(workdir: Path) -> dict:
    """Tokenizer, essay text and QA files in the official formats, all made here."""
    from harness.data import haystacks
    from harness.models.tiny import train_tokenizer

    tok_dir = workdir / "tokenizer"
    essays = workdir / "essays.txt"
    squad, hotpot = workdir / "squad.json", workdir / "hotpot.json"
    if not tok_dir.exists():
        prose = haystacks.synthetic_prose(20000)
        essays.write_text(prose)
        corpus = haystacks.load_qa("squad", haystacks.SYNTHETIC)
        squad.write_text(
            json.dumps(
                {
                    "data": [
                        {
                            "title": "synthetic",
                            "paragraphs": [
                                {
                                    "context": corpus.documents[g[0]],
                                    "qas": [
                                        {
                                            "question": q,
                                            "answers": [{"text": a} for a in ans],
                                            "is_impossible": False,
                                            "id": str(i),
                                        }
                                    ],
                                }
                                for i, (q, ans, g) in enumerate(corpus.questions)
                            ],
                        }
                    ]
                }
            )
        )
        hotpot.write_text(
            json.dumps(
                [
                    {"question": q, "answer": ans[0], "context": [[f"Doc {g[0]}", [corpus.documents[g[0]]]]]}
                    for q, ans, g in corpus.questions
                ]
            )
        )
        words = [w for lst in haystacks.word_lists().values() for w in lst]
        texts = [prose[i : i + 2000] for i in range(0, len(prose), 2000)] + [
            " ".join(words[i : i + 200]) for i in range(0, len(words), 200)
        ]
        texts += [" ".join(str(n) for n in range(i, i + 500)) for i in range(0, 100000, 5000)]
        train_tokenizer(texts + [haystacks.NOISE] * 50, 32000).save_pretrained(tok_dir)
    return {"tokenizer": str(tok_dir), "essays": str(essays), "squad": str(squad), "hotpot": str(hotpot)}


def run_lm_eval(files: dict, length: int) -> dict:
    t0 = time.perf_counter()
    from lm_eval.tasks.ruler import cwe_utils, fwe_utils, niah_utils, prepare_niah, qa_utils, vt_utils

    from harness.data.haystacks import split_sentences

    prepare_niah.sent_tokenize = split_sentences  # NLTK's punkt_tab is a download; our regex splitter is faster

    original = niah_utils.get_haystack
    essay_words = Path(files["essays"]).read_text().split(" ")
    niah_utils.get_haystack = lambda type_haystack: essay_words if type_haystack == "essay" else original(type_haystack)
    qa_utils.download_json = lambda url: json.loads(Path(files["squad" if "SQuAD" in url else "hotpot"]).read_text())
    imported = time.perf_counter() - t0
    functions = {name: getattr(niah_utils, name) for name in TASKS if name.startswith("niah")}
    functions.update(
        vt=vt_utils.get_vt_dataset,
        cwe=cwe_utils.get_cw_dataset,
        fwe=fwe_utils.fwe_download,
        qa_squad=qa_utils.get_squad,
        qa_hotpot=qa_utils.get_hotpotqa,
    )
    per_task, rows = {}, {}
    for name in TASKS:
        t = time.perf_counter()
        ds = functions[name](pretrained=files["tokenizer"], max_seq_lengths=[length])["test"]
        per_task[name], rows[name] = time.perf_counter() - t, len(ds)
        lengths = [r["length"] for r in ds]
        rows[name] = {"n": len(ds), "max_tokens": max(lengths), "mean_tokens": sum(lengths) / len(lengths)}
    return {"import_s": imported, "per_task_s": per_task, "rows": rows}


def run_ours(files: dict, length: int) -> dict:
    t0 = time.perf_counter()
    from dataclasses import asdict

    from harness.data.prompt_tokens import PromptCounter, load_tokenizer
    from harness.tasks.lch_ruler import dataset as ruler

    counter = PromptCounter(load_tokenizer(files["tokenizer"]))
    sources = ruler.Sources(essays=files["essays"], squad=files["squad"], hotpotqa=files["hotpot"])
    imported = time.perf_counter() - t0
    per_task, rows = {}, {}
    for name in TASKS:
        t = time.perf_counter()
        out = ruler.generate(
            ruler.RulerOptions(ruler_task=name, num_samples=SAMPLES, **asdict(sources)), length, counter
        )
        per_task[name] = time.perf_counter() - t
        totals = [r["prompt_tokens"] + r["max_gen_toks"] for r in out]
        rows[name] = {"n": len(out), "max_tokens": max(totals), "mean_tokens": sum(totals) / len(totals)}
    return {"import_s": imported, "per_task_s": per_task, "rows": rows}


def child(side: str, files: dict, length: int) -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "true"}
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, "--child", side, "--files", json.dumps(files), "--lengths", str(length)],
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{side} failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["wall_s"] = time.perf_counter() - t
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lengths", type=int, nargs="+", default=[4096])
    parser.add_argument("--child")
    parser.add_argument("--files")
    args = parser.parse_args()
    if args.child:
        fn = run_lm_eval if args.child == "lm_eval" else run_ours
        print(json.dumps(fn(json.loads(args.files), args.lengths[0])))
        return
    from harness.core.cache import cache_root

    work = cache_root("bench-ruler")
    work.mkdir(parents=True, exist_ok=True)
    files = prepare(work)
    report = {"samples_per_task": SAMPLES, "cpu_threads": os.cpu_count(), "lengths": {}}
    for length in args.lengths:
        with tempfile.TemporaryDirectory() as cache:
            os.environ["LCH_CACHE"] = cache  # ours: empty cache (cold), then the same cache (warm)
            ours_cold = child("ours", files, length)
            ours_warm = child("ours", files, length)
        del os.environ["LCH_CACHE"]
        lm_eval = child("lm_eval", files, length)
        gen = {
            k: sum(r["per_task_s"].values())
            for k, r in (("lm_eval", lm_eval), ("cold", ours_cold), ("warm", ours_warm))
        }
        report["lengths"][length] = {"lm_eval": lm_eval, "ours_cold": ours_cold, "ours_warm": ours_warm}
        print(f"\nlength {length}, {SAMPLES} samples per task, 13 tasks (seconds)")
        print(
            f"{'task':18s} {'lm-eval':>9s} {'ours cold':>10s} {'ratio':>7s} {'ours warm':>10s}  rows lm-eval/ours, "
            "max tokens lm-eval/ours"
        )
        for name in TASKS:
            a, b, c = (r["per_task_s"][name] for r in (lm_eval, ours_cold, ours_warm))
            ra, rb = lm_eval["rows"][name], ours_cold["rows"][name]
            print(
                f"{name:18s} {a:9.2f} {b:10.2f} {a / b:6.1f}x {c:10.3f}  {ra['n']}/{rb['n']}, "
                f"{ra['max_tokens']}/{rb['max_tokens']}"
            )
        print(
            f"{'generation total':18s} {gen['lm_eval']:9.2f} {gen['cold']:10.2f} {gen['lm_eval'] / gen['cold']:6.1f}x "
            f"{gen['warm']:10.3f}"
        )
        print(
            f"{'process wall':18s} {lm_eval['wall_s']:9.2f} {ours_cold['wall_s']:10.2f} "
            f"{lm_eval['wall_s'] / ours_cold['wall_s']:6.1f}x {ours_warm['wall_s']:10.3f}"
        )
    out = HERE / "results" / "ruler_generation.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    print(f"\nsaved {out}")


if __name__ == "__main__":
    main()
