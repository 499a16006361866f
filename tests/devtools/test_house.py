"""``python -m harness.devtools.house``: the counts of a refactor's before / after table, on a package written here."""

from __future__ import annotations

from harness.devtools.house import count

SOURCE = '''"""A module.

Its docstring is three lines."""

import lm_eval.api.task
from lm_eval.tasks._index import TaskIndex

_cache = {}
NAMES = ["a"]


def f(x):
    """One line."""
    # a comment alone
    global _flag
    return x + 1  # a comment after code
'''


def test_code_docstrings_comments_lm_eval_imports_and_globals_are_counted_by_hand(tmp_path):
    (tmp_path / "harness" / "tasks").mkdir(parents=True)
    (tmp_path / "harness" / "tasks" / "a.py").write_text(SOURCE)
    (tmp_path / "harness" / "b.py").write_text("x = 1\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "ARCHITECTURE.md").write_text("# map\n\nline\n")
    counts = count(tmp_path)
    # code: the two imports, _cache, NAMES, def, global, return; and b.py's one line
    assert (counts.files, counts.code, counts.docstrings, counts.comments) == (2, 8, 4, 1)
    assert counts.lm_eval_files == ["harness/tasks/a.py"] and counts.lm_eval_folders == ["tasks"]
    assert counts.private_lm_eval_imports == ["harness/tasks/a.py: lm_eval.tasks._index.TaskIndex"]
    assert counts.process_globals == ["harness/tasks/a.py: global _flag", "harness/tasks/a.py: _cache"]
    assert counts.architecture_lines == 3
