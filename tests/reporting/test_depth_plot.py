"""lch plot depth: the depth x length heat map of a task's ``depth_<D>_len_<L>`` metrics, read from lm-eval-shaped
result files built here; the drawn cells are read back from the matplotlib figure."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.cli import main
from harness.reporting.depth_plot import depth_figure, depth_grids, depth_table, depth_tasks
from harness.reporting.runs import load_runs
from tests.reporting.test_reporting import write_run

PNG = b"\x89PNG\r\n\x1a\n"
TASK = "lch_ruler_niah_single_1"


def _runs(root: Path) -> Path:
    dirs = {TASK: {"score": True}}
    write_run(
        root / "vanilla",
        {"pretrained": "/m/Llama"},
        1.0,
        {
            TASK: {
                "score,none": 70.0,
                "len_1024,none": 80.0,
                "n_len_1024,none": 5,
                "len_2048,none": 60.0,
                "depth_0_len_1024,none": 100.0,
                "n_depth_0_len_1024,none": 2,
                "depth_0_len_1024_stderr,none": 0.0,
                "depth_50_len_1024,none": 66.66666666666667,
                "n_depth_50_len_1024,none": 3,
                "depth_100_len_2048,none": 0.0,
                "n_depth_100_len_2048,none": 1,
                "depth_100_len_2048_stderr,none": "N/A",
                "depth_25_len_2048,none": float("nan"),
            }
        },
        dirs,
    )  # NaN: a missing value, never a cell
    write_run(
        root / "dyn",
        {"pretrained": "/m/Llama", "pic": "dynamic", "pic_ratio": 4},
        2.0,
        {TASK: {"depth_75_len_2048,none": 50.0, "n_depth_75_len_2048,none": 4}},
        dirs,
    )
    write_run(
        root / "ppl",
        {"pretrained": "/m/Other"},
        3.0,
        {"ppl_govreport": {"ppl,none": 5.0}},
        {"ppl_govreport": {"ppl": False}},
    )
    return root


def test_cells_are_read_from_the_results(tmp_path):
    runs, _ = load_runs([_runs(tmp_path)])
    assert depth_tasks(runs) == [TASK]
    grids = depth_grids(runs, TASK)
    assert list(grids) == ["Llama · base model", "Llama · Dynamic PIC (s_cr 4, l_ic 4, l_rc 200)"]  # no ppl run
    assert [(c.depth, c.tokens, c.length, c.score, c.n) for c in grids["Llama · base model"]] == [
        (0, 1024, "1024", 100.0, 2),
        (50, 1024, "1024", pytest.approx(66.667, abs=1e-3), 3),
        (100, 2048, "2048", 0.0, 1),
    ]
    table = depth_table(TASK, grids)
    assert table[:7] == [
        f"{TASK} | Llama · base model",
        "depth  1024         2048",
        "0%     100 (n=2)    -",
        "25%    -            -",
        "50%    66.67 (n=3)  -",
        "75%    -            -",
        "100%   -            0 (n=1)",
    ]


def test_the_heat_map_draws_each_cell_with_its_n_and_leaves_empty_cells_blank(tmp_path):
    runs, _ = load_runs([_runs(tmp_path)])
    fig = depth_figure(depth_grids(runs, TASK), TASK)
    base, dyn = fig.axes[:2]  # the colour bar is the third
    assert base.get_title() == "base model" and fig._suptitle.get_text() == f"{TASK}\nLlama"
    grid = base.images[0].get_array()
    # rows: depth buckets 0 % (top) .. 100 %; columns: lengths in token order; masked (drawn grey) where no samples
    assert [t.get_text() for t in base.get_yticklabels()] == ["0%", "25%", "50%", "75%", "100%"]
    assert [t.get_text() for t in base.get_xticklabels()] == ["1024", "2048"]
    assert grid.mask.tolist() == [[False, True], [True, True], [False, True], [True, True], [True, False]]
    assert np.ma.getdata(grid)[[0, 2, 4], [0, 0, 1]].tolist() == [100.0, pytest.approx(66.667, abs=1e-3), 0.0]
    assert base.images[0].get_clim() == (0.0, 100.0)
    texts = {(t.get_position(), t.get_text()) for t in base.texts}
    assert texts == {((0, 0), "100\nn=2"), ((0, 2), "66.7\nn=3"), ((1, 4), "0\nn=1")}
    assert {(t.get_position(), t.get_text()) for t in dyn.texts} == {((1, 3), "50\nn=4")}
    assert dyn.images[0].get_array().mask.sum() == 9  # one cell of ten


def test_lch_plot_depth_writes_png_and_prints_the_cells(tmp_path, capsys):
    root = _runs(tmp_path / "runs")
    out = tmp_path / "depth.png"
    assert main(["plot", "depth", str(root), "--task", TASK, "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == PNG
    printed = capsys.readouterr().out
    assert "50%    66.67 (n=3)  -" in printed and f"{TASK} | Llama · Dynamic PIC" in printed
    assert printed.rstrip().endswith(str(out))


def test_a_task_without_depths_is_refused_in_one_line(tmp_path, capsys):
    root = _runs(tmp_path / "runs")
    out = tmp_path / "depth.png"
    assert main(["plot", "depth", str(root), "--task", "ppl_govreport", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and not out.exists()
    assert "ppl_govreport has no per-depth metrics" in err and f"tasks with depths here: {TASK}" in err
    assert main(["plot", "depth", str(root), "--task", TASK, "lch_babilong_qa1", "-o", str(out)]) == 2
    assert "one --task" in capsys.readouterr().err
