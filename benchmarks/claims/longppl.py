"""Claim: LongPPL tracks long-context ability, PPL does not (the LongPPL paper)."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import torch

from claims.common import Context, corr_text, fmt, layer_bar, log, pic, safe_correlation
from harness.models.scoring import score_tokens


def longppl_rows(ctx: Context) -> dict:
    """LongPPL / PPL of every correlation variant on the first ``longppl_tokens`` essay tokens (cached)."""
    if ctx._longppl is not None:
        return ctx._longppl
    from harness.longppl.formulas import KeySettings, document_stats, short_windows, summarize
    from harness.longppl.keytokens import KeyTokenCache, key_tokens_for_texts

    s = ctx.s
    text = ctx.text_of(s.longppl_tokens)
    enc = ctx.tok(text, add_special_tokens=False, return_offsets_mapping=True)
    same = enc["input_ids"] == ctx.ids[: s.longppl_tokens].tolist()
    windows = short_windows(s.longppl_tokens, s.longppl_k, s.longppl_d)[1:]  # the first reuses the long pass
    lengths = [e - b for b, e in windows]
    n_forwards = 1 + sum(math.ceil(lengths.count(n) / 4) for n in set(lengths))  # batches of 4 equal windows
    t0 = time.perf_counter()
    with (
        pic(ctx.model, "vanilla"),
        layer_bar(ctx.model, "evaluator key tokens", s.longppl_tokens, n_forwards=n_forwards),
    ):
        key = key_tokens_for_texts(
            [text],
            (ctx.model, ctx.tok),
            KeySettings(s.longppl_k, s.longppl_d, s.alpha, s.beta),
            cache=KeyTokenCache(),
            evaluator_id=f"{ctx.folder} (vanilla)",
        )[0]
    key_seconds = time.perf_counter() - t0
    key_positions = [i for i, d in enumerate(key.lsd) if d is not None and d > s.alpha and key.lcl[i] > s.beta]
    rows = {}
    for variant in s.corr_variants:
        if same:
            lp = ctx.logprobs(variant, s.longppl_tokens)
        else:  # tokenisation of the cut text differs from the stream: score it on its own
            ids = torch.tensor([enc["input_ids"]])
            with pic(ctx.model, variant):
                lp = score_tokens(ctx.model, ids, torch.ones_like(ids))[0]
        stats = document_stats(lp.tolist(), enc["offset_mapping"], key)
        rows[variant] = summarize(stats, n_token=len(enc["input_ids"]))
    ctx._longppl = {
        "rows": rows,
        "key_seconds": round(key_seconds, 1),
        "n_tokens": len(enc["input_ids"]),
        "n_key_evaluator": len(key_positions),
        "key_positions_range": [min(key_positions), max(key_positions)] if key_positions else None,
        "stream_tokenisation_reused": same,
    }
    return ctx._longppl


def claim_longppl(ctx: Context) -> dict:
    s = ctx.s
    lp = longppl_rows(ctx)
    niah = {v: ctx.niah(v) for v in s.corr_variants}
    names = s.corr_variants
    score = [niah[v]["score"] for v in names]
    longppl = [lp["rows"][v]["longppl"] if lp["rows"][v]["longppl"] is not None else float("nan") for v in names]
    ppl = [lp["rows"][v]["ppl"] for v in names]
    c_long = safe_correlation(longppl, score)
    c_ppl = safe_correlation(ppl, score)
    log(
        f"\nLongPPL (evaluator: vanilla, K={s.longppl_k}, d={s.longppl_d}, alpha={s.alpha}, beta={s.beta}) and PPL "
        f"on {lp['n_tokens']} essay tokens; long-context score = needle retrieval accuracy at {s.niah_lengths}"
    )
    log(f"{'variant':<16}{'LongPPL':>10}{'keys':>6}{'PPL':>9}{'NIAH score':>12}  per length")
    for v in names:
        r = lp["rows"][v]
        log(
            f"{v:<16}{fmt(r['longppl']):>10}{r['n_key_token']:>6}{fmt(r['ppl']):>9}{niah[v]['score']:>12.1f}  "
            + " ".join(f"{L}:{a:.0f}" for L, a in niah[v]["by_length"].items())
        )
    log(f"  score vs LongPPL: Pearson {corr_text(c_long)}, Spearman {corr_text(c_long, 'spearman')} (n={len(names)})")
    log(f"  score vs PPL:     Pearson {corr_text(c_ppl)}, Spearman {corr_text(c_ppl, 'spearman')} (n={len(names)})")
    if c_long is None:
        verdict = "not reproduced at this scale (correlation undefined: a constant column)"
    else:
        r_long = c_long["pearson"]["r"]
        r_ppl = c_ppl["pearson"]["r"] if c_ppl else 0.0
        ok = r_long <= -0.5 and r_long < r_ppl - 0.3
        verdict = "reproduced" if ok else "not reproduced at this scale"
    png = plot_scatter(
        [(longppl, "LongPPL (key tokens of the vanilla evaluator)", c_long), (ppl, "PPL", c_ppl)],
        score,
        names,
        "needle retrieval accuracy (%)",
        "LongPPL / PPL vs long-context score (the LongPPL paper)",
        ctx.output / "paper_claims_longppl.png",
    )
    return {
        "verdict": verdict,
        "paper": "Pearson with LongBench: LongPPL -0.96, PPL -0.11 (Qwen2-72B evaluator, GovReport, 9 models)",
        "ours": f"Pearson with NIAH: LongPPL {corr_text(c_long)}, PPL {corr_text(c_ppl)}",
        "n": f"{len(names)} variants (no statistical power)",
        "settings": {
            "tokens": lp["n_tokens"],
            "K": s.longppl_k,
            "d": s.longppl_d,
            "alpha": s.alpha,
            "beta": s.beta,
            "niah_lengths": s.niah_lengths,
            "needles_per_length": s.niah_needles,
        },
        "rows": {v: {**lp["rows"][v], "niah": niah[v]} for v in names},
        "evaluator_key_tokens": lp["n_key_evaluator"],
        "key_positions_range": lp["key_positions_range"],
        "key_token_seconds": lp["key_seconds"],
        "correlation_longppl": c_long,
        "correlation_ppl": c_ppl,
        "rule": "reproduced when Pearson(LongPPL, score) <= -0.5 and at least 0.3 below Pearson(PPL, score)",
        "png": png.name,
    }


def plot_scatter(series, score, names, y_label, title, path: Path) -> Path:
    from harness.reporting.plots import pyplot, save_png

    plt = pyplot()
    fig, axes = plt.subplots(1, len(series), figsize=(5.2 * len(series), 4.2), dpi=110, squeeze=False)
    for ax, (x, x_label, stats) in zip(axes[0], series):
        xa, ya = np.asarray(x, float), np.asarray(score, float)
        ax.scatter(xa, ya, zorder=3)
        for xi, yi, name in zip(xa, ya, names):
            if np.isfinite(xi):
                ax.annotate(name, (xi, yi), textcoords="offset points", xytext=(4, 4), fontsize=7)
        ok = np.isfinite(xa)
        if ok.sum() >= 2 and np.ptp(xa[ok]) > 0:
            slope, icpt = np.polyfit(xa[ok], ya[ok], 1)
            grid = np.linspace(xa[ok].min(), xa[ok].max(), 20)
            ax.plot(grid, slope * grid + icpt, linestyle="--", color="gray")
        if stats:
            p = stats["pearson"]
            ax.set_title(
                f"Pearson r = {p['r']:+.2f} (95% CI {p['ci'][0]:+.2f}..{p['ci'][1]:+.2f}), n = {stats['n']}", fontsize=9
            )
        else:
            ax.set_title("correlation undefined", fontsize=9)
        if ok.any() and xa[ok].max() / max(xa[ok].min(), 1e-9) > 50:
            ax.set_xscale("log")
        ax.set_xlabel(x_label)
        ax.set_ylabel(y_label)
        ax.grid(alpha=0.3)
    fig.suptitle(title, fontsize=10)
    return save_png(fig, path)


def md_longppl(c: dict, s: dict) -> list[str]:
    st = c["settings"]
    out = [
        f"LongPPL evaluator: the vanilla model. The LongPPL paper warns that a model judging itself gives no signal; "
        "here the evaluated models are PIC variants of the evaluator, so the key tokens are those where the "
        "unmodified model gains more than alpha nats from context beyond K tokens, and LongPPL asks whether a "
        f"variant still predicts them. Text: the first {st['tokens']} essay tokens (inside the evaluator's "
        f"window, where its key tokens mean something); K={st['K']}, d={st['d']} (the paper's 4096/1024 are "
        f"for 16k-32k texts), alpha={st['alpha']}, beta={st['beta']}. The evaluator finds "
        f"{c['evaluator_key_tokens']} key tokens (positions {c['key_positions_range']}).",
        "",
        f"Long-context score: needle retrieval accuracy in the essays (own test: {st['needles_per_length']} "
        f"needles per length at evenly spaced depths, recall block at the end, greedy via teacher forcing), "
        f"mean over lengths {st['niah_lengths']}.",
        "",
        "| variant | LongPPL | key tokens | PPL | NIAH score | "
        + " | ".join(f"NIAH {L}" for L in st["niah_lengths"])
        + " |",
        "|---|---|---|---|---|" + "---|" * len(st["niah_lengths"]),
    ]
    for v, r in c["rows"].items():
        out.append(
            f"| {v} | {fmt(r['longppl'], 3)} | {r['n_key_token']} | {fmt(r['ppl'], 3)} | "
            f"{r['niah']['score']:.1f} | "
            + " | ".join(f"{r['niah']['by_length'][L]:.0f}" for L in st["niah_lengths"])
            + " |"
        )
    out += [
        "",
        "| correlation with the NIAH score | Pearson r [95% CI] | Spearman rho [95% CI] | n |",
        "|---|---|---|---|",
    ]
    for label, key in (("LongPPL", "correlation_longppl"), ("PPL", "correlation_ppl")):
        stats = c[key]
        out.append(
            f"| {label} | {corr_text(stats)} | {corr_text(stats, 'spearman')} | {stats['n'] if stats else '-'} |"
        )
    out += ["", f"Rule: {c['rule']}. With n = {len(c['rows'])} the CIs span most of [-1, 1]: no statistical power.", ""]
    return out
