"""Installing lch-harness changes nothing for programs and lm-eval runs that use none of it: each case runs in fresh
interpreters twice, with the start-up activation (README's install) and switched off (``LCH_LM_EVAL_PLUGIN=0``, which
is stock lm-eval in the same environment), and the two must behave alike: same exit code, same output, same
results. The cases: a user's own package named ``harness``; a user's tasks whose names start like ours
(``ppl_...``, ``lch_...``, ``longppl_...``; a quoted name, an inline comment) given by ``--include_path`` or by a
relative YAML path; a typo of one of lm-eval's own tasks."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core import results as result_keys

BIN = Path(sys.executable).parent
STAMP = re.compile(r"^\d{4}-\d\d-\d\d:\d\d:\d\d:\d\d(,\d+)? ", re.M)  # lm-eval's log-line time stamps
FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line \d+', re.M)  # a traceback frame


def _our_files() -> tuple[Path, ...]:
    """The files that are ours: the package folder and the start-up activation module."""
    import harness
    import lch_harness_lm_eval

    return (Path(harness.__file__).resolve().parent, Path(lch_harness_lm_eval.__file__).resolve())


def ours_speaks(stderr: str) -> list[str]:
    """What of ours ``stderr`` holds: our lines (``lch: ...``) and traceback frames in our files, never a substring
    that any path (a checkout named ``lch-harness``, a virtual environment under it) may hold."""
    lines = [line for line in stderr.splitlines() if line.startswith("lch:")]
    for match in FRAME.finditer(stderr):
        path = Path(match["path"]).resolve()
        if any(path == mine or mine in path.parents for mine in _our_files()):
            lines.append(match[0].strip())
    return lines


def _keys(value: object) -> set[str]:
    if isinstance(value, dict):
        return {str(k) for k in value} | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


def _twice(args: list[str], cwd: Path, env: dict | None = None) -> tuple[subprocess.CompletedProcess, ...]:
    """``args`` with the activation on, then switched off."""
    runs = []
    for switch in ("1", "0"):
        runs.append(
            subprocess.run(
                args,
                cwd=cwd,
                capture_output=True,
                text=True,
                timeout=300,
                env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {}), "LCH_LM_EVAL_PLUGIN": switch},
            )
        )
    return tuple(runs)


def _alike(on: subprocess.CompletedProcess, off: subprocess.CompletedProcess) -> None:
    assert on.returncode == off.returncode, (on.stderr[-2000:], off.stderr[-2000:])
    assert on.stdout == off.stdout
    assert STAMP.sub("", on.stderr) == STAMP.sub("", off.stderr)
    assert ours_speaks(on.stderr) == []  # nothing of ours speaks


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A user's project: a package ``harness`` of its own, task YAMLs named like ours, a local data file."""
    root = tmp_path_factory.mktemp("user-project")
    (root / "harness").mkdir()
    (root / "harness" / "__init__.py").write_text("OWNER = 'the user'\n")
    data = root / "data.jsonl"
    data.write_text(
        "".join(json.dumps({"text": f"The committee met on day {i} and reviewed the budget."}) + "\n" for i in range(4))
    )
    body = (
        f"dataset_path: json\ndataset_kwargs:\n  data_files: {data}\ntest_split: train\n"
        "output_type: loglikelihood_rolling\ndoc_to_text: ''\ndoc_to_target: '{{text}}'\n"
        "metric_list:\n  - metric: word_perplexity\nmetadata:\n  version: 1.0\n"
    )
    (root / "tasks").mkdir()
    (root / "tasks" / "ppl_local.yaml").write_text('task: "ppl_local"  # named like ours\n' + body)
    (root / "tasks" / "lch_mine.yaml").write_text("task: lch_mine\n" + body)
    (root / "longppl_mine.yaml").write_text("task: longppl_mine\n" + body)  # given by its path
    return root


def test_a_users_own_harness_package_is_the_one_imported(project):
    code = (
        "import lm_eval.models, lm_eval.tasks.manager, lm_eval.evaluator, harness; "
        "print(harness.OWNER, sorted(m for m in sys.modules if m.startswith('harness')))"
    )
    on, off = _twice([sys.executable, "-c", "import sys; " + code], project)
    _alike(on, off)
    assert on.stdout.strip() == "the user ['harness']"


def test_a_users_tasks_named_like_ours_and_a_yaml_path_run_as_in_stock_lm_eval(project):
    """``lm_eval validate`` and a run of lm-eval's ``dummy`` model over them: the same output and the same results
    file, but for its time stamps and timings."""
    on, off = _twice(
        [str(BIN / "lm_eval"), "validate", "--tasks", "ppl_local,lch_mine", "--include_path", "tasks"], project
    )
    _alike(on, off)
    assert on.returncode == 0 and "All tasks found and valid" in on.stdout
    results = []
    for switch in ("1", "0"):
        out = project / f"out-{switch}"
        done = subprocess.run(
            [
                str(BIN / "lm_eval"),
                "run",
                "--model",
                "dummy",
                "--tasks",
                "ppl_local,lch_mine,longppl_mine.yaml",
                "--include_path",
                "tasks",
                "--output_path",
                str(out),
            ],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "LCH_LM_EVAL_PLUGIN": switch},
        )
        assert done.returncode == 0, done.stderr[-2000:]
        (path,) = out.rglob("results_*.json")
        data = json.loads(path.read_text())
        results.append(
            {
                key: data[key]
                for key in (
                    "results",
                    "configs",
                    "versions",
                    "n-shot",
                    "higher_is_better",
                    "n-samples",
                    "config",
                    "git_hash",
                )
            }
        )
        ours = {v for k, v in vars(result_keys).items() if k.isupper() and isinstance(v, str)}
        assert ours and not _keys(data) & ours  # no key of ours
    assert results[0] == results[1]
    assert set(results[0]["results"]) == {"ppl_local", "lch_mine", "longppl_mine"}


def test_a_typo_of_an_lm_eval_task_is_lm_evals_error(project):
    """No "did you mean" of ours, no exit 2: lm-eval's "Tasks not found" and its exit code 1, traceback frames alike."""
    on, off = _twice([str(BIN / "lm_eval"), "run", "--model", "dummy", "--tasks", "longbench_hotpotq"], project)
    _alike(on, off)
    assert on.returncode == 1 and on.stderr.strip().splitlines()[-1] == "ValueError: Tasks not found: longbench_hotpotq"
    assert FRAME.search(on.stderr) and ours_speaks(on.stderr) == []  # lm-eval's frames, none of ours
