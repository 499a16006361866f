"""How LongPPL's short windows start, measured on both registry models as evaluators.

The first ``--tokens`` evaluator tokens of the essay stream (the essays joined longest first, as in
paper_claims.py), ``K``/``d`` windows, paper thresholds; for each evaluator and each ``short_start``
(``text``: the reference package's slices; ``bos``: the evaluator's BOS first): the key-token count, the
number of tokens with LSD > alpha, the mean LSD, the key spans, and seconds. Writes
benchmarks/results/longppl_short_start.json (with the load average).

    python benchmarks/longppl_short_start.py [--tokens 8192] [--k 1024] [--d 512]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.longppl.estimator import find_key_tokens  # noqa: E402
from harness.models.fetch import fetch_model  # noqa: E402

ESSAYS = ROOT.parent / "shared" / "data" / "paul_graham_essays"


def essay_stream(tokenizer) -> str:
    texts = {f.name: f.read_text(encoding="utf-8").strip() for f in sorted(ESSAYS.glob("*.txt"))}
    sizes = {n: len(tokenizer(t, add_special_tokens=False)["input_ids"]) for n, t in texts.items()}
    return "\n\n".join(texts[n] for n in sorted(texts, key=lambda n: (-sizes[n], n)))


def main() -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--k", type=int, default=1024)
    parser.add_argument("--d", type=int, default=512)
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/longppl_short_start.json"))
    args = parser.parse_args()
    torch.set_num_threads(2)
    before = os.getloadavg()
    rows = []
    for name in ("gemma3-270m", "smollm2-135m"):
        folder = fetch_model(name)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
        tok = AutoTokenizer.from_pretrained(folder)
        text = essay_stream(tok)
        enc = tok(text, return_offsets_mapping=True)
        text = text[: enc["offset_mapping"][args.tokens - 1][1]]
        adds_bos = enc["input_ids"][0] == tok.bos_token_id
        for start in ("text", "bos"):
            t0 = time.perf_counter()
            keys = find_key_tokens(text, model, tok, args.k, args.d, 2.0, -2.0, start)
            lsd = [x for x in keys.lsd if x is not None]
            n_key = sum(1 for a, b in zip(keys.lsd, keys.lcl) if a is not None and a > 2.0 and b > -2.0)
            row = {
                "evaluator": name,
                "tokenizer_adds_bos": bool(adds_bos),
                "short_start": start,
                "key_tokens": n_key,
                "lsd_above_alpha": sum(x > 2.0 for x in lsd),
                "mean_lsd": sum(lsd) / len(lsd),
                "spans": [text[a:b] for a, b in keys.spans],
                "seconds": round(time.perf_counter() - t0, 1),
            }
            rows.append(row)
            print(
                f"{name:<14} adds BOS {row['tokenizer_adds_bos']!s:<5} short_start={start:<4} key tokens "
                f"{n_key:>3}  LSD>2 {row['lsd_above_alpha']:>4}  mean LSD {row['mean_lsd']:.3f}  "
                f"({row['seconds']} s)",
                flush=True,
            )
        del model
    setup = {
        **vars(args),
        "alpha": 2.0,
        "beta": -2.0,
        "threads": torch.get_num_threads(),
        "load_average_1_5_15_min": {"before": before, "after": os.getloadavg()},
    }
    Path(args.out).write_text(json.dumps({"setup": setup, "rows": rows}, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
