"""``lch leaderboard``: a row per run (latest per configuration unless ``all_runs``), a column per metric with its
stderr; CSV and sortable HTML with every column, Markdown for people (a headline, then a table per section, then
each caution once). Missing metrics are empty cells, never zeros."""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from harness.core.errors import UsageError
from harness.core.files import write_text_atomic
from harness.core.tables import csv_text, html_table, markdown
from harness.data.depth import read_cell_metric
from harness.data.lengths import length_tokens
from harness.metrics.catalogue import DEPTH_PREFIX, LENGTH_PREFIX, TRUNCATION_COUNTS
from harness.metrics.context_length import curve_caution
from harness.reporting.common import on_common_samples, sample_set_cautions
from harness.reporting.comparability import check_side_by_side
from harness.reporting.curves import curve_tasks, effective_lengths
from harness.reporting.labels import run_labels, split_shared
from harness.reporting.runs import Run, count_of, latest_per_configuration

FIXED = ["run", "model", "checkpoint", "variant", "model_args", "date"]
# with --cost: each run's lch_cost summed over its tasks; empty for a run that did not record it
COST_COLUMNS = [
    "wall_seconds",
    "device_name",
    "peak_memory_gib",
    "prompt_tokens",
    "generated_tokens",
    "scored_tokens",
    "tokens_per_second",
    "judge_requests",
    "judge_tokens",
]
TEXT_COLUMNS = set(FIXED) | {"device_name"}
CAUTIONS = "cautions"
# effective context length in tokens (0: no length reaches the bar), absolute and relative (to the shortest's score)
EFFECTIVE = ("effective_length", "effective_length_rel")


@dataclass
class Leaderboard:
    """``columns`` (CSV order), ``rows`` (dicts of strings), ``diagnostics`` (bookkeeping columns), ``cautions``."""

    columns: list[str]
    rows: list[dict[str, str]]
    diagnostics: list[str]
    cautions: dict[str, list[str]] = field(default_factory=dict)  # run label -> its cautions
    subtasks: list[str] = field(default_factory=list)  # metric columns of tasks that a group of these runs holds
    depths: list[str] = field(default_factory=list)  # depth x length cells (<task>/depth_<D>_len_<L>) and their counts
    effective: list[str] = field(default_factory=list)  # effective lengths of the curves no group's own curve averages
    points: list[str] = field(default_factory=list)  # those curves' per-length scores (<task>/len_<L>)
    sort_by: str | None = None
    cost: list[str] = field(default_factory=list)  # the cost columns shown (--cost), else none
    common: list[str] | None = None  # on the samples every run scored (--common): what that board says of itself

    @property
    def metrics(self) -> list[str]:
        return [
            c
            for c in self.columns
            if c not in FIXED and c not in self.cost and c != CAUTIONS and not c.endswith("_stderr")
        ]

    @property
    def headline(self) -> list[str]:
        """The metrics a reader wants first: :attr:`effective`, the scores and perplexities of groups and ungrouped
        tasks but their per-length scores, and :attr:`sort_by`."""
        elsewhere = set(self.diagnostics) | set(self.subtasks) | set(self.depths) | set(self.points)
        return [m for m in self.metrics if m in self.effective or m == self.sort_by or m not in elsewhere]


def cost_cells(cost: dict) -> dict[str, str]:
    """A run's :data:`COST_COLUMNS` from its recorded cost: peak memory in GiB, tokens summed over its tasks and their
    rate per engine second, judge tokens prompt + completion (empty when the server reported none)."""
    if not cost:
        return dict.fromkeys(COST_COLUMNS, "")
    tasks = [t for t in (cost.get("tasks") or {}).values() if isinstance(t, dict)]
    total = {
        name: sum(int(t.get(name) or 0) for t in tasks)
        for name in ("prompt_tokens", "generated_tokens", "scored_tokens")
    }
    seconds = sum(float(t.get("seconds") or 0.0) for t in tasks)
    judge = given_judge if isinstance(given_judge := cost.get("judge"), dict) else {}
    judged = [judge.get("prompt_tokens"), judge.get("completion_tokens")]
    counted = [v for v in judged if isinstance(v, int)]
    memory = (cost.get("peak_memory") or {}).get("bytes") if isinstance(cost.get("peak_memory"), dict) else None
    return {
        "wall_seconds": repr(float(cost["wall_seconds"])) if isinstance(cost.get("wall_seconds"), (int, float)) else "",
        "device_name": str(cost.get("device_name") or ""),
        "peak_memory_gib": repr(memory / 2**30) if isinstance(memory, (int, float)) else "",
        **{name: str(value) for name, value in total.items()},
        "tokens_per_second": repr((total["prompt_tokens"] + total["generated_tokens"]) / seconds) if seconds else "",
        "judge_requests": str(int(judge.get("requests") or 0)),
        "judge_tokens": str(sum(counted)) if len(counted) == len(judged) else "",
    }


