"""Decode speed of Dynamic PIC: shipped (cached) vs vanilla HF decoding vs the Algorithm-1 oracle.

Llama-style model (hidden 512, 8 heads, 4 layers, vocab 32k, fp32, random init), a 4096-token prompt,
128 new tokens, batch 1, greedy, on CPU. Decode tokens/s = (new tokens - 1) / (time of generate with
all new tokens - time of generate with one new token), median of ``--repeats`` runs. Prints a table
and writes benchmarks/results/dynamic_pic_decode.json.

    python benchmarks/dynamic_pic_decode.py [--prompt 4096] [--new 128] [--repeats 3] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from harness import apply_pic, remove_pic


def build_model(device: str, dtype: torch.dtype) -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=32000,
        hidden_size=512,
        intermediate_size=1376,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=8,
        max_position_embeddings=8192,
    )
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    return LlamaForCausalLM(config).to(device=device, dtype=dtype).eval()


def timed_generate(model, ids, new_tokens: int) -> tuple[float, torch.Tensor]:
    if ids.is_cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=False,
            pad_token_id=0,
        )
    if ids.is_cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - start, out


def decode_rate(model, ids, new_tokens: int, repeats: int) -> tuple[float, torch.Tensor]:
    timed_generate(model, ids[:, :256], 4)  # warm-up
    rates, out = [], None
    for _ in range(repeats):
        prefill, _ = timed_generate(model, ids, 1)
        total, out = timed_generate(model, ids, new_tokens)
        rates.append((new_tokens - 1) / (total - prefill))
    return statistics.median(rates), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompt", type=int, default=4096)
    parser.add_argument("--new", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--ratio", type=float, default=4.0)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "dynamic_pic_decode.json"))
    args = parser.parse_args()

    load_before = os.getloadavg()  # CPU timings on a shared machine are only comparable when it was quiet
    model = build_model(args.device, getattr(torch, args.dtype))
    ids = torch.randint(3, 32000, (1, args.prompt), generator=torch.Generator().manual_seed(1)).to(args.device)
    rows = {}
    rows["vanilla"], _ = decode_rate(model, ids, args.new, args.repeats)
    apply_pic(model, "dynamic", ratio=args.ratio, initial=4, recent=200, impl="cached")
    rows["dynamic_shipped"], shipped_out = decode_rate(model, ids, args.new, args.repeats)
    apply_pic(model, "dynamic", ratio=args.ratio, initial=4, recent=200, impl="reference")
    rows["dynamic_oracle"], oracle_out = decode_rate(model, ids, args.new, args.repeats)
    remove_pic(model)

    result = {
        "setup": {
            **vars(args),
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "machine": platform.processor() or platform.machine(),
            "gpu": torch.cuda.get_device_name() if args.device.startswith("cuda") else None,
            "load_average_1_5_15_min": {"before": load_before, "after": os.getloadavg()},
        },
        "decode_tokens_per_s": rows,
        "ratios": {
            "shipped_vs_vanilla": rows["dynamic_shipped"] / rows["vanilla"],
            "shipped_vs_oracle": rows["dynamic_shipped"] / rows["dynamic_oracle"],
            "oracle_vs_vanilla": rows["dynamic_oracle"] / rows["vanilla"],
        },
        "shipped_tokens_equal_oracle": bool(torch.equal(shipped_out, oracle_out)),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(
        f"decode tokens/s after a {args.prompt}-token prompt, {args.new} new tokens, batch 1, "
        f"{args.dtype} on {args.device} ({torch.get_num_threads()} threads)"
    )
    for name, rate in rows.items():
        print(f"  {name:<16} {rate:8.2f} tok/s   {rate / rows['vanilla']:.3f}x vanilla")
    print(
        f"  shipped / oracle = {result['ratios']['shipped_vs_oracle']:.2f}x; "
        f"shipped tokens equal oracle tokens: {result['shipped_tokens_equal_oracle']}"
    )
    print(f"written to {out}")


if __name__ == "__main__":
    main()
