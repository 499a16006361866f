"""``lch agree RUN_A RUN_B``: two runs of the same tasks compared task by task and sample by sample (documents
paired by ``doc_id``, ``doc_hash`` equal); a task agrees within :class:`Tolerances`."""

from __future__ import annotations

import ast
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.core import results as keys
from harness.core.run_record import FIELDS, RunRecord
from harness.core.tables import markdown
from harness.metrics.common_samples import scored_values
from harness.metrics.paired import paired_test
from harness.reporting.common import on_documents, pooling_rule
from harness.reporting.comparability import SAME_MODEL, check_comparable, check_task_options
from harness.reporting.labels import model_args_of, name_from_results
from harness.reporting.runs import RunError, cautions_of, declared, read_json
from harness.reporting.samples import by_doc, common_tasks, pair_docs, paired_scores, read_rows, run_files

_KINDS = {"token_logprobs": {"token_ids", "logprobs"}, "lsm": {"sce"}, "generate_long": {"text", "ended_with_eos"}}


@dataclass(frozen=True)
class Tolerances:
    """A task agrees when generations match at least ``min_exact_match`` of the time, no token log-probability
    differs by more than ``max_logprob_diff`` and no aggregate by more than both ``max_rel_diff`` (relative) and
    ``max_abs_diff``; defaults fit fp32 on two engines."""

    min_exact_match: float = 1.0
    max_logprob_diff: float = 1e-3
    max_rel_diff: float = 1e-4
    max_abs_diff: float = 1e-6


@dataclass
class ScoreComparison:
    metric: str
    n: int
    mean_a: float
    mean_b: float
    delta: float
    test: str
    p_value: float


@dataclass
class Divergence:
    doc_id: Any
    index: int  # token (or character) index of the first difference
    unit: str  # "token" or "char"
    a: str
    b: str
    context: str  # the text both share just before it


@dataclass
class TaskAgreement:
    task: str
    kind: str
    n_paired: int
    n_unpaired: int = 0
    n_input_mismatch: int = 0
    n_prompt_mismatch: int = 0  # documents sent as other prompts (lm-eval's prompt_hash): e.g. cut otherwise
    n_identical: int = 0  # paired documents whose responses are equal to the last digit
    exact_match: float | None = None
    divergences: list[Divergence] = field(default_factory=list)
    max_logprob_diff: float | None = None
    mean_logprob_diff: float | None = None
    token_mismatch: int = 0
    max_value_diff: float | None = None
    scores: list[ScoreComparison] = field(default_factory=list)
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    agrees: bool = True
    reasons: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------------------- reading runs


def _response(sample: dict) -> Any:
    """The first response of a sample, our request types' dicts parsed back from lm-eval's repr."""
    resps = sample.get("resps") or [[None]]
    value = resps[0][0] if isinstance(resps[0], list) and resps[0] else resps[0]
    if isinstance(value, str) and value.startswith("{'"):
        try:
            parsed = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return value
        if isinstance(parsed, dict) and any(keys <= set(parsed) for keys in _KINDS.values()):
            return parsed
    return value


def _kind(response: Any) -> str:
    if isinstance(response, dict):
        return next(kind for kind, keys in _KINDS.items() if keys <= set(response))
    if isinstance(response, str):
        return "generation"
    if isinstance(response, (list, tuple)) and response and isinstance(response[0], (int, float)):
        return "loglikelihood"
    return "other"


# ----------------------------------------------------------------------------------------- comparing


def _divergence(doc_id: Any, a: str, b: str, tokenizer: Any) -> Divergence:
    if tokenizer is not None:
        ids_a, ids_b = tokenizer.encode(a, add_special_tokens=False), tokenizer.encode(b, add_special_tokens=False)
        i = next((k for k, (x, y) in enumerate(zip(ids_a, ids_b)) if x != y), min(len(ids_a), len(ids_b)))
        piece = lambda ids: tokenizer.decode(ids[i : i + 1]) if i < len(ids) else "<end>"  # noqa: E731
        shared = tokenizer.decode(ids_a[max(0, i - 8) : i])
        return Divergence(doc_id, i, "token", piece(ids_a), piece(ids_b), shared)
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return Divergence(doc_id, i, "char", a[i : i + 1] or "<end>", b[i : i + 1] or "<end>", a[max(0, i - 30) : i])


