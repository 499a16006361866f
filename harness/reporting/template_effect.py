"""``lch template-effect RUN_RAW RUN_CHAT``: per task and per-document score, ``chat - raw`` over documents paired
by ``doc_id`` with its bootstrap interval and p; a differing ``doc_hash`` leaves a document out unless the task
was refitted (its :data:`TEMPLATE_OPTIONS` differ)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.core import results as keys
from harness.core.errors import UsageError
from harness.core.run_record import FIELDS, RunRecord
from harness.core.tables import markdown
from harness.data.lengths import length_tokens
from harness.metrics.catalogue import DEPTH_PREFIX, LENGTH_PREFIX, metric_role
from harness.metrics.paired import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, DEFAULT_SEED, paired_difference
from harness.reporting.comparability import NotComparable, check_comparable, check_task_options
from harness.reporting.labels import name_from_results
from harness.reporting.runs import declared, read_results
from harness.reporting.samples import by_doc, common_tasks, filters_of, pair_docs, paired_scores, read_rows, run_files

TEMPLATE_OPTIONS = (
    "chat_template",
)  # task options that follow the chat template (harness.data.prompt_tokens.PromptOptions)
NO_TEMPLATE = "none"  # the run record's chat_template of a run that applied none


@dataclass
class EffectRow:
    """One score of one task: ``delta = mean_chat - mean_raw`` over ``n`` paired documents, its interval and p."""

    metric: str
    n: int
    mean_raw: float | None
    mean_chat: float | None
    delta: float | None
    low: float | None
    high: float | None
    interval: str
    test: str
    p_value: float


@dataclass
class TaskEffect:
    task: str
    n_raw: int
    n_chat: int
    n_paired: int
    n_unpaired: int = 0
    n_input_mismatch: int = 0  # documents whose doc_hash differs: left out, or paired when refitted
    refitted: bool = False  # the template options differ: documents were fitted with the template counted
    rows: list[EffectRow] = field(default_factory=list)


def _load(run: str | Path) -> tuple[Path, dict[str, Path], dict]:
    results, samples = run_files(run)
    return results, samples, read_results(results)


def check_template_pair(raw: RunRecord, chat: RunRecord, where: tuple[Path, Path], allow: Iterable[str] = ()) -> None:
    """Refuses runs that are no raw / chat pair: a run that recorded no chat template, or the two in the wrong order
    (UsageError); the same template, or another run-record field that differs but for ``allow`` (:class:`NotComparable`,
    exit 3). ``where``: their results files."""
    for record, path in ((raw, where[0]), (chat, where[1])):
        if record.chat_template is None:
            raise UsageError(
                f"{path}: the run recorded no chat template (neither lch_run nor lm-eval's "
                "chat_template_sha): run it through lch eval or lm-eval's CLI, which record it"
            )
    if raw.chat_template == chat.chat_template:
        raise NotComparable(
            f"not comparable: {where[0]} and {where[1]} applied the same chat template "
            f"({str(raw.chat_template)[:16]}): give a run without --apply_chat_template and one with it"
        )
    if raw.chat_template != NO_TEMPLATE and chat.chat_template == NO_TEMPLATE:
        raise UsageError(
            f"{where[0]} applied a chat template and {where[1]} none: give the run without a template "
            "first (lch template-effect RUN_RAW RUN_CHAT)"
        )
    check_comparable({"raw": raw, "chat": chat}, [f for f in FIELDS if f != "chat_template"], allow)


def _order(name: str) -> tuple:
    """Scores first, then per-length scores by length, then the rest (depth cells) by name."""
    if name.startswith(LENGTH_PREFIX):
        try:  # token counts (RULER) and k-labels (BABILong: 1k = 1024)
            return (1, length_tokens(name[len(LENGTH_PREFIX) :]), name)
        except ValueError:
            pass
    return (2 if "_" + LENGTH_PREFIX in name else 0, 0, name)


def compare_task(
    task: str,
    rows_raw: list[dict],
    rows_chat: list[dict],
    roles: dict[str, str],
    refitted: bool,
    confidence: float,
    resamples: int,
    seed: int,
    interval: str,
) -> TaskEffect:
    """The template's effect on one task's per-document scores (no counts, no depth cells)."""
    shared_filters = [f for f in filters_of(rows_raw) if f in filters_of(rows_chat)]
    out = TaskEffect(task, len(by_doc(rows_raw)), len(by_doc(rows_chat)), 0, refitted=refitted)
    for flt in shared_filters:
        pairing = pair_docs(by_doc(rows_raw, flt), by_doc(rows_chat, flt), keep_mismatched=refitted)
        if flt == shared_filters[0]:
            out.n_paired, out.n_unpaired = len(pairing.pairs), pairing.unpaired
            out.n_input_mismatch = len(pairing.input_mismatch)
        for name, xs, ys in paired_scores(pairing.pairs, roles, order=_order):
            base = name.split(" ")[0]  # "<metric> mean NLL" / "<metric> sum / count": a pair's ratio
            if (roles.get(base) or metric_role(base)) == "bookkeeping" or base.startswith(DEPTH_PREFIX):
                continue  # counts; depth x length cells (a breakdown of len_<L> on a few documents each)
            d = paired_difference(xs, ys, confidence=confidence, resamples=resamples, seed=seed, interval=interval)
            out.rows.append(
                EffectRow(
                    name if flt == "none" else f"{name},{flt}",
                    d.n,
                    d.mean_a,
                    d.mean_b,
                    d.delta,
                    d.low,
                    d.high,
                    d.interval,
                    d.test,
                    d.p_value,
                )
            )
    return out


def template_effect(
    run_raw: str | Path,
    run_chat: str | Path,
    allow: Iterable[str] = (),
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    interval: str = "percentile",
) -> dict[str, Any]:
    """``{"raw", "chat", "settings", "tasks": [TaskEffect], "only_raw", "only_chat"}``; the task options must be equal
    but :data:`TEMPLATE_OPTIONS` (unless ``allow`` holds ``task_options``)."""
    results_raw, files_raw, data_raw = _load(run_raw)
    results_chat, files_chat, data_chat = _load(run_chat)
    allow = frozenset(allow)
    record_raw, record_chat = RunRecord.from_results(data_raw), RunRecord.from_results(data_chat)
    check_template_pair(record_raw, record_chat, (results_raw, results_chat), allow)
    configurations = {
        name: {
            task: {k: v for k, v in config.items() if k not in TEMPLATE_OPTIONS}
            for task, config in declared(data, keys.CONFIGURATION).items()
        }
        for name, data in (("raw", data_raw), ("chat", data_chat))
    }
    check_task_options(configurations, allow)
    full_raw, full_chat = declared(data_raw, keys.CONFIGURATION), declared(data_chat, keys.CONFIGURATION)
    tasks = []
    for task in common_tasks((results_raw, results_chat), (files_raw, files_chat)):
        refitted = any(
            (full_raw.get(task) or {}).get(k) != (full_chat.get(task) or {}).get(k) for k in TEMPLATE_OPTIONS
        )
        roles = declared(data_raw, keys.METRIC_ROLES).get(task, {})
        tasks.append(
            compare_task(
                task,
                read_rows(files_raw[task]),
                read_rows(files_chat[task]),
                roles,
                refitted,
                confidence,
                resamples,
                seed,
                interval,
            )
        )
    return {
        "raw": _describe(results_raw, data_raw, record_raw),
        "chat": _describe(results_chat, data_chat, record_chat),
        "settings": {
            "confidence": confidence,
            "resamples": resamples,
            "seed": seed,
            "interval": interval,
            "allowed": sorted(allow),
        },
        "tasks": tasks,
        "only_raw": sorted(set(files_raw) - set(files_chat)),
        "only_chat": sorted(set(files_chat) - set(files_raw)),
    }


def _describe(results: Path, data: dict, record: RunRecord) -> dict:
    return {"results": str(results), "name": name_from_results(data).text, "record": asdict(record)}


def _fmt(x: float | None, spec: str = ".4g") -> str:
    return "" if x is None else format(x, spec)


def to_markdown(report: dict[str, Any]) -> str:
    raw, chat, settings = report["raw"], report["chat"], report["settings"]
    shared = [
        f"{k} {raw['record'][k]}"
        for k in FIELDS
        if k != "chat_template" and raw["record"].get(k) is not None and raw["record"][k] == chat["record"].get(k)
    ]
    lines = [
        "# Chat-template effect: chat - raw",
        "",
        f"- raw: {raw['name']} (`{raw['results']}`), chat template {raw['record']['chat_template']}",
        f"- chat: {chat['name']} (`{chat['results']}`), chat template {chat['record']['chat_template']}",
        *([f"- both run with: {'; '.join(shared)}"] if shared else []),
        *([f"- allowed to differ: {', '.join(settings['allowed'])}"] if settings["allowed"] else []),
        f"- interval: {settings['confidence']:.0%} paired bootstrap over documents ({settings['interval']}, "
        f"{settings['resamples']} resamples, seed {settings['seed']}); p: exact McNemar for two-valued scores, "
        "else Wilcoxon signed-rank",
        "",
    ]
    lines += markdown(
        ["task", "metric", "n", "raw", "chat", "chat - raw", "interval", "p", "test"],
        [
            [
                t.task,
                r.metric,
                r.n,
                _fmt(r.mean_raw),
                _fmt(r.mean_chat),
                _fmt(r.delta, "+.4g"),
                "" if r.low is None else f"[{r.low:+.4g}, {r.high:+.4g}]",
                f"{r.p_value:.3g}",
                r.test,
            ]
            for t in report["tasks"]
            for r in t.rows
        ],
        right=(2, 3, 4, 5, 7),
    )
    notes = []
    for t in report["tasks"]:
        if not t.rows:
            notes.append(f"{t.task}: no per-document score paired ({t.n_paired} documents paired)")
        if t.refitted:
            notes.append(
                f"{t.task}: the runs fitted their samples differently ({', '.join(TEMPLATE_OPTIONS)} differs): "
                f"documents pair by doc_id, {t.n_input_mismatch} of them refitted (doc_hash differs); for the "
                "very same samples, run the raw one with --metadata '{\"chat_template\": true}'"
            )
        elif t.n_input_mismatch:
            notes.append(f"{t.task}: {t.n_input_mismatch} documents left out: other inputs (doc_hash differs)")
        if t.n_unpaired:
            notes.append(f"{t.task}: {t.n_unpaired} documents in one run only")
    if report["only_raw"] or report["only_chat"]:
        notes.append(f"tasks in one run only: raw {report['only_raw']}, chat {report['only_chat']}")
    return "\n".join(lines + ([""] + [f"- {n}" for n in notes] if notes else [])) + "\n"
