"""Claim: PIC lengthens long-form answers without more corruption (the PIC paper)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from claims.common import LONGBENCH_WRITE, LONGFORM_VARIANTS, PAPER_LONGFORM, Context, log, pic


def longform_prompts(n: int) -> list[dict]:
    rows = [json.loads(line) for line in LONGBENCH_WRITE.read_text(encoding="utf-8").splitlines() if line.strip()]
    long = [r for r in rows if r["length"] > 2000 and not any("\u4e00" <= c <= "\u9fff" for c in r["prompt"])]
    if n >= len(long):
        return long
    step = len(long) / n
    return [long[int(i * step)] for i in range(n)]


class _TokenBar:
    """A stopping criterion that never stops: it advances a tqdm bar by one generated token."""

    def __init__(self, bar):
        self.bar = bar

    def __call__(self, input_ids, scores, **kwargs):
        self.bar.update(1)
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


@torch.no_grad()
def claim_longform(ctx: Context) -> dict:
    from transformers import StoppingCriteriaList

    from harness.data.words import nltk_length, word_tokenizer_name
    from harness.metrics.generation import (
        corrupted_ratio,
        is_corrupted,
        longbench_write_length,
        rep_n,
        shared_clean_average,
    )
    from harness.models.scoring import left_pad

    s, tok = ctx.s, ctx.tok
    prompts = longform_prompts(s.gen_prompts)
    rendered = [
        tok.apply_chat_template(
            [{"role": "user", "content": p["prompt"]}], tokenize=True, add_generation_prompt=True, return_dict=False
        )
        for p in prompts
    ]
    rendered = [list(r["input_ids"]) if isinstance(r, dict) else list(r) for r in rendered]
    eos = tok.eos_token_id
    ids, mask = left_pad(rendered, tok.pad_token_id)
    out: dict[str, dict] = {}
    for variant in LONGFORM_VARIANTS:
        t0 = time.perf_counter()
        bar = tqdm(total=s.gen_tokens, desc=f"generate {variant} ({len(prompts)} prompts)", unit="tok", leave=False)
        with pic(ctx.model, variant):
            gen = ctx.model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=s.gen_tokens,
                do_sample=False,
                eos_token_id=eos,
                pad_token_id=tok.pad_token_id,
                stopping_criteria=StoppingCriteriaList([_TokenBar(bar)]),
            )
        bar.close()
        samples = []
        for i in range(len(prompts)):
            new = gen[i, ids.shape[1] :].tolist()
            ended = eos in new
            new = new[: new.index(eos)] if ended else new
            text = tok.decode(new, skip_special_tokens=True)
            samples.append(
                {
                    "prompt_id": i,
                    "tokens": len(new),
                    "words": longbench_write_length(text),
                    "nltk_words": nltk_length(text),
                    "eos": ended,
                    "corrupted": is_corrupted(text, ended),
                    "rep4": rep_n(text, 4),
                    "text": text,
                }
            )
        seconds = time.perf_counter() - t0
        out[variant] = {
            "samples": samples,
            "seconds": round(seconds, 1),
            "mean_tokens": float(np.mean([x["tokens"] for x in samples])),
            "mean_words": float(np.mean([x["words"] for x in samples])),
            "eos_rate": float(np.mean([x["eos"] for x in samples])),
            "corrupted_ratio": corrupted_ratio([x["corrupted"] for x in samples]),
            "mean_rep4": float(np.mean([x["rep4"] for x in samples])),
        }
        log(f"  generate {variant:<15} {len(prompts)} prompts x <= {s.gen_tokens} tokens  {seconds:6.1f} s")
    clean = shared_clean_average(
        {v: {x["prompt_id"]: x["words"] for x in d["samples"]} for v, d in out.items()},
        {v: {x["prompt_id"]: x["corrupted"] for x in d["samples"]} for v, d in out.items()},
    )
    base = out["vanilla"]
    per_variant = {}
    for variant in LONGFORM_VARIANTS[1:]:
        d, paper = out[variant], PAPER_LONGFORM[variant]
        ratio_tokens = d["mean_tokens"] / base["mean_tokens"] if base["mean_tokens"] else float("nan")
        ratio_label = d["mean_words"] / base["mean_words"] if base["mean_words"] else float("nan")
        paper_ratio = paper["length"] / paper["base_length"]
        need = 1 + 0.5 * (paper_ratio - 1)
        more_corrupt = sum(x["corrupted"] for x in d["samples"]) > sum(x["corrupted"] for x in base["samples"])
        ok = ratio_tokens >= need and not more_corrupt
        per_variant[variant] = {
            "ratio_tokens": ratio_tokens,
            "ratio_label": ratio_label,
            "paper_ratio": paper_ratio,
            "needed_ratio": need,
            "more_corrupted_than_vanilla": more_corrupt,
            "verdict": "reproduced" if ok else "not reproduced at this scale",
        }
    verdict = (
        "reproduced"
        if all(v["verdict"] == "reproduced" for v in per_variant.values())
        else "not reproduced at this scale"
    )
    capped = base["eos_rate"] < 1.0
    log(
        f"\nLong-form generation: {len(prompts)} LongBench-Write prompts (required length > 2000 words), "
        f"greedy, <= {s.gen_tokens} new tokens"
    )
    log(f"{'variant':<16}{'tokens':>8}{'words':>8}{'EOS rate':>10}{'corrupted':>11}{'rep-4':>7}{'x vanilla':>11}")
    for v, d in out.items():
        r = per_variant.get(v, {}).get("ratio_tokens", 1.0)
        log(
            f"{v:<16}{d['mean_tokens']:>8.1f}{d['mean_words']:>8.1f}{d['eos_rate']:>10.2f}{d['corrupted_ratio']:>11.2f}"
            f"{d['mean_rep4']:>7.2f}{r:>11.2f}"
        )
    for v, d in per_variant.items():
        log(
            f"  {v}: {d['ratio_tokens']:.2f}x vanilla tokens (paper {d['paper_ratio']:.2f}x; needed >= "
            f"{d['needed_ratio']:.2f}x and no more corrupted samples) -> {d['verdict']}"
        )
    png = plot_longform(out, s.gen_tokens, ctx.output / "paper_claims_longform.png")
    return {
        "verdict": verdict,
        "paper": "NTK s_rr=4: 1.49x length, CR 7.3% vs 1.6%; Dynamic s_cr=2: 1.13x, CR 1.6% vs 1.6% "
        "(Llama-3.1-8B, HelloBench, Tables 6/7); headline about 1.5x without more corruption",
        "ours": "; ".join(
            f"{v}: {d['ratio_tokens']:.2f}x tokens, CR {100 * out[v]['corrupted_ratio']:.0f}% "
            f"vs {100 * base['corrupted_ratio']:.0f}%"
            for v, d in per_variant.items()
        ),
        "n": f"{len(prompts)} prompts, <= {s.gen_tokens} tokens",
        "prompts": [{"prompt": p["prompt"], "required_length": p["length"], "type": p["type"]} for p in prompts],
        "variants": out,
        "per_variant": per_variant,
        "shared_clean_average_words": clean,
        "word_tokenizer": word_tokenizer_name(),
        "rule": "a PIC variant reproduces when its mean generated tokens reach at least half the paper's relative "
        "gain over vanilla and it has no more corrupted samples than vanilla",
        "budget_note": (
            f"vanilla stopped by the {s.gen_tokens}-token budget on {100 * (1 - base['eos_rate']):.0f}% "
            "of the prompts: the length ratio is capped"
            if capped
            else "vanilla ended every answer with EOS before the budget"
        ),
        "png": png.name,
    }


def plot_longform(out: dict, budget: int, path: Path) -> Path:
    from harness.reporting.plots import pyplot, save_png

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), dpi=110)
    names = list(out)
    n_prompts = len(out[names[0]]["samples"])
    width = 0.8 / len(names)
    for k, v in enumerate(names):
        tokens = [x["tokens"] for x in out[v]["samples"]]
        xs = np.arange(n_prompts) + k * width
        bars = axes[0].bar(xs, tokens, width, label=v)
        for x, smp, b in zip(xs, out[v]["samples"], bars):
            mark = "C" if smp["corrupted"] else ("" if smp["eos"] else "cap")
            if mark:
                axes[0].text(x, b.get_height(), mark, ha="center", va="bottom", fontsize=7)
    axes[0].axhline(budget, color="gray", linestyle="--", linewidth=1)
    axes[0].set_xticks(np.arange(n_prompts) + 0.4 - width / 2)
    axes[0].set_xticklabels([f"prompt {i}" for i in range(n_prompts)], fontsize=8)
    axes[0].set_ylabel("generated tokens")
    axes[0].set_title(f"per prompt (cap = budget {budget}, C = corrupted)", fontsize=9)
    axes[0].legend(fontsize=8)
    means = [out[v]["mean_tokens"] for v in names]
    crs = [100 * out[v]["corrupted_ratio"] for v in names]
    axes[1].bar(names, means, color=[f"C{i}" for i in range(len(names))])
    for i, (m, c) in enumerate(zip(means, crs)):
        axes[1].text(i, m, f"{m:.0f} tok\nCR {c:.0f}%", ha="center", va="bottom", fontsize=8)
    axes[1].set_ylabel("mean generated tokens")
    axes[1].set_title("mean length and corrupted ratio", fontsize=9)
    axes[1].set_ylim(0, max(means + [1]) * 1.3)
    fig.suptitle("Long-form generation on LongBench-Write prompts (the PIC paper), greedy", fontsize=10)
    return save_png(fig, path)


def md_longform(c: dict, s: dict) -> list[str]:
    out = [
        f"Prompts: {len(c['prompts'])} English LongBench-Write prompts with required length > 2000 words "
        f"(evenly spaced in the file), chat template, greedy, at most {s['gen_tokens']} new tokens (CPU budget; "
        f"the paper lets models write until EOS). Words = LongBench-Write length (ASCII words); "
        f"corrupted = stopped by the budget and repetitive (docs/formulas.md §2). {c['budget_note']}.",
        "",
        "| variant | mean tokens | mean words | EOS rate | corrupted | rep-4 | tokens x vanilla | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v, d in c["variants"].items():
        pv = c["per_variant"].get(v)
        out.append(
            f"| {v} | {d['mean_tokens']:.1f} | {d['mean_words']:.1f} | {d['eos_rate']:.2f} | "
            f"{d['corrupted_ratio']:.2f} | {d['mean_rep4']:.2f} | "
            f"{pv['ratio_tokens']:.2f} (paper {pv['paper_ratio']:.2f})"
            if pv
            else f"| {v} | {d['mean_tokens']:.1f} | {d['mean_words']:.1f} | {d['eos_rate']:.2f} | "
            f"{d['corrupted_ratio']:.2f} | {d['mean_rep4']:.2f} | 1.00"
        )
        out[-1] += f" | {pv['verdict'] if pv else '(baseline)'} |"
    out += ["", f"Rule: {c['rule']}.", ""]
    return out
