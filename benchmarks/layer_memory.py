"""What a forward of a real model holds on the CPU, layer by layer, beside what ``lch plan`` counts for it
(``harness.models.device_sizing.layer_work``, ``predicted_peak`` and ``harness.models.memory.request_need``).

Each measurement is a process of its own (Linux), run with ``MALLOC_MMAP_THRESHOLD_`` fixed at 64 KiB so that a freed
tensor leaves the resident set at once: the model's weights are read by a short warm-up pass first, then forward hooks
on each decoder layer (and on the attention and MLP of layer 1) reset the process's peak resident memory on entry
(``/proc/self/clear_refs``) and read it on exit. Per model and length, fp32, one row:

* ``score``: the scoring path (``hidden_states`` then ``target_logprobs``): per token what layer 1 is given (the
  held part: the embeddings the decoder keeps, the hidden states, the RoPE tables), the peak of its attention and of
  its MLP above that (each with what the layer made before it), and the whole pass's peak, beside ``layer_work``
  (its mask counted in the attention) and ``predicted_peak``;
* ``generate``: ``generate`` of 8 tokens after the prompt: the prefill's peak (its KV cache included) beside
  ``request_need``'s work and cache;
* ``dynamic``: the same under Dynamic PIC (s_cr 4), whose layers keep their prompt's fp32 pre-RoPE keys.

    python benchmarks/layer_memory.py [--models smollm2-135m gemma3-270m] [--lengths 4096 16384]
                                      [--modes score generate dynamic]

Writes benchmarks/results/layer_memory.json (machine, date, load average before and after each process).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KB = 1024


def _status(key: str) -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


class Peaks:
    """The process's peak resident memory, reset on :meth:`reset`; :attr:`overall` keeps the largest seen."""

    def __init__(self) -> None:
        self.overall = 0

    def reset(self) -> None:
        self.overall = max(self.overall, _status("VmHWM:"))
        with open("/proc/self/clear_refs", "w", encoding="ascii") as clear:
            clear.write("5")


def child(model_dir: str, mode: str, tokens: int) -> dict:
    """One measurement (in a process of its own, under a fixed mmap threshold)."""
    import torch
    from transformers import AutoModelForCausalLM

    from harness.models.attention import use_blocked_masks
    from harness.models.scoring import hidden_states, target_logprobs

    torch.set_num_threads(2)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    use_blocked_masks(model)
    if mode == "dynamic":
        from harness.pic.hf import apply_pic
        from harness.pic.inference import Inference

        apply_pic(model, Inference(method="dynamic", ratio=4.0))
    ids = (torch.arange(tokens) * 7919 % 30000 + 100)[None]
    ones = torch.ones_like(ids)
    with torch.inference_mode():  # every weight read once: what follows is the pass's own memory
        if mode == "score":
            target_logprobs(model, hidden_states(model, ids[:, :64], ones[:, :64], free=None), ids[:, :64], free=None)
        else:
            model.generate(input_ids=ids[:, :64], attention_mask=ones[:, :64], max_new_tokens=2, do_sample=False)
    peaks, seen, first = Peaks(), {}, [True]
    layers = model.get_decoder().layers

    def enter(name):
        def hook(module, args, kwargs=None):
            if first[0]:
                peaks.reset()
                seen[name] = [_status("VmRSS:")]

        return hook

    def leave(name):
        def hook(module, args, output):
            if first[0]:
                seen[name].append(_status("VmHWM:"))
                if name == len(layers) - 1 and mode != "score":
                    first[0] = False  # the prefill is over: decoding steps are not measured

        return hook

    for index, layer in enumerate(layers):
        layer.register_forward_pre_hook(enter(index))
        layer.register_forward_hook(leave(index))
    for part in ("self_attn", "mlp"):
        getattr(layers[1], part).register_forward_pre_hook(enter(part))
        getattr(layers[1], part).register_forward_hook(leave(part))
    start = _status("VmRSS:")
    peaks.reset()
    peaks.overall = 0
    with torch.inference_mode():
        if mode == "score":
            target_logprobs(model, hidden_states(model, ids, ones, free=None), ids, free=None)
        else:
            model.generate(input_ids=ids, attention_mask=ones, max_new_tokens=8, do_sample=False)
    peaks.reset()
    row = {"peak_bytes": peaks.overall - start}
    if mode == "score":
        given = seen[1][0]  # what layer 1 is given: held through the decoder
        row.update(
            held_per_token=(given - start) / tokens,  # a phase: its peak above what the layer was given
            attention_per_token=(seen["self_attn"][1] - given) / tokens,
            mlp_per_token=(seen["mlp"][1] - given) / tokens,
        )
    return row


