"""What ``lch regress`` prints and writes of a gate's rows (:class:`harness.reporting.regress.Comparison`): the text
table, the exit code's words, and JUnit XML for CI (one test case per gated metric; an unusable input as one error)."""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from harness.metrics.paired import PairedDifference
from harness.reporting.regress import Comparison


def format_table(rows: list[Comparison]) -> str:
    """The gate's table; with a paired row, the paired columns too (95 % interval of the delta, p, MDE, n; empty
    for rows gated on aggregates), and the rows' notes below it."""
    if not any(r.paired is not None for r in rows):
        lines = [f"{'metric':50s} {'baseline':>12s} {'run':>12s} {'delta':>12s} {'tolerance':>10s}  status"]
        for r in rows:
            value = "" if r.value is None else f"{r.value:12.6g}"
            delta = "" if r.delta is None else f"{r.delta:+12.6g}"
            lines.append(f"{r.metric:50s} {r.baseline:12.6g} {value:>12s} {delta:>12s} {r.tolerance:10.4g}  {r.status}")
        return "\n".join(lines + [f"note: {r.metric}: {r.note}" for r in rows if r.note])
    lines = [
        f"{'metric':40s} {'baseline':>10s} {'run':>10s} {'delta':>10s} {'95% interval':>22s} {'p':>9s} "
        f"{'MDE':>9s} {'n':>6s} {'tolerance':>9s}  status"
    ]
    for r in rows:
        value = "" if r.value is None else f"{r.value:10.6g}"
        delta = "" if r.delta is None else f"{r.delta:+10.4g}"
        d = r.paired
        interval = "" if d is None or d.low is None else f"[{d.low:+.4g}, {d.high:+.4g}]"
        p = "" if d is None else f"{d.p_value:9.3g}"
        mde = "" if d is None or d.mde is None else f"{d.mde:9.3g}"
        n = "" if d is None else str(d.n)
        status = r.status if d is not None or r.status == "missing" else f"{r.status} (aggregate)"
        lines.append(
            f"{r.metric:40s} {r.baseline:10.6g} {value:>10s} {delta:>10s} {interval:>22s} {p:>9s} {mde:>9s} "
            f"{n:>6s} {r.tolerance:9.4g}  {status}"
        )
    return "\n".join(lines + [f"note: {r.metric}: {r.note}" for r in rows if r.note])


def _text(value: object) -> str:
    return "" if value is None else f"{value:.6g}" if isinstance(value, float) else str(value)


def _paired_words(r: Comparison, d: PairedDifference) -> str:
    interval = "" if d.low is None else f", {d.confidence:.0%} interval [{d.low:+.4g}, {d.high:+.4g}]"
    mde = "" if d.mde is None else f", MDE {d.mde:.3g}"
    return (
        f"paired delta {d.delta:+.6g} (run - baseline) over n={d.n} documents{interval}, p={d.p_value:.3g} "
        f"({d.test}, alpha {d.alpha:g}){mde}, tolerance {r.tolerance:.4g}: {r.status}"
    )


def junit_error(message: str, suite: str) -> str:
    """JUnit of a gate that could not compare (exit 2 or 3): one test case in error with the reason."""
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name={quoteattr(suite)} tests="1" failures="0" '
        f'errors="1">\n<testcase classname={quoteattr(suite)} name="lch regress"><error message='
        f"{quoteattr(message)}>{escape(message)}</error></testcase>\n</testsuite>\n"
    )


def junit_xml(rows: list[Comparison], suite: str) -> str:
    """One test case per metric; regressions and missing metrics are failures."""
    failures = sum(r.status in ("regressed", "missing") for r in rows)
    cases = []
    for r in rows:
        case = f"<testcase classname={quoteattr(suite)} name={quoteattr(r.metric)}"
        words = _paired_words(r, r.paired) if r.paired is not None else ""
        inner = ""
        if r.paired is not None:
            d = r.paired
            properties = {
                "delta": d.delta,
                "ci_low": d.low,
                "ci_high": d.high,
                "confidence": d.confidence,
                "p_value": d.p_value,
                "test": d.test,
                "mde": d.mde,
                "n": d.n,
                "alpha": d.alpha,
                "tolerance": r.tolerance,
            }
            inner += (
                "<properties>"
                + "".join(f"<property name={quoteattr(k)} value={quoteattr(_text(v))}/>" for k, v in properties.items())
                + "</properties>"
            )
        if r.status in ("regressed", "missing"):
            if r.value is None:
                message = f"{r.metric} missing from the run"
            elif r.paired is not None:
                message = f"{r.metric}: {words}"
            elif r.status == "missing":
                message = f"{r.metric}: no paired document ({r.note})"
            else:
                message = (
                    f"{r.metric}: {r.value:.6g} vs baseline {r.baseline:.6g} (delta {r.delta:+.6g}, tolerance "
                    f"{r.tolerance:.4g})"
                )
            inner += f"<failure message={quoteattr(message)}>{escape(message)}</failure>"
        if words or r.note:
            inner += f"<system-out>{escape('; '.join(w for w in (words, r.note) if w))}</system-out>"
        cases.append(case + (f">{inner}</testcase>" if inner else "/>"))
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name={quoteattr(suite)} tests="{len(rows)}" '
        f'failures="{failures}" errors="0">\n' + "\n".join(cases) + "\n</testsuite>\n"
    )
