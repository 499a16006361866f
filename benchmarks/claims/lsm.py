"""Claim: LSM tracks long-context ability (the LSM paper)."""

from __future__ import annotations

import time

import numpy as np

from claims.common import Context, corr_text, layer_bar, log, pic, safe_correlation
from claims.longppl import plot_scatter


def claim_lsm(ctx: Context) -> dict:
    from harness.lsm.estimator import lsm_overlap
    from harness.lsm.formulas import length_range

    s = ctx.s
    lo, hi = length_range(s.lsm_length)
    need = hi + (hi - lo)
    ids = ctx.ids[:need]
    rows = {}
    for variant in s.corr_variants:
        t0 = time.perf_counter()
        with pic(ctx.model, variant), layer_bar(ctx.model, f"LSM {variant} @ {s.lsm_length}", s.lsm_length):
            values = lsm_overlap(ctx.model, ids, s.lsm_length, s.lsm_samples, seed=s.seed, batch_size=1)
        seconds = time.perf_counter() - t0
        rows[variant] = {"lsm": float(np.mean(values)), "samples": values, "seconds": round(seconds, 1)}
        log(f"  LSM     {variant:<15} L={s.lsm_length}  {seconds:6.1f} s  LSM {rows[variant]['lsm']:.4f}")
    niah = {v: ctx.niah(v) for v in s.corr_variants}
    names = s.corr_variants
    lsm = [rows[v]["lsm"] for v in names]
    score = [niah[v]["score"] for v in names]
    c = safe_correlation(lsm, score)
    lp = ctx._longppl
    c_ppl = safe_correlation(lsm, [lp["rows"][v]["ppl"] for v in names]) if lp else None
    log(
        f"\nLSM (L={s.lsm_length}, suffix lengths in [{lo}, {hi}], {s.lsm_samples} window pair(s) per variant, "
        "overlap estimator) vs needle retrieval score"
    )
    log(f"{'variant':<16}{'LSM':>10}{'NIAH score':>12}")
    for v in names:
        log(f"{v:<16}{rows[v]['lsm']:>10.4f}{niah[v]['score']:>12.1f}")
    log(f"  score vs LSM: Pearson {corr_text(c)}, Spearman {corr_text(c, 'spearman')} (n={len(names)})")
    if c is None:
        verdict = "not reproduced at this scale (correlation undefined: a constant column)"
    else:
        verdict = "reproduced" if c["pearson"]["r"] <= -0.5 else "not reproduced at this scale"
    png = plot_scatter(
        [(lsm, f"LSM (L = {s.lsm_length})", c)],
        score,
        names,
        "needle retrieval accuracy (%)",
        "LSM vs long-context score (the LSM paper)",
        ctx.output / "paper_claims_lsm.png",
    )
    return {
        "verdict": verdict,
        "paper": "Pearson LSM vs LongBench-E -0.85, vs long PPL +0.85 (Table 1)",
        "ours": f"Pearson with NIAH {corr_text(c)}" + (f"; with PPL {corr_text(c_ppl)}" if c_ppl else ""),
        "n": f"{len(names)} variants, {s.lsm_samples} window pair(s) each",
        "settings": {"L": s.lsm_length, "suffix_lengths": [lo, hi], "samples": s.lsm_samples, "tokens": need},
        "rows": {v: {**rows[v], "niah_score": niah[v]["score"]} for v in names},
        "correlation_score": c,
        "correlation_ppl": c_ppl,
        "rule": "reproduced when Pearson(LSM, score) <= -0.5",
        "png": png.name,
    }


def md_lsm(c: dict, s: dict) -> list[str]:
    st = c["settings"]
    out = [
        f"LSM with L = {st['L']} (suffix lengths {st['suffix_lengths'][0]}..{st['suffix_lengths'][1]}), overlap "
        f"estimator (paper Sec. 4.2), {st['samples']} window pair(s) per variant on the essays, seed fixed "
        "(the same windows for every variant). Lower LSM = better aligned.",
        "",
        "| variant | LSM | NIAH score |",
        "|---|---|---|",
    ]
    for v, r in c["rows"].items():
        out.append(f"| {v} | {r['lsm']:.4f} | {r['niah_score']:.1f} |")
    out += ["", "| correlation | Pearson r [95% CI] | Spearman rho [95% CI] | n |", "|---|---|---|---|"]
    for label, key in (("LSM vs NIAH score", "correlation_score"), ("LSM vs PPL", "correlation_ppl")):
        stats = c.get(key)
        out.append(
            f"| {label} | {corr_text(stats)} | {corr_text(stats, 'spearman')} | {stats['n'] if stats else '-'} |"
        )
    out += ["", f"Rule: {c['rule']}.", ""]
    return out