def compare_task(
    task: str,
    samples_a: dict,
    samples_b: dict,
    metrics_a: dict,
    metrics_b: dict,
    tol: Tolerances,
    tokenizer: Any = None,
    roles: dict[str, str] | None = None,
    pooling: tuple[dict | None, dict | None] = (None, None),
) -> TaskAgreement:
    """One task's agreement; ``roles``: its declared metric roles (they name the per-sample pairs' rows); ``pooling``:
    each run's declared pooling of its metrics (None: not recorded)."""
    pairing = pair_docs(samples_a, samples_b)
    pairs = [(a, b) for _, a, b in pairing.pairs]
    responses = [(_response(a), _response(b)) for a, b in pairs]  # parsed once: token_logprobs reprs are long
    kinds = {_kind(ra) for ra, _ in responses} or {"none"}
    out = TaskAgreement(
        task,
        "/".join(sorted(kinds)),
        len(pairs),
        n_unpaired=pairing.unpaired,
        n_input_mismatch=len(pairing.input_mismatch),
    )
    # tasks cut over-long prompts the same on every engine: a prompt that differs is an engine or template difference
    out.n_prompt_mismatch = sum(
        a.get("prompt_hash") != b.get("prompt_hash") for a, b in pairs if a.get("prompt_hash") and b.get("prompt_hash")
    )
    same = 0
    diffs: list[float] = []  # |token log-prob differences|
    value_diffs: list[float] = []  # |SCE differences|
    for (a, _), (ra, rb) in zip(pairs, responses):
        out.n_identical += ra == rb
        kind = _kind(ra)
        if kind in ("generation", "generate_long"):
            ta, tb = (ra["text"], rb["text"]) if kind == "generate_long" else (ra, rb)
            same += ta == tb
            if ta != tb:
                out.divergences.append(_divergence(a["doc_id"], ta, tb, tokenizer))
        elif kind == "token_logprobs":
            if ra["token_ids"] != rb["token_ids"]:
                out.token_mismatch += 1
                continue
            diffs.extend(abs(x - y) for x, y in zip(ra["logprobs"], rb["logprobs"]))
        elif kind == "lsm":
            value_diffs.extend(abs(x - y) for x, y in zip(ra["sce"], rb["sce"]))
        elif kind == "loglikelihood":
            value_diffs.append(abs(float(ra[0]) - float(rb[0])))
    if kinds & {"generation", "generate_long"} and pairs:
        out.exact_match = same / len(pairs)
    if diffs:
        out.max_logprob_diff, out.mean_logprob_diff = max(diffs), sum(diffs) / len(diffs)
    if value_diffs:
        out.max_value_diff = max(value_diffs)
    for name, va, vb in paired_scores(pairing.pairs, roles):
        test, p = paired_test(va, vb)
        out.scores.append(
            ScoreComparison(
                name, len(va), sum(va) / len(va), sum(vb) / len(vb), sum(vb) / len(vb) - sum(va) / len(va), test, p
            )
        )
    scored_a, scored_b = (scored_values(samples.values()) for samples in (samples_a, samples_b))
    for key in sorted(set(metrics_a) & set(metrics_b)):
        x, y = metrics_a[key], metrics_b[key]
        if (
            isinstance(x, bool)
            or not isinstance(x, (int, float))
            or not isinstance(y, (int, float))
            or "_stderr" in key
            or key.startswith("sample_len")
        ):
            continue
        name = key.split(",")[0] if key.endswith(",none") else key
        if not (math.isfinite(x) and math.isfinite(y)):  # NaN agrees with nothing, itself included
            out.reasons.append(f"{name} is {x} (A) vs {y} (B): a value that could not be computed agrees with nothing")
            continue
        common = _on_common_samples(key, x, y, scored_a, scored_b, pooling)
        if common is not None:  # the runs scored other documents: their aggregates on those both scored
            if common[0] is None:
                out.reasons.append(
                    f"{name}: the runs scored different samples and its logged values do not reproduce "
                    "it, so it is not compared"
                )
                continue
            x, y = common[0]
        rel = abs(y - x) / abs(x) if x else (0.0 if y == x else math.inf)
        out.metrics[name] = {
            "a": x,
            "b": y,
            "delta": y - x,
            "rel": rel,
            **({"n_common": common[1]} if common is not None else {}),
        }
    _verdict(out, tol)
    return out


