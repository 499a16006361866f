"""PIC on every RoPE family: agreement with the references and decode speed against vanilla decoding.

For each family of ``harness.models.tiny.ARCHITECTURES`` a random-init model built in code (hidden 256,
4 layers, 4 heads / 2 KV heads, vocab 4096, fp32; hybrid families keep their layer kinds with the last
layer full-attention RoPE), on CPU:

* **agreement**: max |logit diff| of the prefill (batch 2, left padding, 64 tokens) under naive, NTK-aware
  and Dynamic PIC against the reference forward of tests/pic/test_pic_families.py (the never-patched
  model with explicit positions or base), and of Dynamic PIC's shipped (cached) path against the
  Algorithm-1 implementation over prefill + 48 decode steps;
* **speed**: decode tokens/s of greedy ``generate`` from a ``--prompt``-token prompt, batch 1, under vanilla,
  Dynamic PIC (cached; and Algorithm 1) and naive PIC: (new - 1) / (time with all new tokens - time with one),
  median of ``--repeats``; ratios against vanilla.

Writes benchmarks/results/pic_families.json (with the load average) and prints a table.

    python benchmarks/pic_families.py [--prompt 1024] [--new 64] [--repeats 3] [--families llama,glm]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness import apply_pic, remove_pic  # noqa: E402
from harness.models.tiny import ARCHITECTURES, tiny_config  # noqa: E402
from harness.pic.hf import rope_layout  # noqa: E402
from harness.pic.positions import dynamic_positions, positions_from_mask  # noqa: E402
from tests.pic.test_pic_families import _decode, reference_logits  # noqa: E402

SETTINGS = dict(ratio=4.0, initial=4, recent=128)


def build(arch: str, seed: int = 0):
    from transformers import AutoModelForCausalLM

    config = tiny_config(arch, vocab_size=4096, hidden=256, layers=4, heads=4, kv_heads=2, max_positions=8192)
    config._attn_implementation = "eager" if arch == "gemma2" else "sdpa"
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config).eval()


def agreement(arch: str) -> dict:
    model, plain = build(arch), build(arch)
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 4096, (2, 64), generator=gen)
    mask = torch.ones_like(ids)
    mask[1, :9] = 0
    pos, lengths = positions_from_mask(mask)
    out = {}
    small = dict(ratio=4.0, initial=4, recent=16)
    for method, positions, ntk in (
        ("naive", pos.float() / small["ratio"], None),
        ("ntk", pos, small["ratio"]),
        ("dynamic", dynamic_positions(pos, lengths[:, None], small["ratio"], small["initial"], small["recent"]), None),
    ):
        expected = reference_logits(plain, ids, mask, positions, ntk_ratio=ntk)
        apply_pic(model, method, **small)
        with torch.no_grad():
            got = model(input_ids=ids, attention_mask=mask).logits
        out[f"{method}_prefill_vs_reference"] = ((got - expected) * mask[..., None]).abs().max().item()
    apply_pic(model, "dynamic", impl="reference", layout="contiguous", **small)
    oracle, tokens = _decode(model, ids, mask)
    apply_pic(model, "dynamic", impl="cached", layout="contiguous", **small)
    shipped, _ = _decode(model, ids, mask, tokens=tokens)
    out["dynamic_cached_vs_algorithm1_48_steps"] = max((a - b).abs().max().item() for a, b in zip(shipped, oracle))
    remove_pic(model)
    return out


def decode_rate(model, ids, new: int, repeats: int) -> float:
    def run(n: int) -> float:
        start = time.perf_counter()
        with torch.no_grad():
            model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=n,
                min_new_tokens=n,
                do_sample=False,
                pad_token_id=0,
            )
        return time.perf_counter() - start

    run(4)  # warm-up
    return statistics.median((new - 1) / (run(new) - run(1)) for _ in range(repeats))


def speed(arch: str, prompt: int, new: int, repeats: int) -> dict:
    model = build(arch)
    ids = torch.randint(3, 4096, (1, prompt), generator=torch.Generator().manual_seed(2))
    rates = {"vanilla": decode_rate(model, ids, new, repeats)}
    for name, kwargs in (
        ("dynamic_cached", dict(method="dynamic", impl="cached")),
        ("dynamic_algorithm1", dict(method="dynamic", impl="reference")),
        ("naive", dict(method="naive")),
    ):
        apply_pic(model, **kwargs, **SETTINGS)
        rates[name] = decode_rate(model, ids, new, repeats)
        remove_pic(model)
    return {
        "decode_tokens_per_s": rates,
        "vs_vanilla": {k: v / rates["vanilla"] for k, v in rates.items() if k != "vanilla"},
    }


def needs(arch: str) -> str:
    layout = rope_layout(build(arch))
    kept = sorted(set(layout.kept.values()))
    parts = [f"{len(layout.pic_layers)}/{len(layout.decoder.layers)} PIC layers"]
    if kept:
        parts.append("kept: " + ", ".join(kept))
    if layout.layer_type:
        parts.append(f"rotary per layer type ({layout.layer_type})")
    return "; ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt", type=int, default=1024)
    parser.add_argument("--new", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--families", default=",".join(ARCHITECTURES))
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/pic_families.json"))
    args = parser.parse_args()
    before = os.getloadavg()
    rows = {}
    for arch in args.families.split(","):
        rows[arch] = {
            "layout": needs(arch),
            "agreement": agreement(arch),
            **speed(arch, args.prompt, args.new, args.repeats),
        }
        r = rows[arch]
        print(
            f"{arch:<12} {r['layout']:<60} max|diff| "
            f"{max(r['agreement'].values()):.1e}  decode x vanilla: cached {r['vs_vanilla']['dynamic_cached']:.2f}"
            f" alg1 {r['vs_vanilla']['dynamic_algorithm1']:.2f} naive {r['vs_vanilla']['naive']:.2f}"
            f"  (vanilla {r['decode_tokens_per_s']['vanilla']:.1f} tok/s)",
            flush=True,
        )
    setup = {
        **vars(args),
        "settings": SETTINGS,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "machine": platform.machine(),
        "load_average_1_5_15_min": {"before": before, "after": os.getloadavg()},
    }
    Path(args.out).write_text(json.dumps({"setup": setup, "families": rows}, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