def planned(model_dir: str, mode: str, tokens: int) -> dict:
    """What the plan counts for the same pass."""
    from harness.models.device_sizing import layer_work, mask_bytes, predicted_peak
    from harness.models.memory import DynamicPic, meta_model, request_need
    from harness.pic.hf.rope_layout import kept_layers

    model = meta_model(model_dir, "float32")
    if mode == "score":
        work = layer_work(model)
        return {
            "planned_peak_bytes": predicted_peak(model, tokens, 1, None, "cpu"),
            "planned_held_per_token": work.held,
            "planned_attention_per_token": work.attention + mask_bytes(model, tokens) / tokens,
            "planned_mlp_per_token": work.mlp,
        }
    dynamic = None
    if mode == "dynamic":
        layers = model.config.num_hidden_layers - len(kept_layers(model.config))
        dynamic = DynamicPic("cached", layers)
    need = request_need(model, tokens, 8, dynamic=dynamic)
    return {"planned_peak_bytes": need.work + need.cache}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["smollm2-135m", "gemma3-270m"])
    parser.add_argument("--lengths", type=int, nargs="+", default=[4096, 16384])
    parser.add_argument(
        "--modes", nargs="+", choices=["score", "generate", "dynamic"], default=["score", "generate", "dynamic"]
    )
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "layer_memory.json"))
    parser.add_argument("--child", nargs=3, metavar=("MODEL_DIR", "MODE", "TOKENS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], int(args.child[2]))))
        return
    bin_dir = Path(sys.executable).parent
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    rows = []
    for name in args.models:
        model_dir = subprocess.run(
            [str(bin_dir / "lch"), "models", "path", name], check=True, capture_output=True, text=True
        ).stdout.strip()
        for mode in args.modes:
            for tokens in args.lengths:
                load = os.getloadavg()
                done = subprocess.run(
                    [sys.executable, __file__, "--child", model_dir, mode, str(tokens)],
                    capture_output=True,
                    text=True,
                    check=True,
                    env={**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"},
                )
                row = {
                    "model": name,
                    "mode": mode,
                    "tokens": tokens,
                    **json.loads(done.stdout.strip().splitlines()[-1]),
                    **planned(model_dir, mode, tokens),
                    "load_before": load,
                    "load_after": os.getloadavg(),
                }
                row["planned_over_measured"] = row["planned_peak_bytes"] / row["peak_bytes"]
                rows.append(row)
                per_token = {k: round(v / KB, 2) for k, v in row.items() if k.endswith("per_token")}
                print(
                    f"{name} {mode} {tokens}: measured {row['peak_bytes'] / tokens / KB:.2f} KB a token, planned "
                    f"{row['planned_peak_bytes'] / tokens / KB:.2f} ({row['planned_over_measured']:.3f}x) "
                    f"{per_token or ''}",
                    flush=True,
                )
    Path(args.output).write_text(
        json.dumps(
            {
                "machine": f"{os.uname().machine}, {os.cpu_count()} cores",
                "commit": commit,
                "date": time.strftime("%Y-%m-%d %H:%M"),
                "dtype": "float32",
                "rows": rows,
            },
            indent=1,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
