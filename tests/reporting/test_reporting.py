"""lch leaderboard and lch regress on lm-eval-shaped result files built here."""

from __future__ import annotations

import csv
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.cli import main


def write_run(
    folder: Path,
    model_args: dict,
    date: float,
    results: dict,
    directions: dict,
    evaluated_as: str | None = None,
    applied: dict | None = None,
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"results_{date}.json"
    config = {"model": "hf-pic", "model_args": model_args}
    if evaluated_as is not None:  # hf-pic writes it (results of older versions have none)
        config["lch_evaluated_as"] = evaluated_as
    if applied is not None:  # lch_inference: the inference applied, as model args
        config["lch_inference"] = applied
    path.write_text(json.dumps({"results": results, "higher_is_better": directions, "date": date, "config": config}))
    return path


DIRS = {"ppl_govreport": {"ppl": False}, "lch_ruler": {"len_4096": True, "score": True}}


@pytest.fixture()
def runs(tmp_path):
    vanilla = {"pretrained": "m"}
    dyn = {"pretrained": "m", "pic": "dynamic", "pic_ratio": 2}
    write_run(
        tmp_path / "a",
        vanilla,
        100.0,
        {
            "ppl_govreport": {"alias": "x", "ppl,none": 6.0, "ppl_stderr,none": "N/A"},
            "lch_ruler": {"len_4096,none": 50.0, "len_4096_stderr,none": 2.0},
        },
        DIRS,
    )
    write_run(
        tmp_path / "b",
        vanilla,
        200.0,
        {"ppl_govreport": {"ppl,none": 5.5}, "lch_ruler": {"len_4096,none": 60.0, "len_4096_stderr,none": 1.5}},
        DIRS,
    )
    write_run(
        tmp_path / "c",
        dyn,
        150.0,
        {"ppl_govreport": {"ppl,none": 7.25}},
        DIRS,  # no RULER: empty cells
        evaluated_as="Dynamic PIC (s_cr 2, l_ic 4, l_rc 200)",
    )
    return tmp_path


def read_csv(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_leaderboard_latest_per_configuration_cell_by_cell(runs):
    out = runs / "board.csv"
    assert (
        main(
            [
                "leaderboard",
                str(runs / "a"),
                str(runs / "b"),
                str(runs / "c"),
                "-o",
                str(out),
                "--sort",
                "ppl_govreport/ppl",
            ]
        )
        == 0
    )
    rows = read_csv(out)
    assert list(rows[0]) == [
        "run",
        "model",
        "checkpoint",
        "variant",
        "model_args",
        "date",
        "lch_ruler/effective_length",
        "lch_ruler/effective_length_rel",
        "lch_ruler/len_4096",
        "lch_ruler/len_4096_stderr",
        "ppl_govreport/ppl",
        "cautions",
    ]
    # b's one length scores 60: below RULER's 85.6 (0: no length reaches it), above 85 % of itself (4096); c has
    # no per-length score: empty
    assert [(r["lch_ruler/effective_length"], r["lch_ruler/effective_length_rel"]) for r in rows] == [
        ("0", "4096"),
        ("", ""),
    ]
    # run a is superseded by the later run b of the same configuration; sorted by ppl, lower first
    assert [
        (r["model_args"], r["ppl_govreport/ppl"], r["lch_ruler/len_4096"], r["lch_ruler/len_4096_stderr"]) for r in rows
    ] == [
        (json.dumps({"pretrained": "m"}), "5.5", "60.0", "1.5"),
        (json.dumps({"pic": "dynamic", "pic_ratio": 2, "pretrained": "m"}, sort_keys=True), "7.25", "", ""),
    ]
    assert rows[0]["checkpoint"] == "m" and rows[0]["date"] == "1970-01-01 00:03:20"
    assert [r["variant"] for r in rows] == ["", "Dynamic PIC (s_cr 2, l_ic 4, l_rc 200)"]
    # one name per run, as every report names it: b recorded no variant, so its model args say it (a model run as
    # is: the base model)
    assert [r["run"] for r in rows] == ["m · base model", "m · Dynamic PIC (s_cr 2, l_ic 4, l_rc 200)"]
    md = out.with_suffix(".md").read_text().splitlines()
    # Markdown for people: the shared name in the title, each run by what differs, 4 significant digits, stderr in
    # the cell; the curve's effective lengths in the headline, its points a section below (a row per length, a
    # column per run); no diagnostics section when the runs declare no bookkeeping and carry no caution
    assert md == [
        "# Leaderboard: m",
        "",
        "| run | lch_ruler/effective_length | lch_ruler/effective_length_rel | ppl_govreport/ppl |",
        "|---|---|---|---|",
        "| base model | 0 | 4096 | 5.5 |",
        "| Dynamic PIC (s_cr 2, l_ic 4, l_rc 200) |  |  | 7.25 |",
        "",
        "## Scores per length",
        "",
        "The score of each curve above at each length (its effective lengths rest on them).",
        "",
        "| metric | base model | Dynamic PIC (s_cr 2, l_ic 4, l_rc 200) |",
        "|---|---|---|",
        "| lch_ruler/len_4096 | 60 ± 1.5 |  |",
    ]
    page = out.with_suffix(".html").read_text()
    assert page.count("<tr>") == 3 and "addEventListener" in page and "<td>m · base model</td>" in page
    # HTML shows 6 significant digits and sorts by the full value; model_args as words, JSON as tooltip
    assert "<td data-v='7.25'>7.25</td>" in page and "<td data-v='60.0'>60</td>" in page
    assert ">pic=dynamic pic_ratio=2</td>" in page and "title='{&quot;pic&quot;: &quot;dynamic&quot;" in page


def test_leaderboard_all_runs_and_sort_by_a_higher_is_better_metric(runs):
    out = runs / "all.csv"
    assert main(["leaderboard", str(runs), "-o", str(out), "--all", "--sort", "lch_ruler/len_4096"]) == 0
    rows = read_csv(out)
    assert [r["lch_ruler/len_4096"] for r in rows] == ["60.0", "50.0", ""]  # best first, missing last
    # the Markdown's headline shows the score it is sorted by, though a per-length score is a section below otherwise
    md = out.with_suffix(".md").read_text().splitlines()
    assert md[2] == (
        "| run | lch_ruler/effective_length | lch_ruler/effective_length_rel | lch_ruler/len_4096 | ppl_govreport/ppl |"
    )
    assert "## Scores per length" not in md


def test_leaderboard_malformed_files(runs, capsys):
    (runs / "bad").mkdir()
    (runs / "bad" / "results_x.json").write_text("{not json")
    assert main(["leaderboard", str(runs / "b"), str(runs / "bad"), "-o", str(runs / "x.csv")]) == 2
    assert "results_x.json" in capsys.readouterr().err
    assert (
        main(["leaderboard", str(runs / "b"), str(runs / "bad"), "-o", str(runs / "x.csv"), "--on-error", "skip"]) == 0
    )
    assert "skipped:" in capsys.readouterr().err and len(read_csv(runs / "x.csv")) == 1


def test_regress_exit_codes_and_junit(runs, tmp_path):
    baseline = tmp_path / "baselines" / "vanilla.json"
    assert main(["regress", str(runs / "b"), "--baseline", str(baseline), "--update-baseline", "--abs-tol", "0.1"]) == 0
    saved = json.loads(baseline.read_text())
    # these files declare no metric roles (an older lch): every directed metric is a score, with abs_tol
    assert saved["metrics"]["ppl_govreport/ppl"] == {
        "value": 5.5,
        "stderr": None,
        "higher_is_better": False,
        "role": "score",
        "abs_tol": 0.1,
        "rel_tol": 0.0,
    }
    assert saved["metrics"]["lch_ruler/len_4096"]["stderr"] == 1.5
    assert main(["regress", str(runs / "b"), "--baseline", str(baseline)]) == 0  # the same run passes
    # run a: ppl 6.0 vs 5.5 (lower is better, beyond abs_tol 0.1): regression; RULER 50 vs 60 with
    # tolerance 2 * sqrt(1.5^2 + 2^2) = 5: regression too
    junit = tmp_path / "junit.xml"
    assert main(["regress", str(runs / "a"), "--baseline", str(baseline), "--junit", str(junit)]) == 1
    suite = ET.parse(junit).getroot()
    assert suite.get("tests") == "2" and suite.get("failures") == "2"
    failed = {case.get("name") for case in suite if case.find("failure") is not None}
    assert failed == {"ppl_govreport/ppl", "lch_ruler/len_4096"}
    # within tolerance: 57 vs 60 with tolerance 5 passes
    write_run(
        runs / "d",
        {"pretrained": "m"},
        300.0,
        {"ppl_govreport": {"ppl,none": 5.55}, "lch_ruler": {"len_4096,none": 57.0, "len_4096_stderr,none": 2.0}},
        DIRS,
    )
    assert main(["regress", str(runs / "d"), "--baseline", str(baseline)]) == 0
    # a baseline metric missing from the run fails the gate
    assert main(["regress", str(runs / "c"), "--baseline", str(baseline)]) == 1
    # unusable input
    (tmp_path / "broken.json").write_text("[]")
    assert main(["regress", str(runs / "b"), "--baseline", str(tmp_path / "broken.json")]) == 2
    assert main(["regress", str(tmp_path / "nothing-here"), "--baseline", str(baseline)]) == 2


# LongRecipe (the LongRecipe paper) Table 1, Llama3-8B-I rows: NIAH(M) and RULER of FLT / RPES / PoSE / LongRecipe
# at 80k and 128k (the 8k FLT row included)
NIAH_M = [82.3, 71.8, 68.8, 78.9, 73.2, 72.7, 80.1, 82.6]
RULER = [75.7, 71.4, 69.9, 74.5, 75.8, 71.5, 75.3, 76.0]


def test_correlation_against_scipy_and_hand_computation():
    """Pearson's r by hand and its 95 % interval as scipy's own (Fisher z); its p-value, Spearman's interval and p
    from Fisher's z written out here; Kendall's tau-b and its p-value as scipy's asymptotic test (ties included)."""
    import math

    from scipy import stats

    from harness.reporting.correlate import correlation

    got = correlation(NIAH_M, RULER)
    mx, my = sum(NIAH_M) / 8, sum(RULER) / 8
    cov = sum((a - mx) * (b - my) for a, b in zip(NIAH_M, RULER))
    r = cov / math.sqrt(sum((a - mx) ** 2 for a in NIAH_M) * sum((b - my) ** 2 for b in RULER))
    assert got["n"] == 8 and got["undefined"] is None and got["pearson"]["r"] == pytest.approx(r, abs=1e-12)
    scipy_ci = stats.pearsonr(NIAH_M, RULER).confidence_interval(0.95)
    assert got["pearson"]["ci"] == pytest.approx([scipy_ci.low, scipy_ci.high], abs=1e-12)
    assert got["pearson"]["p"] == pytest.approx(2 * stats.norm.sf(abs(math.atanh(r)) * math.sqrt(8 - 3)), rel=1e-12)
    rho = stats.spearmanr(NIAH_M, RULER).statistic
    se = math.sqrt(1.06 / 5)
    assert got["spearman"]["r"] == pytest.approx(rho)
    assert got["spearman"]["ci"] == pytest.approx(
        [math.tanh(math.atanh(rho) - 1.959964 * se), math.tanh(math.atanh(rho) + 1.959964 * se)], abs=1e-6
    )
    kendall = stats.kendalltau(NIAH_M, RULER, method="asymptotic")
    assert got["kendall"]["r"] == pytest.approx(kendall.statistic) and got["kendall"]["p"] == pytest.approx(
        kendall.pvalue
    )
    # a perfect negative relation (a LongPPL-vs-benchmark shape): r -1, p 0, the interval the point
    perfect = correlation([1, 2, 3, 4, 5], [10, 8, 6, 4, 2])["pearson"]
    assert perfect == {"r": pytest.approx(-1.0), "p": 0.0, "ci": [pytest.approx(-1.0), pytest.approx(-1.0)]}
    with pytest.raises(ValueError, match="at least 2"):
        correlation([1], [3])


def test_kendall_with_ties_is_scipys_asymptotic_test():
    from scipy import stats

    from harness.reporting.correlate import correlation

    x, y = [1, 1, 2, 3, 3, 3, 4, 5, 5, 6], [2, 1, 1, 3, 4, 4, 4, 6, 5, 5]
    expected = stats.kendalltau(x, y, method="asymptotic")
    got = correlation(x, y)["kendall"]
    assert got["r"] == pytest.approx(expected.statistic, abs=1e-12) and got["p"] == pytest.approx(
        expected.pvalue, rel=1e-9
    )
    assert correlation(x, y)["spearman"]["r"] == pytest.approx(stats.spearmanr(x, y).statistic)


def test_a_coefficients_interval_and_p_value_never_contradict():
    """Over 400 constructed data sets (n 5 to 30, half of them with ties, correlations from none to strong), for
    every method: the 95 % interval excludes 0 exactly when p < 0.05, and it holds the coefficient."""
    import numpy as np

    from harness.reporting.correlate import METHODS, correlation

    rng = np.random.default_rng(0)
    seen = {method: set() for method in METHODS}
    for case in range(400):
        n = int(rng.integers(5, 31))
        x = rng.normal(size=n)
        y = rng.uniform(0, 1.5) * x + rng.normal(size=n)
        if case % 2:
            x, y = np.round(x * 2), np.round(y * 2)
        if np.ptp(x) == 0 or np.ptp(y) == 0:
            continue
        found = correlation(x, y)
        for method in METHODS:
            r, p, (lo, hi) = found[method]["r"], found[method]["p"], found[method]["ci"]
            assert lo <= r <= hi
            assert (lo > 0 or hi < 0) == (p < 0.05), (method, n, r, p, lo, hi)
            seen[method].add(p < 0.05)
    assert all(seen[method] == {True, False} for method in METHODS)  # both sides of the line were exercised


@pytest.mark.parametrize("n", [2, 3, 4])
def test_too_few_runs_are_not_estimable(n):
    """Three runs ranked alike gave Spearman p 0 beside Kendall 0.333 and an interval excluding 0 beside p 0.22:
    below 5 runs nothing is estimated."""
    import math

    from harness.reporting.correlate import correlation

    found = correlation(list(range(n)), [v * v for v in range(n)])
    assert found["undefined"] == f"{n} runs are too few to estimate a correlation, which needs at least 5"
    assert all(math.isnan(found[m]["r"]) and math.isnan(found[m]["p"]) for m in ("pearson", "spearman", "kendall"))


def test_labels_of_nearby_points_are_raised_apart():
    import numpy as np

    from harness.reporting.correlate import label_rises

    pixels = np.array([[100.0, 100.0], [104.0, 101.0], [106.0, 99.0], [400.0, 100.0]])
    rises = label_rises(pixels, [20, 20, 20, 20], dpi=72.0, size=7.0)  # 1 px per point: a line is 9.1 px
    line = 1.3 * 7.0
    tops = sorted(pixels[i][1] + rises[i] for i in range(3))
    assert rises[3] == 0.0  # far from the others
    assert all(b - a >= line - 1e-9 for a, b in zip(tops, tops[1:]))  # the three close ones a line apart at least
    assert rises[2] == 0.0  # the lowest keeps its place


def test_lch_correlate_writes_plot_report_and_matrix(tmp_path):
    for i, (a, b) in enumerate(zip(NIAH_M, RULER)):
        write_run(
            tmp_path / "runs" / f"r{i}",
            {"pretrained": f"m{i}"},
            float(i),
            {"lch_ruler_niah_m": {"score,none": a}, "lch_ruler": {"score,none": b}},
            {"lch_ruler_niah_m": {"score": True}, "lch_ruler": {"score": True}},
        )
    write_run(
        tmp_path / "runs" / "partial",
        {"pretrained": "p"},
        9.0,
        {"lch_ruler": {"score,none": 1.0}},
        {"lch_ruler": {"score": True}},
    )  # lacks x: left out, not zero
    out = tmp_path / "report"
    assert (
        main(
            [
                "correlate",
                str(tmp_path / "runs"),
                "--x",
                "lch_ruler_niah_m/score",
                "--y",
                "lch_ruler/score",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    stem = "lch_ruler_score_vs_lch_ruler_niah_m_score"
    data = json.loads((out / f"{stem}.json").read_text())
    from scipy import stats

    assert data["n"] == 8 and data["pearson"]["r"] == pytest.approx(stats.pearsonr(NIAH_M, RULER).statistic)
    png = (out / f"{stem}.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    md = (out / f"{stem}.md").read_text()
    import re

    assert "| pearson |" in md and f"![scatter]({stem}.png)" in md
    assert re.findall(r"^\| (m\d) · base model \|", md, flags=re.M) == [f"m{i}" for i in range(8)]  # by date
    assert (
        main(
            [
                "correlate",
                str(tmp_path / "runs"),
                "--matrix",
                "lch_ruler_niah_m/score",
                "lch_ruler/score",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    assert f"{stats.pearsonr(NIAH_M, RULER).statistic:.3f}" in (out / "matrix.md").read_text()
    assert main(["correlate", str(tmp_path / "runs"), "--x", "nope/x", "--y", "lch_ruler/score", "-o", str(out)]) == 2


def test_markdown_headline_metrics_follow_the_effective_lengths(runs):
    """``headline`` picks the headline's metrics; the curves' effective lengths lead it all the same, and the sections
    below are the ones a board without it has."""
    from harness.core.errors import UsageError
    from harness.reporting.leaderboard import leaderboard, to_markdown
    from harness.reporting.runs import load_runs

    loaded, _ = load_runs([runs])
    board = leaderboard(loaded, sort_by="ppl_govreport/ppl")
    assert to_markdown(board, headline=["ppl_govreport/ppl"]).splitlines() == [
        "# Leaderboard: m",
        "",
        "| run | lch_ruler/effective_length | lch_ruler/effective_length_rel | ppl_govreport/ppl |",
        "|---|---|---|---|",
        "| base model | 0 | 4096 | 5.5 |",
        "| Dynamic PIC (s_cr 2, l_ic 4, l_rc 200) |  |  | 7.25 |",
        "",
        "## Scores per length",
        "",
        "The score of each curve above at each length (its effective lengths rest on them).",
        "",
        "| metric | base model | Dynamic PIC (s_cr 2, l_ic 4, l_rc 200) |",
        "|---|---|---|",
        "| lch_ruler/len_4096 | 60 ± 1.5 |  |",
    ]
    with pytest.raises(UsageError, match="headline metrics lch_ruler/score are not columns"):
        to_markdown(board, headline=["lch_ruler/score"])


def test_leaderboard_puts_scores_first_and_diagnostics_with_cautions_in_their_own_table(tmp_path):
    """Runs as our tasks write them: metric roles and supports declared, cautions recorded. The headline table holds
    the perplexity, the diagnostics table the counts and the caution of the run that found 1 of 2 documents."""
    from harness.metrics.support import documents_support

    declared = {
        "lch_metric_roles": {"ppl": "perplexity", "n_docs": "bookkeeping", "n_tokens": "bookkeeping"},
        "lch_support": [documents_support("ppl", 2).to_json()],
    }
    for name, model, ppl, n_docs, cautions in (
        ("one", "/models/SmolLM2", 12.25, 2, {}),
        (
            "two",
            "/models/gemma3",
            20.5,
            1,
            {"ppl_govreport": ["ppl_govreport/ppl rests on 1 documents, fewer than 2: not the corpus asked for"]},
        ),
    ):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results_1.json").write_text(
            json.dumps(
                {
                    "results": {
                        "ppl_govreport": {"ppl,none": ppl, "n_docs,none": n_docs, "n_tokens,none": 1000 * n_docs}
                    },
                    "higher_is_better": {"ppl_govreport": {"ppl": False, "n_docs": True, "n_tokens": True}},
                    "configs": {"ppl_govreport": {"metadata": declared}},
                    "lch_cautions": cautions,
                    "config": {
                        "model": "hf-pic",
                        "model_args": {"pretrained": model},
                        "lch_evaluated_as": "base model",
                    },
                    "date": 1.0,
                }
            )
        )
    out = tmp_path / "board.csv"
    assert main(["leaderboard", str(tmp_path / "one"), str(tmp_path / "two"), "-o", str(out)]) == 0
    rows = read_csv(out)
    assert list(rows[0])[6:] == ["ppl_govreport/ppl", "ppl_govreport/n_docs", "ppl_govreport/n_tokens", "cautions"]
    assert [r["cautions"] for r in rows] == [
        "",
        "ppl_govreport/ppl rests on 1 documents, fewer than 2: not the corpus asked for",
    ]
    assert out.with_suffix(".md").read_text().splitlines() == [
        "# Leaderboard: base model",
        "",
        "| run | ppl_govreport/ppl |",
        "|---|---|",
        "| SmolLM2 | 12.25 |",
        "| gemma3 | 20.5 |",
        "",
        "## Diagnostics",
        "",
        "What each run's numbers rest on (counts of documents, tokens and samples; not scores).",
        "",
        "| metric | SmolLM2 | gemma3 |",
        "|---|---|---|",
        "| ppl_govreport/n_docs | 2 | 1 |",
        "| ppl_govreport/n_tokens | 2000 | 1000 |",
        "",
        "## Cautions",
        "",
        "What the numbers rest on, where it is too little to mean anything or differs between the runs:",
        "",
        "- ppl_govreport/ppl rests on 1 documents, fewer than 2: not the corpus asked for (gemma3)",
    ]


def _declared_run(folder: Path, ppl: float, n_docs: int, n_tokens: int) -> Path:
    """A ppl_govreport run whose task config declares its metric roles, as our tasks write them."""
    folder.mkdir(parents=True)
    data = {
        "results": {"ppl_govreport": {"ppl,none": ppl, "n_docs,none": n_docs, "n_tokens,none": n_tokens}},
        "higher_is_better": {"ppl_govreport": {"ppl": False, "n_docs": True, "n_tokens": True}},
        "configs": {
            "ppl_govreport": {
                "metadata": {
                    "lch_metric_roles": {"ppl": "perplexity", "n_docs": "bookkeeping", "n_tokens": "bookkeeping"}
                }
            }
        },
        "config": {"model": "hf-pic", "model_args": {"pretrained": "m"}},
        "date": 1.0,
    }
    (folder / "results_1.json").write_text(json.dumps(data))
    return folder


def test_regress_gates_scores_with_relative_tolerance_for_perplexities_and_leaves_bookkeeping(tmp_path, capsys):
    baseline = tmp_path / "b.json"
    base = _declared_run(tmp_path / "base", 10.0, 50, 800_000)
    assert main(["regress", str(base), "--baseline", str(baseline), "--update-baseline", "--rel-tol", "0.01"]) == 0
    saved = json.loads(baseline.read_text())
    assert saved["metrics"] == {
        "ppl_govreport/ppl": {
            "value": 10.0,
            "stderr": None,
            "higher_is_better": False,
            "role": "perplexity",
            "abs_tol": 0.0,
            "rel_tol": 0.01,
        }
    }
    # one document fewer and another token count: bookkeeping, not a regression; ppl +0.9 % within 1 % of 10
    assert (
        main(["regress", str(_declared_run(tmp_path / "same", 10.09, 49, 790_000)), "--baseline", str(baseline)]) == 0
    )
    # ppl +1.1 %: beyond 0.01 x 10 = 0.1
    assert (
        main(["regress", str(_declared_run(tmp_path / "worse", 10.11, 50, 800_000)), "--baseline", str(baseline)]) == 1
    )
    every = tmp_path / "all.json"
    assert main(["regress", str(base), "--baseline", str(every), "--update-baseline", "--all-metrics"]) == 0
    assert sorted(json.loads(every.read_text())["metrics"]) == [
        "ppl_govreport/n_docs",
        "ppl_govreport/n_tokens",
        "ppl_govreport/ppl",
    ]
    counts = tmp_path / "counts"
    counts.mkdir()
    (counts / "results_1.json").write_text(
        json.dumps(
            {
                "results": {"t": {"n_docs,none": 3}},
                "higher_is_better": {"t": {"n_docs": True}},
                "configs": {"t": {"metadata": {"lch_metric_roles": {"n_docs": "bookkeeping"}}}},
                "config": {},
                "date": 1.0,
            }
        )
    )
    capsys.readouterr()
    assert main(["regress", str(counts), "--baseline", str(tmp_path / "c.json"), "--update-baseline"]) == 2
    assert "no score to gate on (only bookkeeping metrics: pass --all-metrics" in capsys.readouterr().err


def test_a_gate_made_as_documented_passes_a_rerun_on_another_core_count_and_fails_a_damaged_checkpoint(
    tmp_path, capsys
):
    """The baseline of a run, made without tolerances: the same checkpoint re-run with one thread (ppl 21.1112 ->
    +2.46e-8, the issue's numbers) passes; the tolerance is said when the baseline is written; a damaged checkpoint
    (ppl +2.4 %) and a ppl up by 2e-4 of itself (twice the noise floor) fail."""
    baseline = tmp_path / "b.json"
    base = _declared_run(tmp_path / "base", 21.1112, 50, 800_000)
    assert main(["regress", str(base), "--baseline", str(baseline), "--update-baseline"]) == 0
    said = capsys.readouterr().out
    assert "tolerances: perplexities 0.01% of their value" in said and "never under 0.0001 of a value" in said
    rerun = _declared_run(tmp_path / "one-thread", 21.1112 + 2.46e-8, 50, 800_000)
    assert main(["regress", str(rerun), "--baseline", str(baseline)]) == 0
    assert (
        main(
            [
                "regress",
                str(_declared_run(tmp_path / "damaged", 21.1112 * 1.024, 50, 800_000)),
                "--baseline",
                str(baseline),
            ]
        )
        == 1
    )
    assert (
        main(
            [
                "regress",
                str(_declared_run(tmp_path / "edge", 21.1112 * (1 + 2e-4), 50, 800_000)),
                "--baseline",
                str(baseline),
            ]
        )
        == 1
    )


def test_regress_writes_junit_for_unusable_input(tmp_path, capsys):
    """Exit 2 leaves a JUnit report with the reason (exit 3: tests/reporting/test_comparability.py)."""
    import xml.etree.ElementTree as ET

    baseline, junit = tmp_path / "b.json", tmp_path / "junit.xml"
    base = _declared_run(tmp_path / "base", 10.0, 50, 800_000)
    assert main(["regress", str(base), "--baseline", str(baseline), "--update-baseline"]) == 0
    assert main(["regress", str(tmp_path / "nothing-here"), "--baseline", str(baseline), "--junit", str(junit)]) == 2
    capsys.readouterr()
    negative = tmp_path / "negative.json"  # a tolerance the gate would refuse to read is refused before it is written
    assert main(["regress", str(base), "--baseline", str(negative), "--update-baseline", "--rel-tol", "-1"]) == 2
    assert capsys.readouterr().err.endswith("defaults rel_tol is -1.0: give a finite number >= 0\n")
    assert not negative.exists()
    suite = ET.parse(junit).getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("1", "0", "1")
    assert "nothing-here" in suite.find("testcase/error").get("message")


def test_regress_refuses_a_run_of_other_task_options_than_the_baselines(tmp_path, capsys):
    """The baseline keeps what each gated task measured with; a run whose LongPPL used other windows is another
    measurement: exit 3 naming the option and both values, before any metric; --allow-mismatch gates it anyway."""

    def run(folder: Path, trunc_len: int, longppl: float) -> Path:
        folder.mkdir()
        (folder / "results_1.json").write_text(
            json.dumps(
                {
                    "results": {"longppl_govreport": {"longppl,none": longppl}},
                    "higher_is_better": {"longppl_govreport": {"longppl": False}},
                    "configs": {
                        "longppl_govreport": {
                            "metadata": {
                                "lch_metric_roles": {"longppl": "perplexity"},
                                "lch_configuration": {"version": 1.0, "trunc_len": trunc_len, "data_files": "essays"},
                            }
                        }
                    },
                    "config": {"model": "hf-pic", "model_args": {"pretrained": "m"}},
                    "date": 1.0,
                }
            )
        )
        return folder

    baseline = tmp_path / "b.json"
    assert (
        main(["regress", str(run(tmp_path / "base", 4096, 10.0)), "--baseline", str(baseline), "--update-baseline"])
        == 0
    )
    assert json.loads(baseline.read_text())["tasks"] == {
        "longppl_govreport": {"version": 1.0, "trunc_len": 4096, "data_files": "essays"}
    }
    assert main(["regress", str(run(tmp_path / "same", 4096, 10.0)), "--baseline", str(baseline)]) == 0
    other = run(tmp_path / "other", 1024, 9.0)
    capsys.readouterr()
    assert main(["regress", str(other), "--baseline", str(baseline)]) == 3
    assert capsys.readouterr().err == (
        "lch: error: not comparable: task configuration longppl_govreport: trunc_len 4096 (baseline) vs 1024 (run) "
        "(compare runs of the same task options, or pass --allow-mismatch to compare them anyway)\n"
    )
    assert main(["regress", str(other), "--baseline", str(baseline), "--allow-mismatch"]) == 0  # 9 < 10: better
    # a baseline made before task configurations were kept compares none
    old = json.loads(baseline.read_text())
    del old["tasks"]
    baseline.write_text(json.dumps(old))
    assert main(["regress", str(other), "--baseline", str(baseline)]) == 0


def test_a_caution_every_run_shares_is_said_once():
    from harness.reporting.leaderboard import Leaderboard, to_markdown

    rows = [{"run": f"m · {v}", "t/score": "50.0"} for v in ("base model", "Naive PIC (s_cr 2)")]
    board = Leaderboard(
        ["run", "t/score"], rows, [], {r["run"]: ["t/score rests on 1 samples, fewer than 25: ..."] for r in rows}
    )
    assert to_markdown(board).splitlines()[-1] == "- t/score rests on 1 samples, fewer than 25: ... (every run)"


def test_a_correlation_with_a_constant_metric_says_it_is_undefined(tmp_path, capsys):
    """The Gemma 3 demo's long-context score was 66.7 for every variant: no correlation exists, and the report says
    why instead of a table of NaN (and scipy is not left to warn)."""
    import warnings

    for i, ppl in enumerate((20.0, 25.0, 30.0, 35.0, 40.0)):
        write_run(
            tmp_path / "runs" / f"r{i}",
            {"pretrained": f"m{i}"},
            float(i),
            {"lch_ruler": {"score,none": 66.7}, "ppl_govreport": {"ppl,none": ppl}},
            {"lch_ruler": {"score": True}, "ppl_govreport": {"ppl": False}},
        )
    out = tmp_path / "report"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert (
            main(
                [
                    "correlate",
                    str(tmp_path / "runs"),
                    "--x",
                    "ppl_govreport/ppl",
                    "--y",
                    "lch_ruler/score",
                    "-o",
                    str(out),
                ]
            )
            == 0
        )
        assert (
            main(
                [
                    "correlate",
                    str(tmp_path / "runs"),
                    "--matrix",
                    "ppl_govreport/ppl",
                    "lch_ruler/score",
                    "-o",
                    str(out),
                ]
            )
            == 0
        )
    stem = "lch_ruler_score_vs_ppl_govreport_ppl"
    assert "Not estimable: lch_ruler/score is 66.7 in all 5 runs." in (out / f"{stem}.md").read_text()
    saved = json.loads((out / f"{stem}.json").read_text())
    assert saved["undefined"] == "lch_ruler/score is 66.7 in all 5 runs" and saved["pearson"]["r"] is None
    assert "not estimable (lch_ruler/score is 66.7 in all 5 runs)" in capsys.readouterr().out
    assert "| ppl_govreport/ppl | 1.000 (0) | undefined (constant) |" in (out / "matrix.md").read_text()


def test_no_count_of_any_task_of_ours_is_gated(tmp_path, capsys):
    """Every metric our tasks report that is a count (declared in a YAML, added by a task class, or written by the
    judge stage) has the role bookkeeping, so lch regress leaves it alone: n_valid (judged samples) included."""
    from harness.metrics.catalogue import metric_role
    from harness.plugin.discovery import tasks_path
    from harness.tasks.longform import LongBenchWriteTask, LongGenerationTask

    names = set(LongGenerationTask.JUDGED_METRICS) | set(LongBenchWriteTask.JUDGED_METRICS)
    for path in Path(tasks_path()).rglob("*yaml"):
        text = path.read_text(encoding="utf-8")
        names |= {line.split("metric:")[1].strip() for line in text.splitlines() if "metric:" in line}
    counts = {"n_valid", "n_docs", "n_tokens", "n_key_tokens", "n_samples", "n_total", "n_len_1024", "n_len_4k"}
    assert {n for n in names if n.startswith("n_")} >= {"n_valid", "n_docs", "n_tokens"}
    for name in counts | {n for n in names if n.startswith("n_")}:
        assert metric_role(name) == "bookkeeping", name
    assert {metric_role(n) for n in ("quality", "score", "len_4096", "length_score", "em")} == {"score"}

    # a longbench_write run whose judge answered fewer samples (n_valid 4 -> 2) at the same quality: no regression
    def run(folder: Path, n_valid: int) -> Path:
        folder.mkdir()
        roles = {m: metric_role(m) for m in ("quality", "n_valid")}
        (folder / "results_1.json").write_text(
            json.dumps(
                {
                    "results": {"longbench_write": {"quality,none": 70.0, "n_valid,none": n_valid}},
                    "higher_is_better": {"longbench_write": {"quality": True, "n_valid": True}},
                    "configs": {"longbench_write": {"metadata": {"lch_metric_roles": roles}}},
                    "config": {},
                    "date": 1.0,
                }
            )
        )
        return folder

    baseline = tmp_path / "b.json"
    assert main(["regress", str(run(tmp_path / "a", 4)), "--baseline", str(baseline), "--update-baseline"]) == 0
    assert list(json.loads(baseline.read_text())["metrics"]) == ["longbench_write/quality"]
    assert main(["regress", str(run(tmp_path / "b", 2)), "--baseline", str(baseline)]) == 0


def test_leaderboard_markdown_puts_groups_and_perplexities_first_and_the_groups_tasks_a_section_away(tmp_path):
    """A run of the lch_ruler group (two tasks) and ppl_govreport: the Markdown's first table holds the group's
    effective lengths and score and the perplexity; the group's per-length score comes next, then the two tasks'
    metrics (their own curves' effective lengths too: the group's curve averages them), a row each; the CSV keeps
    every column."""
    results = {
        "lch_ruler": {"len_4096,none": 90.0, "score,none": 90.0},
        "lch_ruler_niah_single_1": {"len_4096,none": 100.0, "score,none": 100.0},
        "lch_ruler_vt": {"len_4096,none": 80.0, "score,none": 80.0},
        "ppl_govreport": {"ppl,none": 5.5},
    }
    path = write_run(tmp_path / "a", {"pretrained": "m"}, 100.0, results, DIRS)
    data = json.loads(path.read_text())
    data["group_subtasks"] = {"lch_ruler": ["lch_ruler_niah_single_1", "lch_ruler_vt"]}
    path.write_text(json.dumps(data))
    out = tmp_path / "board.csv"
    assert main(["leaderboard", str(tmp_path / "a"), "-o", str(out)]) == 0
    md = out.with_suffix(".md").read_text().splitlines()
    # vt's one length scores 80: below 85.6 (0), within 85 % of itself (4096)
    assert md == [
        "# Leaderboard",
        "",
        "| run | lch_ruler/effective_length | lch_ruler/effective_length_rel | lch_ruler/score | ppl_govreport/ppl |",
        "|---|---|---|---|---|",
        "| m · base model | 4096 | 4096 | 90 | 5.5 |",
        "",
        "## Scores per length",
        "",
        "The score of each curve above at each length (its effective lengths rest on them).",
        "",
        "| metric | m · base model |",
        "|---|---|",
        "| lch_ruler/len_4096 | 90 |",
        "",
        "## Tasks of the groups",
        "",
        "Each group's tasks, the group above (every column is in the CSV and HTML too).",
        "",
        "| metric | m · base model |",
        "|---|---|",
        "| lch_ruler_niah_single_1/effective_length | 4096 |",
        "| lch_ruler_niah_single_1/effective_length_rel | 4096 |",
        "| lch_ruler_niah_single_1/len_4096 | 100 |",
        "| lch_ruler_niah_single_1/score | 100 |",
        "| lch_ruler_vt/effective_length | 0 |",
        "| lch_ruler_vt/effective_length_rel | 4096 |",
        "| lch_ruler_vt/len_4096 | 80 |",
        "| lch_ruler_vt/score | 80 |",
    ]
    # the CSV: 6 fixed columns, 2 effective lengths for each of 3 curves, 7 metrics, the cautions
    assert len(read_csv(out)[0]) == 6 + 2 * 3 + 7 + 1


def test_leaderboard_depth_cells_are_a_section_of_their_own_and_a_recorded_caution_is_said_once(tmp_path):
    """A niah task with two depth cells at 1024: the headline holds its effective lengths, length and score; the
    cells come under "Depth x length"; the curve's caution, already recorded by the run, is listed once."""
    results = {
        "lch_ruler_niah_single_1": {
            "len_1024,none": 50.0,
            "len_2048,none": 100.0,
            "score,none": 75.0,
            "len_1024_stderr,none": 1.0,
            "len_2048_stderr,none": 1.0,
            "depth_0_len_1024,none": 100.0,
            "depth_100_len_1024,none": 0.0,
            "depth_25_len_1024,none": 50.0,
            "n_depth_0_len_1024,none": 1,
            "n_depth_25_len_1024,none": 2,
            "n_depth_100_len_1024,none": 3,
            "n_truncated,none": 0,
            "n_truncated_len_1024,none": 0,
            "n_truncated_len_2048,none": 0,
        }
    }
    path = write_run(
        tmp_path / "a",
        {"pretrained": "m"},
        100.0,
        results,
        {
            "lch_ruler_niah_single_1": {
                "len_1024": True,
                "len_2048": True,
                "score": True,
                "depth_0_len_1024": True,
                "depth_100_len_1024": True,
            }
        },
    )
    caution = (
        "lch_ruler_niah_single_1 effective length: not monotone: 2048 scores 100.0 above 1024's 50.0 beyond "
        "their 95 % intervals"
    )
    data = json.loads(path.read_text())
    data["lch_cautions"] = {"lch_ruler_niah_single_1": [caution]}  # as record_effective_lengths writes it
    counts = [
        "n_depth_0_len_1024",
        "n_depth_25_len_1024",
        "n_depth_100_len_1024",
        "n_truncated",
        "n_truncated_len_1024",
        "n_truncated_len_2048",
    ]
    data["configs"] = {
        "lch_ruler_niah_single_1": {
            "metadata": {
                "lch_metric_roles": {**{c: "bookkeeping" for c in counts}, "len_1024": "score", "len_2048": "score"}
            }
        }
    }
    path.write_text(json.dumps(data))
    out = tmp_path / "board.csv"
    assert main(["leaderboard", str(tmp_path / "a"), "-o", str(out)]) == 0
    md = out.with_suffix(".md").read_text().splitlines()
    assert md[:5] == [
        "# Leaderboard",
        "",
        "| run | lch_ruler_niah_single_1/effective_length | "
        "lch_ruler_niah_single_1/effective_length_rel | lch_ruler_niah_single_1/score |",
        "|---|---|---|---|",
        "| m · base model | 0 | 2048 | 75 |",
    ]
    assert md[6] == "## Scores per length" and md[10:14] == [
        "| metric | m · base model |",
        "|---|---|",
        "| lch_ruler_niah_single_1/len_1024 | 50 ± 1 |",
        "| lch_ruler_niah_single_1/len_2048 | 100 ± 1 |",
    ]
    # by depth as a number (25 before 100), each with its samples, a row each; the counts then not again among the
    # diagnostics, nor the per-length truncation counts that are 0 everywhere (n_truncated says it)
    assert md[15:26] == [
        "## Depth x length",
        "",
        "Each needle-depth bucket's score at each length, with the samples "
        "it averages (`lch plot depth` draws them as a heat map).",
        "",
        "| metric | m · base model |",
        "|---|---|",
        "| lch_ruler_niah_single_1/depth_0_len_1024 | 100 (n=1) |",
        "| lch_ruler_niah_single_1/depth_25_len_1024 | 50 (n=2) |",
        "| lch_ruler_niah_single_1/depth_100_len_1024 | 0 (n=3) |",
        "",
        "## Diagnostics",
    ]
    assert md[26:32] == [
        "",
        "What each run's numbers rest on (counts of documents, tokens and samples; not scores).",
        "",
        "| metric | m · base model |",
        "|---|---|",
        "| lch_ruler_niah_single_1/n_truncated | 0 |",
    ]
    assert len(read_csv(out)[0]) == 6 + 2 + 3 + 3 + 6 + 2 + 1  # every column in the CSV (stderrs of the two lengths)
    assert [line for line in md if "not monotone" in line] == [f"- {caution} (m · base model)"]


# The real demo's shape (harness/demo/real.py): 4 variants of one model; RULER niah_single_1 / _2 at 1024 and 2048
# tokens, BABILong qa1 at 1k and 2k, each task at one depth bucket per length, in a group that averages only `score`
# (so it has no curve of its own); LongPPL on essays. Every count our tasks declare bookkeeping is there.
DEMO_GROUP = "lch_demo_long_context"
DEMO_CURVES = {
    "lch_ruler_niah_single_1": ("1024", "2048"),
    "lch_ruler_niah_single_2": ("1024", "2048"),
    "lch_babilong_qa1": ("1k", "2k"),
}
DEMO_RUNS = [  # folder, model args, the variant our models record, each task's scores at its two lengths
    (
        "vanilla",
        {"pic": "none"},
        "base model",
        {
            "lch_ruler_niah_single_1": (100.0, 100.0),
            "lch_ruler_niah_single_2": (100.0, 100.0),
            "lch_babilong_qa1": (100.0, 0.0),
        },
    ),
    (
        "naive",
        {"pic": "naive", "pic_ratio": 2.0},
        "Naive PIC (s_cr 2)",
        {
            "lch_ruler_niah_single_1": (100.0, 0.0),
            "lch_ruler_niah_single_2": (100.0, 100.0),
            "lch_babilong_qa1": (0.0, 0.0),
        },
    ),
    (
        "ntk",
        {"pic": "ntk", "pic_ratio": 4.0},
        "NTK-aware PIC (s_rr 4)",
        {
            "lch_ruler_niah_single_1": (0.0, 0.0),
            "lch_ruler_niah_single_2": (100.0, 0.0),
            "lch_babilong_qa1": (100.0, 100.0),
        },
    ),
    (
        "dynamic",
        {"pic": "dynamic", "pic_ratio": 2.0},
        "Dynamic PIC (s_cr 2, l_ic 4, l_rc 200)",
        {
            "lch_ruler_niah_single_1": (50.0, 100.0),
            "lch_ruler_niah_single_2": (0.0, 0.0),
            "lch_babilong_qa1": (100.0, 100.0),
        },
    ),
]
TRUNCATION = ("n_truncated", "n_truncated_tokens", "n_skipped")


def demo_counts(task: str, i: int) -> dict[str, float]:
    """Run ``i``'s bookkeeping counts of ``task``: distinct numbers, so a value in the wrong cell shows. Only the
    naive run (1) cut prompts, at the longer length: the per-length truncation counts at the shorter one are 0 in
    every run."""
    if task == "longppl_govreport":
        return {
            "n_docs": 4,
            "n_tokens": 8192 - i,
            "n_key_tokens": 31 + i,
            "key_spans_dropped": 2 * i,
            "docs_without_key_tokens": 0,
            "docs_skipped": 0,
            "over_length": i % 2,
        }
    short, long = DEMO_CURVES[task]
    k = list(DEMO_CURVES).index(task)
    cut = 1 if i == 1 else 0
    return {
        f"n_len_{short}": 1,
        f"n_len_{long}": 1,
        "prompt_tokens": 1536.25 + 10 * k + i,
        "over_length": 0,
        "over_target": k,
        "n_truncated": cut,
        "n_truncated_tokens": (37 + k) * cut,
        "n_skipped": 0,
        **{f"{name}_len_{short}": 0 for name in TRUNCATION},
        f"n_truncated_len_{long}": cut,
        f"n_truncated_tokens_len_{long}": (37 + k) * cut,
        f"n_skipped_len_{long}": 0,
        f"n_depth_50_len_{short}": 1,
        f"n_depth_50_len_{long}": 1,
    }


def write_demo_runs(root: Path) -> list[Path]:
    """The 4 runs' folders under ``root``, as lm-eval and our tasks write them (metric roles declared)."""
    folders = []
    for i, (folder, pic_args, variant, scores) in enumerate(DEMO_RUNS):
        results, directions, configs = {}, {}, {}
        for task, (short, long) in DEMO_CURVES.items():
            low, high = scores[task]
            values = {
                f"len_{short}": low,
                f"len_{long}": high,
                "score": (low + high) / 2,
                f"depth_50_len_{short}": low,
                f"depth_50_len_{long}": high,
            }
            counts = demo_counts(task, i)
            results[task] = {f"{name},none": value for name, value in {**values, **counts}.items()}
            directions[task] = {name: True for name in values}
            configs[task] = {
                "metadata": {
                    "lch_metric_roles": {
                        **{name: "score" for name in values},
                        **{name: "bookkeeping" for name in counts},
                    }
                }
            }
        results[DEMO_GROUP] = {"score,none": sum(sum(s) / 2 for s in scores.values()) / 3}
        counts = demo_counts("longppl_govreport", i)
        results["longppl_govreport"] = {
            "longppl,none": 20.5 + i,
            "ppl_nobos,none": 6.25 + i,
            **{f"{name},none": value for name, value in counts.items()},
        }
        directions["longppl_govreport"] = {"longppl": False, "ppl_nobos": False}
        configs["longppl_govreport"] = {
            "metadata": {
                "lch_metric_roles": {
                    "longppl": "perplexity",
                    "ppl_nobos": "perplexity",
                    **{name: "bookkeeping" for name in counts},
                }
            }
        }
        path = write_run(
            root / folder,
            {"pretrained": "/models/SmolLM2-135M-Instruct", **pic_args},
            100.0 + i,
            results,
            directions,
            evaluated_as=variant,
        )
        data = json.loads(path.read_text())
        data["group_subtasks"] = {DEMO_GROUP: list(DEMO_CURVES)}
        data["configs"] = configs
        path.write_text(json.dumps(data))
        folders.append(root / folder)
    return folders


def markdown_tables(text: str) -> dict[str, list[list[str]]]:
    """Each table of a Markdown leaderboard by the heading of its section ("" for the headline): its lines of cells,
    the header line first."""
    tables: dict[str, list[list[str]]] = {}
    section = ""
    for line in text.splitlines():
        if line.startswith("## "):
            section = line[3:]
        elif line.startswith("|") and not line.startswith("|---"):
            tables.setdefault(section, []).append([cell.strip() for cell in line.strip("|").split(" | ")])
    return tables


DEMO_NAMES = [variant for _, _, variant, _ in DEMO_RUNS]  # the runs as the board names them (the model: its title)
# each curve's (effective_length, effective_length_rel) per run, read off DEMO_RUNS' scores by hand: RULER's bar is
# 85.6; the relative one 85 % of the shortest length's score (none when that is 0); 0 when not even the shortest
# length reaches the bar; BABILong's 1k / 2k are 1024 / 2048 tokens
DEMO_EFFECTIVE = {
    "lch_ruler_niah_single_1": [("2048", "2048"), ("1024", "1024"), ("0", "0"), ("0", "2048")],
    "lch_ruler_niah_single_2": [("2048", "2048"), ("2048", "2048"), ("1024", "1024"), ("0", "0")],
    "lch_babilong_qa1": [("1024", "1024"), ("0", "0"), ("2048", "2048"), ("2048", "2048")],
}


@pytest.mark.parametrize("demo_headline", [False, True])
def test_the_headline_holds_each_curves_effective_lengths_for_each_run(tmp_path, demo_headline):
    """Issue 55: the demo's Markdown headline had none of the six effective-length columns its CSV has. Its group
    averages only `score`, so its three tasks' curves are the ones the headline shows, whether the headline metrics
    are the board's own choice or the list the demo gives (harness/demo/real.py), and each effective length is in
    that table only."""
    from harness.reporting.leaderboard import leaderboard, write_leaderboard
    from harness.reporting.runs import load_runs

    runs, _ = load_runs(write_demo_runs(tmp_path / "runs"))
    headline = (
        [
            f"{DEMO_GROUP}/score",
            *(f"{task}/score" for task in DEMO_CURVES),
            "longppl_govreport/longppl",
            "longppl_govreport/ppl_nobos",
            "longppl_govreport/n_key_tokens",
        ]
        if demo_headline
        else None
    )
    csv_path, md_path, _ = write_leaderboard(leaderboard(runs), tmp_path / "board.csv", headline=headline)
    effective = [
        f"{task}/{name}" for task in sorted(DEMO_CURVES) for name in ("effective_length", "effective_length_rel")
    ]
    assert list(read_csv(csv_path)[0])[6:12] == effective  # the CSV's six, unchanged
    tables = markdown_tables(md_path.read_text())
    head, *lines = tables[""]
    assert head[1:7] == effective and [line[0] for line in lines] == DEMO_NAMES
    for task, expected in DEMO_EFFECTIVE.items():
        cells = [
            (line[head.index(f"{task}/effective_length")], line[head.index(f"{task}/effective_length_rel")])
            for line in lines
        ]
        assert cells == expected, task
    shown = [cell for table in tables.values() for line in table for cell in line]
    assert all(shown.count(column) == 1 for column in effective)
    if demo_headline:  # the demo's metrics after the effective lengths, in its order
        assert head[7:] == headline
    else:  # the board's own: the group's score and the perplexities; the tasks' scores a section below
        assert head[7:] == [f"{DEMO_GROUP}/score", "longppl_govreport/longppl", "longppl_govreport/ppl_nobos"]
        assert [line[0] for line in tables["Tasks of the groups"][1:]] == [f"{t}/score" for t in sorted(DEMO_CURVES)]


def test_the_diagnostics_of_four_runs_are_a_row_per_metric_with_each_value_in_its_cell(tmp_path):
    """Issue 55: the demo's diagnostics table was 37 columns wide on 4 runs. Now a row per metric and a column per
    run: 37 rows (10 per task, 7 of LongPPL), 5 columns, each value where it belongs; the per-length truncation counts
    that are 0 in every run and the depth cells' counts (beside their cells) are left out, as before."""
    out = tmp_path / "board.csv"
    assert main(["leaderboard", *map(str, write_demo_runs(tmp_path / "runs")), "-o", str(out)]) == 0
    text = out.with_suffix(".md").read_text()
    tables = markdown_tables(text)
    assert all(len(line) <= len(DEMO_RUNS) + 3 for title, table in tables.items() if title for line in table)
    head, *lines = tables["Diagnostics"]
    assert head == ["metric", *DEMO_NAMES]
    rows = {line[0]: line[1:] for line in lines}
    assert len(rows) == len(lines) == 37
    # prompt_tokens is a mean (1536.25 + 10 per task + 1 per run) to 4 significant digits; the rest are counts
    expected = {
        "lch_ruler_niah_single_1/prompt_tokens": ["1536", "1537", "1538", "1539"],
        "lch_ruler_niah_single_2/prompt_tokens": ["1546", "1547", "1548", "1549"],
        "lch_babilong_qa1/prompt_tokens": ["1556", "1557", "1558", "1559"],
        "longppl_govreport/n_docs": ["4", "4", "4", "4"],
        "longppl_govreport/n_tokens": ["8192", "8191", "8190", "8189"],
        "longppl_govreport/n_key_tokens": ["31", "32", "33", "34"],
        "longppl_govreport/key_spans_dropped": ["0", "2", "4", "6"],
        "longppl_govreport/docs_without_key_tokens": ["0", "0", "0", "0"],
        "longppl_govreport/docs_skipped": ["0", "0", "0", "0"],
        "longppl_govreport/over_length": ["0", "1", "0", "1"],
    }
    for k, (task, (short, long)) in enumerate(DEMO_CURVES.items()):  # only the naive run (the 2nd) cut prompts
        expected.update(
            {
                f"{task}/n_len_{short}": ["1"] * 4,
                f"{task}/n_len_{long}": ["1"] * 4,
                f"{task}/over_length": ["0"] * 4,
                f"{task}/over_target": [str(k)] * 4,
                f"{task}/n_truncated": ["0", "1", "0", "0"],
                f"{task}/n_skipped": ["0"] * 4,
                f"{task}/n_truncated_tokens": ["0", str(37 + k), "0", "0"],
                f"{task}/n_truncated_len_{long}": ["0", "1", "0", "0"],
                f"{task}/n_truncated_tokens_len_{long}": ["0", str(37 + k), "0", "0"],
            }
        )
    assert rows == expected
    for task, (short, long) in DEMO_CURVES.items():  # left out: 0 in every run, or beside their depth cells
        for gone in [
            *(f"{name}_len_{short}" for name in TRUNCATION),
            f"n_skipped_len_{long}",
            f"n_depth_50_len_{short}",
            f"n_depth_50_len_{long}",
        ]:
            assert f"| {task}/{gone} |" not in text


def test_no_markdown_table_grows_wider_with_the_lengths_or_the_metrics(tmp_path):
    """The same two runs of one RULER task at 2 and at 6 lengths (each length with its score, depth cell and
    counts): every Markdown table has the same width at both; only the sections' rows grow."""
    widths = []
    for lengths in ((1024, 2048), (1024, 2048, 4096, 8192, 16384, 32768)):
        counts = {
            **{f"n_len_{n}": 4 for n in lengths},
            **{f"n_depth_0_len_{n}": 4 for n in lengths},
            **{f"n_truncated_len_{n}": 1 for n in lengths},
            "n_truncated": len(lengths),
        }
        scores = {
            **{f"len_{n}": 100.0 for n in lengths},
            **{f"depth_0_len_{n}": 100.0 for n in lengths},
            "score": 100.0,
        }
        for name, pic in (("vanilla", {}), ("ntk", {"pic": "ntk", "pic_ratio": 4.0})):
            path = write_run(
                tmp_path / str(len(lengths)) / name,
                {"pretrained": "m", **pic},
                1.0,
                {
                    "lch_ruler_niah_single_1": {f"{k},none": v for k, v in {**scores, **counts}.items()},
                    "ppl_govreport": {"ppl,none": 5.0},
                },
                {"lch_ruler_niah_single_1": {"score": True}},
            )
            data = json.loads(path.read_text())
            data["configs"] = {
                "lch_ruler_niah_single_1": {
                    "metadata": {
                        "lch_metric_roles": {**{k: "score" for k in scores}, **{k: "bookkeeping" for k in counts}}
                    }
                }
            }
            path.write_text(json.dumps(data))
        out = tmp_path / f"board{len(lengths)}.csv"
        assert main(["leaderboard", str(tmp_path / str(len(lengths))), "-o", str(out)]) == 0
        tables = markdown_tables(out.with_suffix(".md").read_text())
        widths.append({title: {len(line) for line in table} for title, table in tables.items()})
        assert len(tables["Scores per length"]) == 1 + len(lengths)  # a row per length
    assert list(widths[0]) == ["", "Scores per length", "Depth x length", "Diagnostics"]
    assert widths[0] == widths[1] == {"": {5}, "Scores per length": {3}, "Depth x length": {3}, "Diagnostics": {3}}


def test_leaderboard_cost_columns_sum_each_runs_recorded_cost(tmp_path):
    """``--cost``: a run's recorded cost summed over its tasks (tokens 1000 + 3000 prompt, 50 generated; rate
    (4000 + 50) / (2 + 7) s = 450 tok/s), its wall time, device and peak memory (3 GiB), and the judge's requests and
    tokens (120 + 30); a run that recorded none has empty cells, never zeros. The Markdown says them as a person reads
    them in a section of their own."""
    cost = {
        "wall_seconds": 725.0,
        "device": "cuda:0",
        "device_name": "NVIDIA H100 80GB HBM3",
        "peak_memory": {"bytes": 3 * 2**30, "what": "CUDA memory torch allocated in this process"},
        "processes": 1,
        "judge": {"requests": 2, "prompt_tokens": 120, "completion_tokens": 30},
        "tasks": {
            "ppl_govreport": {
                "requests": 3,
                "prompt_tokens": 1000,
                "generated_tokens": 0,
                "scored_tokens": 997,
                "seconds": 2.0,
                "tokens_per_second": 500.0,
            },
            "lch_ruler": {
                "requests": 2,
                "prompt_tokens": 3000,
                "generated_tokens": 50,
                "scored_tokens": 0,
                "seconds": 7.0,
                "tokens_per_second": 3050 / 7,
            },
        },
    }
    first = write_run(tmp_path / "a", {"pretrained": "m"}, 100.0, {"ppl_govreport": {"ppl,none": 6.0}}, DIRS)
    data = json.loads(first.read_text())
    data["lch_cost"] = cost
    first.write_text(json.dumps(data))
    write_run(
        tmp_path / "b",
        {"pretrained": "m", "pic": "naive", "pic_ratio": 2},
        200.0,
        {"ppl_govreport": {"ppl,none": 7.0}},
        DIRS,
    )
    out = tmp_path / "board.csv"
    assert main(["leaderboard", str(tmp_path / "a"), str(tmp_path / "b"), "-o", str(out), "--cost"]) == 0
    rows = {r["model_args"]: r for r in read_csv(out)}
    costed, bare = rows['{"pretrained": "m"}'], rows['{"pic": "naive", "pic_ratio": 2, "pretrained": "m"}']
    assert {
        k: costed[k]
        for k in (
            "wall_seconds",
            "device_name",
            "peak_memory_gib",
            "prompt_tokens",
            "generated_tokens",
            "scored_tokens",
            "tokens_per_second",
            "judge_requests",
            "judge_tokens",
        )
    } == {
        "wall_seconds": "725.0",
        "device_name": "NVIDIA H100 80GB HBM3",
        "peak_memory_gib": "3.0",
        "prompt_tokens": "4000",
        "generated_tokens": "50",
        "scored_tokens": "997",
        "tokens_per_second": "450.0",
        "judge_requests": "2",
        "judge_tokens": "150",
    }
    assert all(bare[k] == "" for k in ("wall_seconds", "device_name", "prompt_tokens", "judge_tokens"))
    table = markdown_tables(out.with_suffix(".md").read_text())["Cost"]
    assert table[0][1:] == [
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
    assert table[1][1:] == ["12 min 5 s", "NVIDIA H100 80GB HBM3", "3", "4,000", "50", "997", "450", "2", "150"]
    # without --cost the board is as it was
    assert main(["leaderboard", str(tmp_path / "a"), "-o", str(tmp_path / "plain.csv")]) == 0
    assert "wall_seconds" not in read_csv(tmp_path / "plain.csv")[0]
