"""``lch plot depth``: a heat map per configuration of a task's ``<task>/depth_<D>_len_<L>`` cells, and
:func:`depth_table`; cells without samples are left out, never drawn as zeros."""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.core.errors import UsageError
from harness.core.tables import aligned
from harness.data.depth import read_cell_metric
from harness.reporting.labels import split_shared
from harness.reporting.plots import SCORE_RANGE, latest_having, pyplot
from harness.reporting.runs import Run, count_of


@dataclass(frozen=True)
class DepthCell:
    """One cell of a depth x length grid: the depth bucket (percent), the length in tokens and as the task names it,
    the score (0-100), the samples it averages (``n_depth_<D>_len_<L>``; None: not recorded) and its stderr."""

    depth: int
    tokens: int
    length: str
    score: float
    n: int | None = None
    stderr: float | None = None


def depth_tasks(runs: list[Run]) -> list[str]:
    """The tasks with per-depth scores (``<task>/depth_<D>_len_<L>``) in any of ``runs``, sorted."""
    return sorted(
        {
            m.split("/", 1)[0]
            for r in runs
            for m in r.metrics
            if "/" in m and "," not in m and read_cell_metric(m.split("/", 1)[1]) is not None
        }
    )


def run_depth_cells(run: Run, task: str) -> list[DepthCell]:
    """The run's numeric cells of ``task`` at readable lengths, by depth then length, with their counts."""
    from harness.data.lengths import length_tokens

    cells = []
    for metric, value in run.metrics.items():
        owner, _, name = metric.partition("/")
        found = read_cell_metric(name) if owner == task and "," not in name else None
        if found is None or not math.isfinite(value):
            continue
        try:
            tokens = length_tokens(found[1])
        except ValueError:
            continue
        n = run.metrics.get(count_of(metric))
        cells.append(
            DepthCell(
                found[0],
                tokens,
                found[1],
                value,
                int(n) if n is not None and math.isfinite(n) else None,
                run.stderrs.get(metric),
            )
        )
    return sorted(cells, key=lambda c: (c.depth, c.tokens))


def depth_grids(runs: list[Run], task: str) -> dict[str, list[DepthCell]]:
    """``{run label: cells}`` of ``task``, latest run per configuration; ``UsageError`` naming the tasks with depths."""
    grids = latest_having(runs, lambda run: run_depth_cells(run, task))
    if not grids:
        have = depth_tasks(runs)
        raise UsageError(
            f"{task} has no per-depth metrics ({task}/depth_<D>_len_<L>) in these runs; "
            + (f"tasks with depths here: {', '.join(have)}" if have else "no task here has them")
            + " (RULER niah_* tasks and BABILong with source=synthetic record needle depths)"
        )
    return grids


def _depth_axes(grids: dict[str, list[DepthCell]]) -> tuple[list[int], dict[int, str]]:
    """The rows (every depth bucket and any other found) and columns (lengths in token order) all panels share."""
    from harness.data.depth import DEPTH_BUCKETS

    cells = [c for found in grids.values() for c in found]
    return sorted(set(DEPTH_BUCKETS) | {c.depth for c in cells}), {
        c.tokens: c.length for c in sorted(cells, key=lambda c: c.tokens)
    }


def _cell_text(cell: DepthCell | None) -> str:
    return "-" if cell is None else f"{cell.score:.4g}" + (f" (n={cell.n})" if cell.n is not None else "")


def depth_table(task: str, grids: dict[str, list[DepthCell]]) -> list[str]:
    """One text table per run: a row per depth, a column per length, ``score (n=N)``; ``-`` without samples."""
    depths, lengths = _depth_axes(grids)
    lines = []
    for label, cells in grids.items():
        at = {(c.depth, c.tokens): c for c in cells}
        rows = [["depth", *lengths.values()]]
        rows += [[f"{depth}%", *(_cell_text(at.get((depth, tokens))) for tokens in lengths)] for depth in depths]
        lines += [f"{task} | {label}", *aligned(rows)]
    return lines


def depth_figure(grids: dict[str, list[DepthCell]], task: str):
    """One heat map per run: length across (token order), depth bucket down (0 % at the top), the score (0-100) as
    colour with its n; a cell without samples grey and empty."""
    import numpy as np

    plt = pyplot()
    depths, lengths = _depth_axes(grids)
    columns = {tokens: i for i, tokens in enumerate(lengths)}
    cmap = plt.get_cmap("RdYlGn").with_extremes(bad="lightgrey")  # a cell without samples: grey, no text
    shared, short = split_shared(list(grids))
    width = 1.1 * len(lengths) + 2.2
    # the colour bar gets a narrow column of its own, so that every panel is as wide
    fig, axes = plt.subplots(
        1,
        len(grids) + 1,
        figsize=(width * len(grids) + 0.8, 0.55 * len(depths) + 2.2),
        dpi=120,
        squeeze=False,
        gridspec_kw={"width_ratios": [1.0] * len(grids) + [0.06]},
    )
    image = None
    for ax, label, cells in zip(axes[0][:-1], short, grids.values()):
        grid = np.full((len(depths), len(lengths)), np.nan)
        for c in cells:
            grid[depths.index(c.depth), columns[c.tokens]] = c.score
        image = ax.imshow(
            np.ma.masked_invalid(grid), cmap=cmap, vmin=SCORE_RANGE[0], vmax=SCORE_RANGE[1], aspect="auto"
        )
        for c in cells:
            red, green, blue, _ = cmap((c.score - SCORE_RANGE[0]) / (SCORE_RANGE[1] - SCORE_RANGE[0]))
            dark = 0.299 * red + 0.587 * green + 0.114 * blue < 0.5
            ax.text(
                columns[c.tokens],
                depths.index(c.depth),
                f"{c.score:.3g}" + (f"\nn={c.n}" if c.n is not None else ""),
                ha="center",
                va="center",
                fontsize=7,
                color="white" if dark else "black",
            )
        ax.set_xticks(range(len(lengths)), list(lengths.values()))
        ax.set_yticks(range(len(depths)), [f"{d}%" for d in depths])
        ax.set_xlabel("context length (tokens)", fontsize=8)
        ax.set_ylabel("needle depth (bucket, % of the haystack)", fontsize=8)
        ax.set_title(label or "run", fontsize=9)
    fig.colorbar(image, cax=axes[0][-1], label=f"score ({SCORE_RANGE[0]:g}-{SCORE_RANGE[1]:g})")
    fig.suptitle(task + (f"\n{shared}" if shared else ""), fontsize=10)
    return fig
