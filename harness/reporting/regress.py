"""``lch regress``: compare a run with a baseline and gate CI on it.

Baseline JSON (``results/baselines/NAME.json``, see ``results/README.md``)::

    {"name": "...", "created": "...", "source": "<results file>",
     "defaults": {"abs_tol": 0.0, "k": 2.0},
     "metrics": {"<task>/<metric>": {"value": 12.3, "stderr": 0.4, "higher_is_better": false,
                                      "abs_tol": 0.1, "k": 2.0}}}

A metric regresses when it moves in its bad direction by more than ``max(abs_tol, k * stderr)``, where
``stderr`` is the baseline's and the run's combined (``sqrt(s_b^2 + s_r^2)``, missing ones count 0);
per-metric ``abs_tol`` / ``k`` override the defaults. A baseline metric absent from the run is a
regression too (a gate must not pass on missing data). Exit codes: 0 nothing regressed, 1 regression,
2 unusable input.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from harness.errors import DataFormatError
from harness.reporting.runs import Run, read_json


class BaselineError(DataFormatError):
    """A baseline file that cannot be used; the message names the file."""


@dataclass
class Comparison:
    metric: str
    baseline: float
    value: float | None
    tolerance: float
    status: str  # ok | improved | regressed | missing

    @property
    def delta(self) -> float | None:
        return None if self.value is None else self.value - self.baseline


def load_baseline(path: str | Path) -> dict:
    path = Path(path)
    data = read_json(path, BaselineError)
    metrics = data.get("metrics") if isinstance(data, dict) else None
    if not isinstance(metrics, dict) or not metrics:
        raise BaselineError(f"{path}: no 'metrics' object")
    for name, spec in metrics.items():
        if not isinstance(spec, dict) or not isinstance(spec.get("value"), (int, float)) or "higher_is_better" not in spec:
            raise BaselineError(f"{path}: metric {name!r} needs a numeric 'value' and 'higher_is_better'")
    return data


def baseline_from_run(run: Run, name: str, abs_tol: float = 0.0, k: float = 2.0, metrics: list[str] | None = None) -> dict:
    """A baseline holding every metric of ``run`` that has a direction (or the listed ones)."""
    chosen = metrics or [m for m in run.metrics if m in run.higher_is_better]
    missing = [m for m in chosen if m not in run.metrics]
    if missing:
        raise BaselineError(f"{run.path}: no metric {missing[0]!r}")
    return {"name": name, "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "source": str(run.path),
            "defaults": {"abs_tol": abs_tol, "k": k},
            "metrics": {m: {"value": run.metrics[m], "stderr": run.stderrs.get(m),
                            "higher_is_better": run.higher_is_better.get(m, True)} for m in sorted(chosen)}}


def compare(run: Run, baseline: dict) -> list[Comparison]:
    defaults = baseline.get("defaults") or {}
    out = []
    for name, spec in sorted(baseline["metrics"].items()):
        abs_tol = float(spec.get("abs_tol", defaults.get("abs_tol", 0.0)))
        k = float(spec.get("k", defaults.get("k", 2.0)))
        stderr = math.hypot(float(spec.get("stderr") or 0.0), float(run.stderrs.get(name) or 0.0))
        tolerance = max(abs_tol, k * stderr)
        value = run.metrics.get(name)
        if value is None:
            out.append(Comparison(name, spec["value"], None, tolerance, "missing"))
            continue
        change = (value - spec["value"]) * (1 if spec["higher_is_better"] else -1)  # > 0: better
        status = "regressed" if change < -tolerance else "improved" if change > tolerance else "ok"
        out.append(Comparison(name, spec["value"], value, tolerance, status))
    return out


def format_table(rows: list[Comparison]) -> str:
    lines = [f"{'metric':50s} {'baseline':>12s} {'run':>12s} {'delta':>12s} {'tolerance':>10s}  status"]
    for r in rows:
        value = "" if r.value is None else f"{r.value:12.6g}"
        delta = "" if r.delta is None else f"{r.delta:+12.6g}"
        lines.append(f"{r.metric:50s} {r.baseline:12.6g} {value:>12s} {delta:>12s} {r.tolerance:10.4g}  {r.status}")
    return "\n".join(lines)


def exit_code(rows: list[Comparison]) -> int:
    return 1 if any(r.status in ("regressed", "missing") for r in rows) else 0


def junit_xml(rows: list[Comparison], suite: str) -> str:
    """One test case per metric; regressions and missing metrics are failures."""
    failures = sum(r.status in ("regressed", "missing") for r in rows)
    cases = []
    for r in rows:
        case = f"<testcase classname={quoteattr(suite)} name={quoteattr(r.metric)}"
        if r.status in ("regressed", "missing"):
            message = (f"{r.metric} missing from the run" if r.value is None else
                       f"{r.metric}: {r.value:.6g} vs baseline {r.baseline:.6g} (delta {r.delta:+.6g}, tolerance {r.tolerance:.4g})")
            case += f"><failure message={quoteattr(message)}>{escape(message)}</failure></testcase>"
        else:
            case += "/>"
        cases.append(case)
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name={quoteattr(suite)} tests="{len(rows)}" '
            f'failures="{failures}" errors="0">\n' + "\n".join(cases) + "\n</testsuite>\n")
