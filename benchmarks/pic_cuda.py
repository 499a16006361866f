"""PIC on a CUDA GPU, fp32 and bf16: the PIC hooks there against the CPU, and Dynamic PIC's cached decode.

For each family of ``harness.models.tiny.ARCHITECTURES``, a random-init model built in code (hidden 256,
4 layers, 4 heads / 2 KV heads, vocab 4096), a batch of 2 x 512 tokens (the second left-padded by 64):

* **CPU vs GPU**: max |logit diff| over the real tokens of the prefill under naive (s_cr 2), NTK-aware
  (s_rr 4) and Dynamic PIC (s_cr 2, l_ic 4, l_rc 64), the model on CUDA in fp32 and in bf16 against the same
  model on CPU in fp32 (which the suite checks against the reference forwards);
* **Dynamic PIC on CUDA**: greedy ``generate`` of 64 tokens, the shipped cached path against Algorithm 1
  (``pic_impl=reference``) in fp32: tokens equal or the first step that differs, and max |logit diff|;
* **speed**: decode tokens/s of vanilla and Dynamic PIC (cached), bf16, batch 1, a 4096-token prompt, 128 new
  tokens: (new - 1) / (time with all new tokens - time with one), median of 3.

Writes the JSON to ``--out`` and prints a table. Needs a CUDA device (the suite runs on CPU only).

    python benchmarks/pic_cuda.py [--families llama,glm] [--out benchmarks/results/pic_cuda.json]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness import apply_pic, remove_pic  # noqa: E402
from harness.models.tiny import ARCHITECTURES, tiny_config  # noqa: E402
from harness.pic.inference import Inference  # noqa: E402

METHODS = {
    "naive": Inference(method="naive", ratio=2.0),
    "ntk": Inference(method="ntk", ratio=4.0),
    "dynamic": Inference(method="dynamic", ratio=2.0, initial=4, recent=64),
}


def build(arch: str):
    from transformers import AutoModelForCausalLM

    config = tiny_config(arch, vocab_size=4096, hidden=256, layers=4, heads=4, kv_heads=2, max_positions=8192)
    config._attn_implementation = "eager" if arch == "gemma2" else "sdpa"
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config).eval()


def logits(model, inference: Inference, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    device = next(model.parameters()).device
    apply_pic(model, inference)
    try:
        with torch.no_grad():
            return model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits.float().cpu()
    finally:
        remove_pic(model)


def generate(model, inference: Inference | None, ids: torch.Tensor, new: int, scores: bool = False):
    if inference is not None:
        apply_pic(model, inference)
    try:
        with torch.no_grad():
            return model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=new,
                min_new_tokens=new,
                do_sample=False,
                pad_token_id=0,
                output_logits=scores,
                return_dict_in_generate=scores,
            )
    finally:
        if inference is not None:
            remove_pic(model)


def decode_rate(model, inference: Inference | None, ids: torch.Tensor, new: int) -> float:
    def timed(n: int) -> float:
        torch.cuda.synchronize()
        start = time.perf_counter()
        generate(model, inference, ids, n)
        torch.cuda.synchronize()
        return time.perf_counter() - start

    timed(4)
    return statistics.median((new - 1) / (timed(new) - timed(1)) for _ in range(3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default=",".join(ARCHITECTURES))
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/pic_cuda.json"))
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("pic_cuda: needs a CUDA device")
    torch.manual_seed(1)
    ids = torch.randint(3, 4096, (2, 512))
    mask = torch.ones_like(ids)
    mask[1, :64] = 0
    real = mask.bool()
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "families": {}}
    import transformers

    out["transformers"] = transformers.__version__
    for arch in args.families.split(","):
        row: dict = {}
        try:
            cpu = build(arch)
            gpu32 = copy.deepcopy(cpu).cuda()
            gpu16 = copy.deepcopy(cpu).to("cuda", torch.bfloat16)
            for name, inference in METHODS.items():
                base = logits(cpu, inference, ids, mask)
                row[name] = {
                    dtype: (logits(model, inference, ids, mask) - base)[real].abs().max().item()
                    for dtype, model in (("fp32", gpu32), ("bf16", gpu16))
                }
            prompt = ids[:1, :256].cuda()
            got = {
                impl: generate(gpu32, METHODS["dynamic"].replace(impl=impl), prompt, 64, scores=True)
                for impl in ("cached", "reference")
            }
            a, b = (got[i].sequences[0, 256:].tolist() for i in ("cached", "reference"))
            row["dynamic_cached_vs_reference"] = {
                "tokens_equal": a == b,
                "first_difference": next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None),
                "max_logit_diff": max(
                    (x.float() - y.float()).abs().max().item()
                    for x, y in zip(got["cached"].logits, got["reference"].logits)
                ),
            }
            long = torch.randint(3, 4096, (1, 4096), device="cuda")
            vanilla = decode_rate(gpu16, None, long, 128)
            dynamic = decode_rate(gpu16, METHODS["dynamic"], long, 128)
            row["decode_tok_s_bf16"] = {"vanilla": vanilla, "dynamic": dynamic, "ratio": dynamic / vanilla}
        except Exception as err:  # a family that fails is reported, the others still run
            row["error"] = f"{type(err).__name__}: {err}"[:500]
        out["families"][arch] = row
        print(arch, json.dumps(row), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
