"""lch plot: score vs context length (RULER / BABILong) and the PIC paper, Fig. 1 (length, quality vs PIC ratio),
from lm-eval-shaped result files built here; the drawn data is read back from the matplotlib figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.pic.inference import Inference
from harness.reporting.pic_plot import pic_figure, pic_points_from_runs, pic_points_from_samples, pic_series
from harness.reporting.plots import LengthPoint, context_curves, context_figure
from harness.reporting.runs import load_runs
from tests.reporting.test_reporting import write_run

PNG = b"\x89PNG\r\n\x1a\n"


def _ruler_babilong_runs(root: Path) -> Path:
    dirs = {
        "lch_ruler": {"len_4096": True, "len_16384": True, "len_8192": True, "score": True},
        "lch_babilong": {"len_0k": True, "len_2k": True, "len_4k": True},
    }
    write_run(
        root / "old", {"pretrained": "/m/Llama"}, 1.0, {"lch_ruler": {"len_4096,none": 1.0, "len_8192,none": 1.0}}, dirs
    )  # superseded by "vanilla"
    write_run(
        root / "vanilla",
        {"pretrained": "/m/Llama"},
        2.0,
        {
            "lch_ruler": {
                "score,none": 80.0,
                "len_16384,none": 70.0,
                "len_16384_stderr,none": 3.0,
                "len_4096,none": 90.0,
                "len_4096_stderr,none": 1.0,
                "len_8192,none": 80.0,
                "len_8192_stderr,none": "N/A",
            },
            "lch_babilong": {"len_0k,none": 100.0, "len_4k,none": 60.0, "len_2k,none": 75.0},
        },
        dirs,
    )
    write_run(
        root / "dyn",
        {"pretrained": "/m/Llama", "pic": "dynamic", "pic_ratio": 4},
        3.0,
        {"lch_ruler": {"len_4096,none": 88.0, "len_8192,none": float("nan"), "len_16384,none": 77.5}},
        dirs,
    )
    write_run(
        root / "ppl-only",
        {"pretrained": "/m/Other"},
        4.0,
        {"ppl_govreport": {"ppl,none": 5.0}},
        {"ppl_govreport": {"ppl": False}},
    )
    return root


def test_context_curves_read_per_length_metrics(tmp_path):
    runs, _ = load_runs([_ruler_babilong_runs(tmp_path)])
    ruler = context_curves(runs, "lch_ruler")
    assert list(ruler) == [
        "Llama · base model",
        "Llama · Dynamic PIC (s_cr 4, l_ic 4, l_rc 200)",
    ]  # the ppl-only run has no curve
    assert [(p.tokens, p.name, p.score, p.stderr) for p in ruler["Llama · base model"]] == [
        (4096, "4096", 90.0, 1.0),
        (8192, "8192", 80.0, None),
        (16384, "16384", 70.0, 3.0),
    ]
    # NaN is a missing value: left out, never drawn as a number
    assert [(p.tokens, p.score) for p in ruler["Llama · Dynamic PIC (s_cr 4, l_ic 4, l_rc 200)"]] == [
        (4096, 88.0),
        (16384, 77.5),
    ]
    babilong = context_curves(runs, "lch_babilong")
    assert [(p.tokens, p.name, p.score) for p in babilong["Llama · base model"]] == [
        (0, "0k", 100.0),
        (2048, "2k", 75.0),
        (4096, "4k", 60.0),
    ]
    with pytest.raises(ValueError, match="len_<length>"):
        context_curves(runs, "ppl_govreport")

    fig = context_figure({"lch_ruler": ruler, "lch_babilong": babilong})
    ax_ruler, ax_babilong = fig.axes
    # lengths at evenly spaced positions in token order, labelled with the task's names
    assert [t.get_text() for t in ax_ruler.get_xticklabels()] == ["4096", "8192", "16384"]
    assert [t.get_text() for t in ax_babilong.get_xticklabels()] == ["0k", "2k", "4k"]
    drawn = {bars.get_label(): bars.lines[0].get_xydata().tolist() for bars in ax_ruler.containers}
    # the legend drops what all configurations share (the title shows it); two series are shifted by -/+ 0.02
    # of a length step so that equal scores stay visible, each with its own marker and line style
    assert list(drawn) == ["base model", "Dynamic PIC (s_cr 4, l_ic 4, l_rc 200)"]
    assert drawn["base model"] == [
        [pytest.approx(-0.02), 90.0],
        [pytest.approx(0.98), 80.0],
        [pytest.approx(1.98), 70.0],
    ]
    assert drawn["Dynamic PIC (s_cr 4, l_ic 4, l_rc 200)"] == [[pytest.approx(0.02), 88.0], [pytest.approx(2.02), 77.5]]
    lines = [bars.lines[0] for bars in ax_ruler.containers]
    assert lines[0].get_marker() != lines[1].get_marker() and lines[0].get_linestyle() != lines[1].get_linestyle()
    assert ax_ruler.get_title() == "lch_ruler\nLlama" and ax_babilong.get_title() == "lch_babilong"
    # scores out of 100 on an axis of their whole range (3 % margin), never a zoom that makes 88 vs 90 a cliff
    assert ax_ruler.get_ylim() == pytest.approx((-3.0, 103.0)) and ax_babilong.get_ylim() == pytest.approx(
        (-3.0, 103.0)
    )
    assert ax_ruler.get_ylabel() == "score (0-100)"
    outside = context_figure({"t": {"x": [LengthPoint(1024, "1k", 150.0)]}}).axes[0]
    assert outside.get_ylabel() == "score" and outside.get_ylim()[1] > 150.0  # not a 0-100 score: its own range
    # bars are 95 % intervals, 1.96 stderr each way; "N/A" (n = 1) draws none (0)
    from scipy.stats import norm

    z = norm.ppf(0.975)
    bars = ax_ruler.containers[0].lines[2][0].get_segments()
    assert [seg[:, 1].tolist() for seg in bars] == [
        [pytest.approx(90 - z), pytest.approx(90 + z)],
        [80.0, 80.0],
        [pytest.approx(70 - 3 * z), pytest.approx(70 + 3 * z)],
    ]
    # these runs recorded no n; the point without a bar is said to be one
    assert ax_ruler.get_xlabel() == "context length (tokens)\nbars: 95% CI; no bar: n = 1, samples alike or no stderr"


def test_each_point_shows_its_n_and_an_interval_inside_the_score_range(tmp_path):
    """n per point: a task's n_len_<L>, a group's the sum over its tasks; under the length when every line has the
    same n there, else beside the point. A 95 % interval never passes 0 or 100."""
    dirs = {"grp": {"len_1024": True}, "a": {"len_1024": True, "len_2048": True}, "b": {"len_1024": True}}
    for date, (name, pic, n_b) in enumerate((("vanilla", {}, 2), ("ntk", {"pic": "ntk", "pic_ratio": 4}, 5))):
        folder = tmp_path / name
        write_run(
            folder,
            {"pretrained": "/m/Llama", **pic},
            float(date),
            {
                "grp": {"len_1024,none": 97.0, "len_1024_stderr,none": 2.0},
                "a": {
                    "len_1024,none": 98.0,
                    "len_1024_stderr,none": 2.0,
                    "n_len_1024,none": 3,
                    "len_2048,none": 50.0,
                    "len_2048_stderr,none": 10.0,
                    "n_len_2048,none": 3,
                },
                "b": {"len_1024,none": 96.0, "n_len_1024,none": n_b},
            },
            dirs,
        )
        data = json.loads(next(folder.glob("results_*.json")).read_text())
        data["group_subtasks"] = {"grp": ["a", "b"]}
        next(folder.glob("results_*.json")).write_text(json.dumps(data))
    runs, _ = load_runs([tmp_path])
    group, task = context_curves(runs, "grp"), context_curves(runs, "a")
    assert [[p.n for p in points] for points in group.values()] == [[3 + 2], [3 + 5]]
    assert [[p.n for p in points] for points in task.values()] == [[3, 3], [3, 3]]
    fig = context_figure({"grp": group, "a": task})
    ax_group, ax_task = fig.axes
    # the lines disagree on the group's n: each point says its own; they agree on the task's: under the length
    assert sorted(t.get_text() for t in ax_group.texts) == ["n=5", "n=8"]
    assert [t.get_text() for t in ax_group.get_xticklabels()] == ["1024"]
    assert [t.get_text() for t in ax_task.get_xticklabels()] == ["1024\nn=3", "2048\nn=3"] and not ax_task.texts
    assert ax_task.get_xlabel() == "context length (tokens)\nn: samples per point; bars: 95% CI"
    # 98 +- 1.96 x 2 would pass 100: cut at 100; 50 +- 19.6 inside the range
    from scipy.stats import norm

    z = norm.ppf(0.975)
    bars = ax_task.containers[0].lines[2][0].get_segments()
    assert [seg[:, 1].tolist() for seg in bars] == [
        [pytest.approx(98 - 2 * z), 100.0],
        [pytest.approx(50 - 10 * z), pytest.approx(50 + 10 * z)],
    ]


def test_lch_plot_context_writes_png(tmp_path, capsys):
    root = _ruler_babilong_runs(tmp_path / "runs")
    out = tmp_path / "ctx.png"
    assert main(["plot", "context", str(root), "--task", "lch_ruler", "lch_babilong", "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == PNG
    printed = capsys.readouterr().out
    assert "lch_babilong | Llama · base model: 0k 100, 2k 75, 4k 60" in printed
    assert main(["plot", "context", str(root), "--task", "nope", "-o", str(out)]) == 2
    assert "nope/len_<length>" in capsys.readouterr().err


# The PIC paper, Table 1, LLaMA-3.1-8B-Instruct columns: (ratio, Length, Quality) per method
TABLE1 = {
    "naive": [(0.5, 779.26, 73.91), (0.75, 959.35, 78.52), (1, 1001.86, 79.85), (2, 691.76, 71.96)],
    "ntk": [
        (0.33, 770.85, 77.54),
        (0.67, 882.79, 79.49),
        (1, 1020.80, 80.97),
        (4, 1522.97, 82.38),
        (16, 1802.11, 81.05),
    ],
    "dynamic": [
        (0.25, 816.65, 79.30),
        (0.5, 893.25, 79.15),
        (1, 1024.05, 81.07),
        (4, 1380.63, 81.31),
        (16, 1938.24, 81.12),
        (128, 1961.89, 75.31),
    ],
}
HB = {"hellobench_htg": {"length": True, "quality": True}}


def _table1_runs(root: Path) -> Path:
    date = 0.0
    for method, rows in TABLE1.items():
        for ratio, length, quality in rows:
            date += 1
            args = {"pretrained": "/m/Llama-3.1-8B-Instruct", "pic": method, "pic_ratio": ratio}
            if method == "dynamic":
                args["pic_initial"] = 4  # the default spelled out: same line as runs that leave it out
            write_run(
                root / f"llama-{method}-{ratio}",
                args,
                date,
                {"hellobench_htg": {"length,none": length, "quality,none": quality}},
                HB,
            )
    # the vanilla run of a second base model joins its lines at ratio 1; a Dynamic PIC variant with
    # another recent window gets a line of its own; a quality-less (unjudged) run keeps its length
    write_run(
        root / "qwen-vanilla",
        {"pretrained": "/m/Qwen"},
        100.0,
        {"hellobench_htg": {"length,none": 958.33, "quality,none": 80.17, "corrupted_ratio,none": 0.0407}},
        HB,
    )
    write_run(
        root / "qwen-dyn4",
        {"pretrained": "/m/Qwen", "pic": "dynamic", "pic_ratio": "4"},
        101.0,
        {"hellobench_htg": {"length,none": 1125.13, "quality,none": 81.58}},
        HB,
    )
    write_run(
        root / "qwen-dyn4-r600",
        {"pretrained": "/m/Qwen", "pic": "dynamic", "pic_ratio": 4, "pic_recent": 600},
        102.0,
        {"hellobench_htg": {"length,none": 1200.0}},
        HB,
    )
    return root


def test_pic_series_reproduces_paper_table1(tmp_path):
    runs, _ = load_runs([_table1_runs(tmp_path)])
    series = pic_series(pic_points_from_runs(runs, "hellobench_htg"))
    assert set(series) == {"Llama-3.1-8B-Instruct", "Qwen"}
    llama = series["Llama-3.1-8B-Instruct"]
    for method, rows in TABLE1.items():
        assert list(llama[method]) == [""]  # one line per method: defaults spelled out or not
        assert [(r, p.length, p.quality) for r, p in llama[method][""]] == [(float(a), b, c) for a, b, c in rows]
    qwen = series["Qwen"]["dynamic"]
    assert [(r, p.length, p.quality) for r, p in qwen[""]] == [(1.0, 958.33, 80.17), (4.0, 1125.13, 81.58)]
    assert [(r, p.length, p.quality) for r, p in qwen["recent=600"]] == [(1.0, 958.33, 80.17), (4.0, 1200.0, None)]
    assert set(series["Qwen"]) == {"dynamic"}
    assert qwen[""][0][1].corrupted_ratio == 0.0407 and qwen[""][1][1].corrupted_ratio is None

    fig = pic_figure(series, "length", "quality")
    axes = fig.axes  # 2 x 3 panels, each with a twin axis for quality (added after the grid)
    titles = [ax.get_title() for ax in axes if ax.get_title()]
    assert titles == [f"{b}: {m} PIC" for b in ("Llama-3.1-8B-Instruct", "Qwen") for m in ("naive", "ntk", "dynamic")]
    ntk = next(ax for ax in axes if ax.get_title() == "Llama-3.1-8B-Instruct: ntk PIC")
    twin = next(ax for ax in axes if ax is not ntk and ax.get_position().bounds == ntk.get_position().bounds)
    assert ntk.get_xscale() == "log"
    assert [t.get_text() for t in ntk.get_xticklabels()] == ["0.33", "0.67", "1", "4", "16"]
    (length_line,) = ntk.get_lines()
    (quality_line,) = twin.get_lines()
    assert length_line.get_xydata().tolist() == [[r, length] for r, length, _ in TABLE1["ntk"]]
    assert quality_line.get_xydata().tolist() == [[r, q] for r, _, q in TABLE1["ntk"]]
    assert length_line.get_color() == "tab:blue" and quality_line.get_color() == "tab:red"
    assert twin.get_ylim() == pytest.approx((-3.0, 103.0))  # a quality out of 100 on its whole range, not a zoom

    with pytest.raises(ValueError, match="no run used PIC"):
        pic_series([p for p in pic_points_from_runs(runs, "hellobench_htg") if "pic" not in p.model_args])


def test_a_checkpoint_whose_variant_file_applied_dynamic_pic_is_on_the_dynamic_line(tmp_path):
    """README's example: a Dynamic PIC-SFT checkpoint evaluated as pretrained=...,peft=ckpt (no pic arg): its
    variant file applied Dynamic PIC (s_cr 4), which the run records; the plot and the label read that, not the
    model args. A run without the record falls back to its model args."""
    dyn = Inference("dynamic", ratio=4.0).to_model_args()
    write_run(
        tmp_path / "ckpt",
        {"pretrained": "/m/Base", "peft": "/ck/dyn-sft"},
        1.0,
        {"hellobench_htg": {"length,none": 900.0, "quality,none": 70.0}},
        HB,
        applied=dyn,
    )
    write_run(
        tmp_path / "ckpt-vanilla",
        {"pretrained": "/m/Base", "peft": "/ck/dyn-sft", "pic": "none"},
        2.0,
        {"hellobench_htg": {"length,none": 800.0, "quality,none": 60.0}},
        HB,
        applied=Inference().to_model_args(),
    )
    write_run(
        tmp_path / "old",
        {"pretrained": "/m/Base", "pic": "naive", "pic_ratio": 2},
        3.0,
        {"hellobench_htg": {"length,none": 700.0, "quality,none": 50.0}},
        HB,
    )
    runs, _ = load_runs([tmp_path])
    series = pic_series(pic_points_from_runs(runs, "hellobench_htg"))
    assert [(r, p.length) for r, p in series["dyn-sft"]["dynamic"][""]] == [(1.0, 800.0), (4.0, 900.0)]
    assert [(r, p.length) for r, p in series["Base"]["naive"][""]] == [(2.0, 700.0)]
    assert [run.label for run in runs] == [
        "dyn-sft · Dynamic PIC (s_cr 4, l_ic 4, l_rc 200)",
        "dyn-sft · standard inference",
        "Base · Naive PIC (s_cr 2)",
    ]


def test_lch_plot_pic_writes_png(tmp_path, capsys):
    root = _table1_runs(tmp_path / "runs")
    out = tmp_path / "fig1.png"
    assert main(["plot", "pic", str(root), "--task", "hellobench_htg", "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == PNG
    assert (
        "Qwen | dynamic recent=600: s=1 len=958.33 q=80.17 cr=0.0407, s=4 len=1200.0 q=None cr=None"
        in capsys.readouterr().out
    )
    assert main(["plot", "pic", str(root), "--task", "a", "b", "-o", str(out)]) == 2


DIMS = {"Relevance": 5, "Accuracy": 5, "Coherence": 3, "Clarity": 3, "Breadth and Depth": 5, "Reading Experience": 3}


def test_pic_points_with_appendix_a_averaging_from_logged_samples(tmp_path):
    """Every sample gets its own LongBench-Write grades (per-sample quality = mean over the six dimensions of
    25 (score - 1)), so the quality of each point shows which samples it was averaged over."""
    import re

    from harness.judges.stage import judge_samples_file
    from tests.judge_servers import CannedJudge, longbench_write_reply

    names = ("Relevance", "Accuracy", "Coherence", "Clarity", "Breadth and Depth", "Reading Experience")

    def dims(*scores: int) -> dict:  # one number: all six dimensions
        return dict(zip(names, scores * 6 if len(scores) == 1 else scores))

    grades = {
        # per-sample quality 100, 0, 75, 50, (100+75+50+25+0+50)/6 = 50
        "vanilla": [dims(5), dims(1), dims(4), dims(3), dims(5, 4, 3, 2, 1, 3)],
        # 25, 100 (corrupted), (50+25+50+25+50+25)/6 = 37.5, 300/6 = 50, 75
        "dyn": [dims(2), dims(5), dims(3, 2, 3, 2, 3, 2), dims(1, 2, 3, 4, 5, 3), dims(4)],
        # 75, 100, 25, 100 (corrupted), 100 (corrupted)
        "ntk": [dims(4), dims(5), dims(2), dims(5), dims(5)],
    }

    def grade(prompt: str, body: dict) -> str:
        m = re.search(r"/ t(\d+) (\w+)", prompt)
        return longbench_write_reply(grades[m.group(2)][int(m.group(1))])

    prompt = tmp_path / "judge.txt"
    prompt.write_text("Judge this. $INST$ / $RESPONSE$")

    def run(name: str, args: dict, lengths: list, corrupted: list, judge: dict) -> str:
        folder = tmp_path / name
        write_run(
            folder,
            {"pretrained": "/m/tiny", **args},
            1.0,
            {"longbench_write": {"length,none": sum(lengths) / len(lengths)}},
            {},
        )
        rows = [
            {
                "doc_id": i,
                "length": n,
                "n_tokens": n,
                "corrupted_ratio": float(bad),
                "quality": {
                    "instruction": f"w{i}",
                    "response": f"t{i} {name}",
                    "length_score": 50.0,
                    "judge": judge,
                    "prompt_path": str(prompt),
                },
            }
            for i, (n, bad) in enumerate(zip(lengths, corrupted))
        ]
        samples = folder / "samples_longbench_write_1.jsonl"
        samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
        judge_samples_file(samples)  # the judge stage; the plot then reads judgement files only
        return str(folder)

    with CannedJudge(0.5, DIMS, grade=grade) as canned:
        judge = {
            "base_url": canned.base_url,
            "model": "canned",
            "policy": "drop",
            "temperature": 0.5,
            "max_tokens": 64,
            "concurrency": 4,
            "cache_dir": str(tmp_path / "cache"),
        }
        vanilla = run("vanilla", {}, [100, 200, 300, 400, 500], [False] * 5, judge)
        # 1 of 5 corrupted (CR 20 % < threshold 25 %): both runs average over the samples clean in both
        dyn = run(
            "dyn",
            {"pic": "dynamic", "pic_ratio": 2},
            [110, 9999, 330, 440, 550],
            [False, True, False, False, False],
            judge,
        )
        points = pic_points_from_samples([vanilla, dyn], "longbench_write", threshold=0.25)
        # a third run with 2 of 5 corrupted (CR 40 % >= 25 %): its own clean samples 0, 1, 2; shared now 0, 2
        ntk = run(
            "ntk", {"pic": "ntk", "pic_ratio": 2}, [120, 240, 360, 480, 600], [False, False, False, True, True], judge
        )
        points3 = pic_points_from_samples([vanilla, dyn, ntk], "longbench_write", threshold=0.25)
        assert canned.requests == 15  # each sample judged once; the plots read the judgement files
    series = pic_series(points)
    line = series["tiny"]["dynamic"][""]
    assert [r for r, _ in line] == [1.0, 2.0]
    assert line[0][1].length == pytest.approx((100 + 300 + 400 + 500) / 4)  # not the results file's mean 300
    assert line[1][1].length == pytest.approx((110 + 330 + 440 + 550) / 4)
    # Was `quality == expected_q` for both points, true only because every sample had the same grades.
    # vanilla: shared samples 0, 2, 3, 4: (100 + 75 + 50 + 50) / 4 = 68.75 (own five: 275 / 5 = 55)
    assert line[0][1].quality == pytest.approx(68.75)
    # dyn: shared = own clean samples 0, 2, 3, 4: (25 + 37.5 + 50 + 75) / 4 = 46.875 (with sample 1: 57.5)
    assert line[1][1].quality == pytest.approx(46.875)
    assert [p.corrupted_ratio for _, p in line] == [0.0, pytest.approx(0.2)]

    series3 = pic_series(points3)
    dyn_line, ntk_line = series3["tiny"]["dynamic"][""], series3["tiny"]["ntk"][""]
    assert dyn_line[0][1] is ntk_line[0][1]  # the vanilla run at ratio 1 of both lines
    van3, dyn3, ntk3 = dyn_line[0][1], dyn_line[1][1], ntk_line[1][1]
    # vanilla (CR 0) and dyn (CR 20 % < 25 %) use the shared samples 0, 2
    assert (van3.length, van3.quality) == (pytest.approx((100 + 300) / 2), pytest.approx((100 + 75) / 2))  # own: 55
    assert (dyn3.length, dyn3.quality) == (
        pytest.approx((110 + 330) / 2),
        pytest.approx((25 + 37.5) / 2),
    )  # own: 46.875
    # ntk (CR 40 %) uses its own clean samples 0, 1, 2: quality (75 + 100 + 25) / 3 (shared 0, 2: 50)
    assert (ntk3.length, ntk3.quality) == (pytest.approx((120 + 240 + 360) / 3), pytest.approx(200 / 3))
    assert ntk3.corrupted_ratio == pytest.approx(0.4)
    # each point's n is the samples it averages: 2 shared, or ntk's own 3; a panel whose points agree says it once
    assert (van3.n, dyn3.n, ntk3.n) == (2, 2, 3) and [p.n for _, p in line] == [4, 4]
    fig = pic_figure(series3)
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == ["tiny: ntk PIC", "tiny: dynamic PIC (n 2 per point)"]
    ntk_ax = fig.axes[0]
    assert sorted(t.get_text() for t in ntk_ax.texts) == ["n=2", "n=3"]


def test_each_line_says_its_effective_context_lengths():
    """The legend's title gives each line's effective lengths, computed by hand: line a (1k 95, 2k 90, 4k 80) keeps
    RULER's 85.6 to 2k and 85 % of 95 = 80.75 to 2k; line b (60, 55, 70 +- 2) never reaches 85.6 and keeps 51 to 4k,
    but rises from 55 to 70 by more than 1.96 x sqrt(2^2 + 2^2) = 5.5: not monotone."""
    a = [LengthPoint(1024, "1k", 95.0, 2.0), LengthPoint(2048, "2k", 90.0, 2.0), LengthPoint(4096, "4k", 80.0, 2.0)]
    b = [LengthPoint(1024, "1k", 60.0, 2.0), LengthPoint(2048, "2k", 55.0, 2.0), LengthPoint(4096, "4k", 70.0, 2.0)]
    ax = context_figure({"t": {"a": a, "b": b}}).axes[0]
    assert ax.get_legend().get_title().get_text() == (
        "effective length (>= 85.6 / >= 85% of the shortest's):\na: 2k / 2k\nb: none / 4k (not monotone within 95% CIs)"
    )
    assert [t.get_text() for t in ax.get_legend().texts] == ["a", "b"]