def _on_common_samples(
    key: str,
    x: float,
    y: float,
    scored_a: dict,
    scored_b: dict,
    pooling: tuple[dict | None, dict | None] = (None, None),
) -> tuple[tuple[float, float] | None, int] | None:
    """None when both runs scored the same documents on ``key`` (or logged none); else ``((A, B) on the documents both
    scored, or None when a run's logged values do not reproduce its value), n)``."""
    docs_a, docs_b = scored_a.get(key) or {}, scored_b.get(key) or {}
    if set(docs_a) == set(docs_b):
        return None
    common = set(docs_a) & set(docs_b)
    rule_a = pooling_rule(pooling[0], key, list(docs_a.values()), x)
    rule_b = pooling_rule(pooling[1], key, list(docs_b.values()), y)
    if rule_a is None or rule_b is None or not common:
        return None, len(common)
    return (on_documents(x, docs_a, common, rule_a), on_documents(y, docs_b, common, rule_b)), len(common)


def _verdict(out: TaskAgreement, tol: Tolerances) -> None:
    if out.n_paired == 0:
        out.reasons.append("no document of one run matches a document of the other")
    if out.n_input_mismatch:
        out.reasons.append(f"{out.n_input_mismatch} documents differ between the runs (doc_hash)")
    if out.n_prompt_mismatch:
        out.reasons.append(f"{out.n_prompt_mismatch} documents were sent as other prompts (prompt_hash)")
    if out.exact_match is not None and out.exact_match < tol.min_exact_match:
        out.reasons.append(
            f"generations identical for {out.exact_match:.1%} of documents (< {tol.min_exact_match:.1%})"
        )
    if out.token_mismatch:
        out.reasons.append(f"{out.token_mismatch} documents were tokenised differently")
    if out.max_logprob_diff is not None and out.max_logprob_diff > tol.max_logprob_diff:
        out.reasons.append(
            f"a token log-probability differs by {out.max_logprob_diff:.3g} (> {tol.max_logprob_diff:g})"
        )
    for name, m in out.metrics.items():
        if m["rel"] > tol.max_rel_diff and abs(m["delta"]) > tol.max_abs_diff:
            out.reasons.append(f"{name} differs by {m['rel']:.3g} relatively ({m['a']:.6g} vs {m['b']:.6g})")
    out.agrees = not out.reasons


def agreement(
    run_a: str | Path,
    run_b: str | Path,
    tol: Tolerances = Tolerances(),
    tokenizer: Any = None,
    allow: Iterable[str] = (),
) -> dict[str, Any]:
    """``{"a", "b", "tolerances", "allowed", "tasks": [TaskAgreement], "only_a", "only_b", "agrees"}`` of two runs;
    :class:`NotComparable` unless run alike (:data:`SAME_MODEL`) with the same task options, but for ``allow``."""
    results_a, files_a = run_files(run_a)
    results_b, files_b = run_files(run_b)
    data_a, data_b = read_json(results_a, RunError), read_json(results_b, RunError)
    check_comparable({"A": RunRecord.from_results(data_a), "B": RunRecord.from_results(data_b)}, SAME_MODEL, allow)
    check_task_options({"A": declared(data_a, keys.CONFIGURATION), "B": declared(data_b, keys.CONFIGURATION)}, allow)
    tasks = [
        compare_task(
            task,
            by_doc(read_rows(files_a[task])),
            by_doc(read_rows(files_b[task])),
            (data_a.get("results") or {}).get(task, {}),
            (data_b.get("results") or {}).get(task, {}),
            tol,
            tokenizer,
            declared(data_a, keys.METRIC_ROLES).get(task, {}),
            (declared(data_a, keys.METRIC_POOLING).get(task), declared(data_b, keys.METRIC_POOLING).get(task)),
        )
        for task in common_tasks((results_a, results_b), (files_a, files_b))
    ]
    return {
        "a": _describe(results_a, data_a),
        "b": _describe(results_b, data_b),
        "tolerances": asdict(tol),
        "allowed": sorted(allow),
        "tasks": tasks,
        "only_a": sorted(set(files_a) - set(files_b)),
        "only_b": sorted(set(files_b) - set(files_a)),
        "agrees": all(t.agrees for t in tasks),
    }