def leaderboard(
    runs: list[Run],
    all_runs: bool = False,
    sort_by: str | None = None,
    allow: Iterable[str] = (),
    cost: bool = False,
    common: bool = False,
) -> Leaderboard:
    """The table; ``sort_by``: a metric, best first, rows without it last; ``cost``: the :data:`COST_COLUMNS`;
    ``common``: scores on the samples all runs scored. Runs not run alike are refused (but for ``allow``)."""
    if not all_runs:
        runs = latest_per_configuration(runs)
    check_side_by_side(runs, allow)
    notes, differ = None, {}
    if common:
        runs, notes = on_common_samples(runs)
    else:
        differ = sample_set_cautions(runs)
    every = sorted({m for r in runs for m in r.metrics})
    diagnostics = [m for m in every if any(r.roles.get(m) == "bookkeeping" for r in runs)]
    metrics = [m for m in every if m not in diagnostics] + diagnostics
    columns = list(FIXED) + (COST_COLUMNS if cost else [])
    curves = curve_tasks(runs)
    columns += [f"{task}/{name}" for task in curves for name in EFFECTIVE]
    for m in metrics:
        columns.append(m)
        if any(m in r.stderrs for r in runs):
            columns.append(f"{m}_stderr")
    columns.append(CAUTIONS)
    if sort_by is not None:
        if sort_by not in metrics:
            raise UsageError(f"--sort {sort_by!r} is not a metric of these runs; e.g. {', '.join(metrics[:5])}")
        higher = next((r.higher_is_better[sort_by] for r in runs if sort_by in r.higher_is_better), True)
        have = sorted((r for r in runs if sort_by in r.metrics), key=lambda r: r.metrics[sort_by], reverse=higher)
        runs = have + [r for r in runs if sort_by not in r.metrics]
    rows, cautions = [], {}
    for run, label in zip(runs, run_labels(runs)):
        cautions[label] = [c for found in run.cautions.values() for c in found] + differ.get(run.path, [])
        found = {task: effective_lengths(run, task) for task in curves}
        said = set(cautions[label])  # a run of ours recorded its curves' cautions already (lch_effective_length)
        cautions[label] += [
            c
            for c in (curve_caution(task, f[0].caution) for task, f in found.items() if f is not None and f[0].caution)
            if c not in said
        ]
        row = {
            "run": label,
            "model": run.model,
            "checkpoint": run.checkpoint,
            "variant": run.variant,
            "model_args": json.dumps(run.model_args, sort_keys=True),
            "date": datetime.fromtimestamp(run.date, timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
            CAUTIONS: "; ".join(cautions[label]),
            **(cost_cells(run.cost) if cost else {}),
        }
        for task, f in found.items():
            for name, value in zip(EFFECTIVE, f or (None, None)):
                row[f"{task}/{name}"] = "" if value is None else str(value.tokens or 0)
        for m in metrics:
            row[m] = repr(run.metrics[m]) if m in run.metrics else ""
            if f"{m}_stderr" in columns:
                row[f"{m}_stderr"] = repr(run.stderrs[m]) if m in run.stderrs else ""
        rows.append(row)
    members = {task for run in runs for tasks in run.subtasks.values() for task in tasks}
    averaged = {task for run in runs for group, tasks in run.subtasks.items() if group in curves for task in tasks}
    top = [task for task in curves if task not in averaged]
    effective = [f"{task}/{name}" for task in top for name in EFFECTIVE]
    points = [
        m
        for m in metrics
        if m.split("/", 1)[0] in top
        and m.split("/", 1)[1].startswith(LENGTH_PREFIX)
        and "," not in m
        and m not in diagnostics
    ]
    depths = sorted((m for m in metrics if m.split("/", 1)[-1].startswith(DEPTH_PREFIX)), key=_depth_order)
    subtasks = [
        m
        for m in columns
        if m.split("/", 1)[0] in members
        and m not in FIXED
        and not m.endswith("_stderr")
        and m not in diagnostics
        and m not in depths
        and m not in effective
        and m not in points
    ]
    return Leaderboard(
        columns,
        rows,
        diagnostics,
        cautions,
        subtasks,
        depths,
        effective,
        points,
        sort_by,
        cost=COST_COLUMNS if cost else [],
        common=notes,
    )


def _depth_order(metric: str) -> tuple:
    """``<task>/depth_<D>_len_<L>`` sorted by task, depth, then length (numbers, not text: 25 before 100)."""
    task, cell = metric.split("/", 1)
    found = read_cell_metric(cell)
    try:
        return (task, found[0], length_tokens(found[1]), "") if found else (task, 10**9, 0, cell)
    except ValueError:  # a length that is none: after the others, by name
        return task, 10**9, 0, cell


def _all_zero_breakdown(metric: str, rows: list[dict[str, str]]) -> bool:
    """A per-length truncation count that is 0 or empty in every row: the Markdown leaves it to its total."""
    name = metric.split("/", 1)[-1]
    per_length = any(name.startswith(f"{count}_{LENGTH_PREFIX}") for count in TRUNCATION_COUNTS)
    return per_length and all(not r.get(metric) or float(r[metric]) == 0 for r in rows)


def to_csv(board: Leaderboard) -> str:
    return csv_text(board.columns, board.rows)


def _short_args(text: str) -> str:
    """model_args as ``key=value`` words without the model path (the model / checkpoint columns have it)."""
    args = json.loads(text)
    return " ".join(f"{k}={v}" for k, v in args.items() if k not in ("pretrained", "checkpoint"))


def _readable(value: str, stderr: str = "") -> str:
    """A metric to 4 significant digits, its stderr to 2 (``12.35 ± 0.41``); a whole number whole."""
    if not value:
        return ""
    number = float(value)
    text = str(int(number)) if number.is_integer() and abs(number) < 1e15 else f"{number:.4g}"
    return f"{text} ± {float(stderr):.2g}" if stderr and float(stderr) == float(stderr) else text


def _with_n(row: dict[str, str], metric: str) -> str:
    """A depth cell as ``score (n=N)``; empty when the run has no sample in it."""
    text = _readable(row.get(metric, ""))
    n = row.get(count_of(metric), "")
    return f"{text} (n={int(float(n))})" if text and n else text


def _row_order(metric: str) -> tuple:
    """Rows grouped by task: effective lengths, per-length scores by length, then the rest in CSV order."""
    task, name = metric.split("/", 1)
    if name in EFFECTIVE:
        return task, 0, 0
    if name.startswith(LENGTH_PREFIX):
        try:
            return task, 1, length_tokens(name[len(LENGTH_PREFIX) :])
        except ValueError:  # a length that is none (a filter's name in it): after the lengths
            return task, 1, 10**9
    return task, 2, 0


def to_markdown(board: Leaderboard, headline: list[str] | None = None) -> str:
    """Tables for people: the headline, a row per run (``headline``, else :attr:`Leaderboard.headline`), sections
    with a row per metric, then each caution once; metrics to 4 significant digits with their stderr."""
    metrics = board.headline
    if headline is not None:
        unknown = [m for m in headline if m not in board.metrics]
        if unknown:
            raise UsageError(f"headline metrics {', '.join(unknown)} are not columns of this leaderboard")
        metrics = board.effective + [m for m in headline if m not in board.effective]
    title, names = split_shared([r["run"] for r in board.rows])
    lines = [f"# Leaderboard{': ' + title if title else ''}{' (on common samples)' if board.common else ''}", ""]
    if board.common:
        lines += [" ".join(board.common), ""]
    with_stderr = lambda r, m: _readable(r[m], r.get(f"{m}_stderr", ""))  # noqa: E731

    def section(
        title: str | None, text: str, columns: list[str], cell: Callable[[dict, str], str], runs_as_rows: bool = False
    ) -> list[str]:
        """A table of ``columns`` (metrics): a row per metric and a column per run, or (``runs_as_rows``, the
        headline) a row per run; ``title`` None: no heading."""
        if not columns:
            return []
        head = [] if title is None else ["", f"## {title}", "", text, ""]
        if runs_as_rows:
            return head + markdown(
                ["run", *columns], [[name, *(cell(r, m) for m in columns)] for name, r in zip(names, board.rows)]
            )
        return head + markdown(["metric", *names], [[m, *(cell(r, m) for r in board.rows)] for m in columns])

    lines += section(None, "", metrics, with_stderr, runs_as_rows=True)
    lines += section(
        "Cost",
        "What each run cost, as it recorded it: wall time, the device, its peak memory, the tokens "
        "its engine computed over its tasks and their rate, and the judge's requests and tokens.",
        board.cost,
        _cost_text,
        runs_as_rows=True,
    )
    lines += section(
        "Scores per length",
        "The score of each curve above at each length (its effective lengths rest on them).",
        sorted((m for m in board.points if m not in metrics), key=_row_order),
        with_stderr,
    )
    lines += section(
        "Tasks of the groups",
        "Each group's tasks, the group above (every column is in the CSV and HTML too).",
        sorted((m for m in board.subtasks if m not in metrics), key=_row_order),
        with_stderr,
    )
    depths = [m for m in board.depths if m not in metrics]
    lines += section(
        "Depth x length",
        "Each needle-depth bucket's score at each length, with the samples it averages "
        "(`lch plot depth` draws them as a heat map).",
        depths,
        _with_n,
    )
    counted = {count_of(m) for m in depths}  # the cells' counts are beside them above
    lines += section(
        "Diagnostics",
        "What each run's numbers rest on (counts of documents, tokens and samples; not scores).",
        [
            m
            for m in board.diagnostics
            if m not in metrics and m not in counted and not _all_zero_breakdown(m, board.rows)
        ],
        lambda r, m: _readable(r[m]),
    )
    # each caution once, with the runs it holds for (a run's list is in the CSV's cautions column)
    held: dict[str, list[str]] = {}
    for name, r in zip(names, board.rows):
        for sentence in board.cautions.get(r["run"], []):
            held.setdefault(sentence, []).append(name)
    if held:
        lines += [
            "",
            "## Cautions",
            "",
            "What the numbers rest on, where it is too little to mean anything or differs between the runs:",
            "",
        ]
        lines += [
            f"- {sentence} ({'every run' if len(runs) == len(names) > 1 else ', '.join(runs)})"
            for sentence, runs in held.items()
        ]
    return "\n".join(lines) + "\n"


_SORT_JS = """
document.querySelectorAll("th").forEach((th, col) => th.addEventListener("click", () => {
  const body = th.closest("table").tBodies[0], rows = Array.from(body.rows);
  const dir = th.dataset.dir === "asc" ? -1 : 1; th.dataset.dir = dir === 1 ? "asc" : "desc";
  const val = r => r.cells[col].dataset.v ?? r.cells[col].textContent, num = v => v !== "" && !isNaN(v);
  rows.sort((a, b) => { const x = val(a), y = val(b);
    if (x === "" || y === "") return (x === "") - (y === "");
    return dir * (num(x) && num(y) ? x - y : x.localeCompare(y)); });
  rows.forEach(r => body.appendChild(r)); }));
"""


def _cost_text(row: dict[str, str], column: str) -> str:
    """A cost cell for people: wall time as a duration, memory and rate to 3 digits, counts with separators."""
    from harness.plan.report import duration

    text = row.get(column, "")
    if not text or column == "device_name":
        return text
    if column == "wall_seconds":
        return duration(float(text))
    if column in ("peak_memory_gib", "tokens_per_second"):
        return f"{float(text):.3g}"
    return f"{int(text):,}"


def _html_cell(column: str, text: str) -> str | tuple[str, dict[str, str]]:
    """Numbers to 6 digits, sorted by their full value (``data-v``); model_args as words, the JSON as a tooltip."""
    if column == "model_args":
        return _short_args(text), {"title": text}
    if column not in TEXT_COLUMNS and column != CAUTIONS and text:
        return f"{float(text):.6g}", {"data-v": text}
    return text


def to_html(board: Leaderboard, title: str = "Leaderboard") -> str:
    table = html_table(board.columns, [[_html_cell(c, r[c]) for c in board.columns] for r in board.rows])
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title><style>"
        "table{border-collapse:collapse;font:13px sans-serif}td,th{border:1px solid #ccc;padding:3px 6px}"
        "th{cursor:pointer;background:#eee;position:sticky;top:0}td[data-v]{text-align:right}</style></head><body>"
        f"<p>Click a column header to sort; hover model_args for the full JSON.</p>{table}"
        f"<script>{_SORT_JS}</script></body></html>\n"
    )


def leaderboard_paths(output: str | Path) -> list[Path]:
    """The files :func:`write_leaderboard` writes for ``output``: it, and its name with ``.md`` and ``.html``."""
    output = Path(output)
    return [output, output.with_suffix(".md"), output.with_suffix(".html")]


def write_leaderboard(board: Leaderboard, output: str | Path, headline: list[str] | None = None) -> list[Path]:
    """``output`` (.csv) plus the same name with ``.md`` (its headline's metrics ``headline``, after the effective
    lengths, when given: :func:`to_markdown`) and ``.html``."""
    paths = leaderboard_paths(output)
    write_text_atomic(paths[0], to_csv(board))
    write_text_atomic(paths[1], to_markdown(board, headline))
    write_text_atomic(paths[2], to_html(board, "Leaderboard (on common samples)" if board.common else "Leaderboard"))
    return paths
