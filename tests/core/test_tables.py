"""harness.core.tables, the one table writer of the reports, against tables written out by hand."""

from __future__ import annotations

import csv
import io

from harness.core.tables import aligned, csv_text, html_table, markdown


def test_markdown_rules_right_aligned_columns_and_escapes_the_bar():
    assert markdown(["run", "n", "score"], [["a | b", 4, "12.5"], ["c", 10, ""]], right=(1,)) == [
        "| run | n | score |",
        "|---|---:|---|",
        "| a \\| b | 4 | 12.5 |",
        "| c | 10 |  |",
    ]
    assert markdown(["only"], []) == ["| only |", "|---|"]


def test_aligned_text_pads_to_the_widest_cell_and_drops_trailing_spaces():
    rows = [["task", "samples", "fits"], ["ppl_govreport", "1,024", "yes"], ["total", "7", ""]]
    assert aligned(rows, right=(1,)) == [
        "task           samples  fits",
        "ppl_govreport    1,024  yes",
        "total                7",
    ]


def test_csv_quotes_what_needs_it_and_reads_back():
    text = csv_text(["variant", "step", "t/score"], [["dyn, r=2", 100, 0.5], {"variant": 'say "x"', "step": 200}])
    assert text == 'variant,step,t/score\n"dyn, r=2",100,0.5\n"say ""x""",200,\n'
    assert list(csv.reader(io.StringIO(text)))[1] == ["dyn, r=2", "100", "0.5"]


def test_html_escapes_text_and_attribute_values():
    table = html_table(["a<b", "n"], [["x & y", ("1", {"data-v": "1.0000001", "title": "it's"})]])
    assert table == (
        "<table><thead><tr><th>a&lt;b</th><th>n</th></tr></thead><tbody><tr><td>x &amp; y</td>"
        "<td data-v='1.0000001' title='it&#x27;s'>1</td></tr></tbody></table>"
    )