def _describe(results: Path, data: dict) -> dict:
    config = data.get("config") or {}
    return {
        "results": str(results),
        "model": config.get("model"),
        "model_args": config.get("model_args"),
        "evaluated_as": config.get(keys.EVALUATED_AS),
        "name": name_from_results(data).text,
        "cautions": [c for found in cautions_of(data).values() for c in found],
        "record": asdict(RunRecord.from_results(data)),
    }


def model_tokenizer_name(run: str | Path) -> str | None:
    """The tokenizer (or model) a run's model args name, to locate diverging tokens."""
    results, _ = run_files(run)
    args = model_args_of(read_json(results, RunError))
    return args.get("tokenizer") or args.get("pretrained")


# ----------------------------------------------------------------------------------------- writing


def _fmt(x: float | None, digits: int = 3) -> str:
    return "" if x is None else f"{x:.{digits}g}"


def to_markdown(report: dict[str, Any], max_divergences: int = 5) -> str:
    a, b = report["a"], report["b"]
    lines = [
        f"# Agreement of two runs: {'agree' if report['agrees'] else 'DISAGREE'}",
        "",
        f"- A: {a['name']} (`{a['results']}`, lm-eval model {a['model']})",
        f"- B: {b['name']} (`{b['results']}`, lm-eval model {b['model']})",
        f"- tolerances: {', '.join(f'{k} {v:g}' for k, v in report['tolerances'].items())}",
        *_record_lines(a["record"], b["record"], report.get("allowed") or []),
        *(f"- caution ({side}): {c}" for side, run in (("A", a), ("B", b)) for c in run.get("cautions") or []),
        "",
    ]
    lines += markdown(
        ["task", "kind", "paired", "identical generations", "max abs logprob diff", "max abs value diff", "verdict"],
        [
            [
                t.task,
                t.kind,
                t.n_paired,
                "" if t.exact_match is None else f"{t.exact_match:.1%}",
                _fmt(t.max_logprob_diff),
                _fmt(t.max_value_diff),
                "agree" if t.agrees else "differ: " + "; ".join(t.reasons),
            ]
            for t in report["tasks"]
        ],
        right=(2, 3, 4, 5),
    )
    for t in report["tasks"]:
        lines += ["", f"## {t.task}", ""]
        lines += markdown(
            ["metric", "A", "B", "B - A", "relative"],
            [
                [f"{k}{_on_common(m)}", f"{m['a']:.6g}", f"{m['b']:.6g}", f"{m['delta']:.3g}", f"{m['rel']:.3g}"]
                for k, m in t.metrics.items()
            ],
            right=(1, 2, 3, 4),
        )
        if t.scores:
            lines += [""] + markdown(
                ["per-sample score", "n", "mean A", "mean B", "B - A", "paired test", "p"],
                [
                    [s.metric, s.n, f"{s.mean_a:.6g}", f"{s.mean_b:.6g}", f"{s.delta:.3g}", s.test, f"{s.p_value:.3g}"]
                    for s in t.scores
                ],
                right=(1, 2, 3, 4, 6),
            )
        if t.divergences:
            lines += [
                "",
                f"First diverging {t.divergences[0].unit} of differing generations "
                f"({len(t.divergences)}; {min(max_divergences, len(t.divergences))} shown):",
                "",
            ]
            lines += [
                f"- doc {d.doc_id}, {d.unit} {d.index}: after `{d.context!r}` A has `{d.a!r}`, B has `{d.b!r}`"
                for d in t.divergences[:max_divergences]
            ]
    if report["only_a"] or report["only_b"]:
        lines += ["", f"Tasks in one run only: A {report['only_a']}, B {report['only_b']}"]
    return "\n".join(lines) + "\n"


def _on_common(metric: dict) -> str:
    """`` (on the n samples both scored)`` where the runs scored different samples, else nothing."""
    return f" (on the {metric['n_common']} samples both scored)" if "n_common" in metric else ""


def _record_lines(a: dict, b: dict, allowed: list[str]) -> list[str]:
    """What the two runs were run with: the fields they share, then those that differ."""
    same = [f"{k} {a[k]}" for k in FIELDS if a.get(k) is not None and a.get(k) == b.get(k)]
    differ = [
        f"{k}: A {a.get(k) or 'unrecorded'}, B {b.get(k) or 'unrecorded'}" + (" (allowed)" if k in allowed else "")
        for k in FIELDS
        if a.get(k) != b.get(k)
    ]
    return ([f"- both run with: {'; '.join(same)}"] if same else []) + [f"- run with: {d}" for d in differ]
