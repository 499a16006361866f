"""Group curves at every length a run uses (harness/plugin/finish_results.py: record_group_aggregates): the group YAMLs
name ``score`` only, and each group of our tasks gets ``len_<L>`` and the depth cells of whatever lengths its tasks
report, whatever their spelling. A scripted model answers the needle of every other sample, so the scores are a mix of
0 and 100; each group value is worked out here from the logged samples: the unweighted mean of the tasks' means,
with lm-eval's stderr of such a mean, sqrt(sum of the tasks' squared stderrs) / tasks."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest

from tests.scripted_lm import ScriptedLM

NIAH_M = [
    "lch_ruler_niah_multikey_1",
    "lch_ruler_niah_multikey_2",
    "lch_ruler_niah_multikey_3",
    "lch_ruler_niah_multivalue",
    "lch_ruler_niah_multiquery",
]
BABILONG = [f"lch_babilong_qa{i}" for i in range(1, 6)]


def answer(doc: dict) -> str:
    """Right on even samples (every needle value, or the fact's answer), silent on odd ones."""
    if doc["index"] % 2:
        return ""
    return " ".join(doc["outputs"]) if "outputs" in doc else f"The answer is {doc['target']}."


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def run(model_dir, tokenizer, group: str, lengths: list, num_samples: int) -> dict:
    from lm_eval import simple_evaluate

    from harness.plugin.in_process import task_manager

    metadata = {
        "pretrained": str(model_dir),
        "lengths": lengths,
        "num_samples": num_samples,
        "essays": "synthetic",
        "source": "synthetic",
        "seed": 5,
    }
    return simple_evaluate(
        model=ScriptedLM(tokenizer, answer),
        tasks=[group],
        log_samples=True,
        task_manager=task_manager(metadata=metadata, ours_only=True),
    )


def by_hand(out: dict, tasks: list[str], metric: str) -> tuple[float, float | None, int]:
    """The group's value of ``metric``, its stderr and the samples it rests on, from the logged samples."""
    means, stderrs, n = [], [], 0
    for task in tasks:
        values = [s[metric] for s in out["samples"][task] if metric in s]
        if values:
            means.append(statistics.fmean(values))
            stderrs.append(statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None)
            n += len(values)
    stderr = None if None in stderrs else math.sqrt(sum(e * e for e in stderrs)) / len(stderrs)
    return statistics.fmean(means), stderr, n


def test_a_group_at_a_length_no_yaml_lists_has_its_curve_and_depth_cells(tiny_model_dir, tokenizer):
    out = run(tiny_model_dir, tokenizer, "lch_ruler_niah_m", [1536], 4)
    group = out["groups"]["lch_ruler_niah_m"]
    value, stderr, n = by_hand(out, NIAH_M, "len_1536")
    assert 0 < value < 100  # right on some samples only: a real mean
    assert group["len_1536,none"] == pytest.approx(value) and group["len_1536_stderr,none"] == pytest.approx(stderr)
    assert group["sample_count"]["len_1536,none"] == n == 20
    assert out["results"]["lch_ruler_niah_m"]["len_1536,none"] == group["len_1536,none"]
    cells = {
        key.partition(",")[0]
        for task in NIAH_M
        for key in out["results"][task]
        if key.startswith("depth_") and "_stderr," not in key
    }
    assert cells and all(key.endswith("_len_1536") for key in cells)
    for cell in cells:
        expected, _, count = by_hand(out, NIAH_M, cell)
        assert group[f"{cell},none"] == pytest.approx(expected) and group["sample_count"][f"{cell},none"] == count
    effective = out["lch_effective_length"]["lch_ruler_niah_m"]["absolute"]
    assert list(effective["lengths"]) == ["1536"] and list(effective["n"]) == [
        20
    ]  # the group's own curve, at its one length
    assert out["results"]["lch_ruler_niah_multikey_1"]["len_1536_stderr,none"] == pytest.approx(
        by_hand(out, NIAH_M[:1], "len_1536")[1]
    )  # a task's mean keeps lm-eval's stderr


@pytest.mark.parametrize(
    "group, tasks, spellings, metric",
    [
        ("lch_ruler_niah_m", NIAH_M, (["1k"], [1024]), "len_1024"),  # RULER names lengths by their tokens
        ("lch_babilong", BABILONG, (["3k"], [3072]), "len_3k"),  # BABILong by k-labels; 3k is in no YAML
    ],
)
def test_a_length_spelled_either_way_reaches_the_same_group_metric(
    tiny_model_dir, tokenizer, group, tasks, spellings, metric
):
    runs = [run(tiny_model_dir, tokenizer, group, lengths, 2) for lengths in spellings]
    for out in runs:
        value, stderr, _ = by_hand(out, tasks, metric)
        assert out["groups"][group][f"{metric},none"] == pytest.approx(value)
        assert out["groups"][group][f"{metric}_stderr,none"] == pytest.approx(stderr)
    assert runs[0]["groups"][group][f"{metric},none"] == runs[1]["groups"][group][f"{metric},none"]


def test_a_group_of_tasks_that_spell_lengths_differently_has_one_curve(tiny_model_dir, tokenizer, tmp_path):
    """A user's group of a RULER task (``len_1024``) and a BABILong task (``len_1k``), as ``lch demo`` writes one: the
    group's ``len_1024`` averages both tasks (one length, two spellings), with no ``len_1k`` beside it. Run with hf-pic
    (a group from another folder is a run of ours through our model)."""
    from lm_eval import simple_evaluate

    from harness.plugin.in_process import task_manager

    tasks = ["lch_ruler_niah_single_1", "lch_babilong_qa1"]
    (tmp_path / "mixed.yaml").write_text(
        "group: mixed\ntask:\n"
        + "".join(f"  - {t}\n" for t in tasks)
        + "aggregate_metric_list:\n  - metric: score\n    weight_by_size: false\n"
    )
    metadata = {
        "pretrained": str(tiny_model_dir),
        "lengths": ["1k"],
        "num_samples": 4,
        "essays": "synthetic",
        "source": "synthetic",
        "seed": 5,
    }
    out = simple_evaluate(
        model="hf-pic",
        model_args={"pretrained": str(tiny_model_dir), "dtype": "float32"},
        tasks=["mixed"],
        log_samples=True,
        device="cpu",
        batch_size=4,
        gen_kwargs={"max_gen_toks": 4},
        task_manager=task_manager([str(tmp_path)], metadata=metadata, ours_only=True),
    )
    group = out["groups"]["mixed"]
    ruler, babilong = (
        statistics.fmean(s[metric] for s in out["samples"][task]) for task, metric in zip(tasks, ("len_1024", "len_1k"))
    )
    assert group["len_1024,none"] == pytest.approx((ruler + babilong) / 2)
    assert "len_1k,none" not in group and group["sample_count"]["len_1024,none"] == 8


def test_a_group_of_ours_is_aggregated_by_the_weighting_its_yaml_declares(tmp_path):
    """lch_ruler_niah_m's YAML declares weight_by_size false: its score is the plain mean of its tasks' even where
    lm-eval's own group value is the size-weighted one; a group of another folder, by what its YAML declares (read
    from the run's task index: weighted, lm-eval's default); one whose declaration the run does not have is left as
    lm-eval made it. Nothing is inferred from the numbers."""
    from lm_eval.tasks._index import TaskIndex

    from harness.plugin.discovery import group_weighting, tasks_path
    from harness.plugin.finish_results import record_group_aggregates

    (tmp_path / "mine.yaml").write_text(
        "group: my_niah_group\ntask:\n  - lch_ruler_niah_multikey_1\n"
        "  - lch_ruler_niah_multikey_2\naggregate_metric_list:\n  - metric: score\n"
    )
    manager = type("Manager", (), {"task_index": TaskIndex.build([Path(tasks_path()), tmp_path])})()
    groups = ["lch_ruler_niah_m", "my_niah_group", "outer::my_niah_group"]  # the 0.5 line names a group outer::inner
    weighting = group_weighting(groups, manager)
    assert weighting == {"lch_ruler_niah_m": False, "my_niah_group": True, "outer::my_niah_group": True}
    ours_only = group_weighting(groups)
    assert ours_only == {"lch_ruler_niah_m": False}

    def results(group: str) -> dict:
        tasks = {"lch_ruler_niah_multikey_1": (40.0, 1), "lch_ruler_niah_multikey_2": (100.0, 3)}
        weighted = (40.0 * 1 + 100.0 * 3) / 4  # 85.0; the plain mean is 70.0
        return {
            "results": {
                **{t: {"score,none": v, "score_stderr,none": 10.0, "sample_len": n} for t, (v, n) in tasks.items()},
                group: {"score,none": weighted, "score_stderr,none": "N/A"},
            },
            "group_subtasks": {group: list(tasks)},
            "configs": {t: {"metadata": {"lch_configuration": {}}} for t in tasks},
        }

    ours, theirs, unknown = results("lch_ruler_niah_m"), results("my_niah_group"), results("my_niah_group")
    record_group_aggregates(ours, weighting)
    record_group_aggregates(theirs, weighting)
    record_group_aggregates(unknown, ours_only)
    assert ours["results"]["lch_ruler_niah_m"]["score,none"] == 70.0
    assert ours["results"]["lch_ruler_niah_m"]["score_stderr,none"] == pytest.approx(math.sqrt(200.0) / 2)
    assert ours["lch_group_weighting"] == {"lch_ruler_niah_m": False}
    assert theirs["results"]["my_niah_group"]["score,none"] == 85.0
    # weighted by size: the pooled variance over (1 - 1) * 1 + (3 - 1) * 3 of 4 - 2 degrees, sqrt(600 / 2 / 4)
    assert theirs["results"]["my_niah_group"]["score_stderr,none"] == pytest.approx(math.sqrt(75.0))
    assert theirs["lch_group_weighting"] == {"my_niah_group": True}
    assert unknown["results"]["my_niah_group"] == {"score,none": 85.0, "score_stderr,none": "N/A"}
    assert "lch_group_weighting" not in unknown
