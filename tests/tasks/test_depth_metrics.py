"""Depth x length metrics of the RULER niah and synthetic BABILong tasks (harness/tasks/depth.py): what a document at
a known depth and length scores, what the tasks declare, and that tasks without depths declare none. The task
objects are made without lm-eval's constructor (its dataset would be built): only the attributes scoring reads."""

from __future__ import annotations

from harness.data.depth import DEPTH_BUCKETS
from harness.metrics.catalogue import metric_info, metric_role
from harness.tasks.lch_babilong.dataset import BabilongOptions
from harness.tasks.lch_babilong.task import BabilongTask
from harness.tasks.lch_ruler.dataset import TASKS, RulerOptions
from harness.tasks.lch_ruler.task import RulerTask
from harness.tasks.metric_lists import described


def _ruler(name: str, lengths=(1024, 2048)) -> RulerTask:
    task = object.__new__(RulerTask)
    task.spec, task.options = TASKS[name], RulerOptions(ruler_task=name, lengths=lengths)
    return task


def _babilong(source: str) -> BabilongTask:
    task = object.__new__(BabilongTask)
    task.options = BabilongOptions(babilong_task="qa1", lengths=("1k", "2k"), source=source)
    return task


def _declared(task) -> dict:
    return {m["metric"]: m for m in described(task.extra_metrics({}), "t")}


def test_a_niah_document_scores_its_depth_cell():
    task = _ruler("niah_single_1")
    doc = {"length": 2048, "outputs": ["1234567"], "depth": 41.0, "depth_bucket": 50}
    assert task.score_document(doc, ["It is 1234567."]) == {
        "score": 100.0,
        "len_2048": 100.0,
        "n_len_2048": 1,
        "depth_50_len_2048": 100.0,
        "n_depth_50_len_2048": 1,
    }
    assert task.score_document({**doc, "depth": 100.0, "depth_bucket": 100}, ["no idea"]) == {
        "score": 0.0,
        "len_2048": 0.0,
        "n_len_2048": 1,
        "depth_100_len_2048": 0.0,
        "n_depth_100_len_2048": 1,
    }
    multi = _ruler("niah_multivalue")  # the mean over its answers, x 100, as len_<L>
    doc = {"length": 1024, "outputs": ["1", "2", "3", "4"], "depth": 12.5, "depth_bucket": 25}
    assert multi.score_document(doc, ["1 and 2"])["depth_25_len_1024"] == 50.0


def test_niah_tasks_declare_every_cell_once_and_the_catalogue_knows_them():
    declared = _declared(_ruler("niah_single_1"))
    cells = [f"depth_{b}_len_{n}" for n in (1024, 2048) for b in DEPTH_BUCKETS]
    assert len(cells) == 10 and set(cells) | {f"n_{c}" for c in cells} <= set(declared)
    assert all(declared[c]["higher_is_better"] and metric_role(c) == "score" for c in cells)
    assert all(metric_role(f"n_{c}") == "bookkeeping" for c in cells)
    assert declared["n_depth_0_len_1024"]["aggregation"].__name__ == "total"
    assert declared["depth_0_len_1024"]["aggregation"] is declared["len_1024"]["aggregation"]  # lm-eval's mean
    assert "depth_" in metric_info("depth_75_len_4k").meaning
    # a cell is a breakdown of its length: no caution of its own (its n is printed beside it), the length keeps one
    support = {s.metric: s.count for s in _ruler("niah_single_1").support(list(declared))}
    assert not [m for m in support if m.startswith("depth_")] and support["len_2048"] == "n_len_2048"


def test_tasks_without_depths_declare_and_score_none():
    vt = _ruler("vt")
    assert not [m for m in _declared(vt) if "depth_" in m]
    doc = {"length": 1024, "outputs": ["A"]}
    assert vt.score_document(doc, ["A"]) == {"score": 100.0, "len_1024": 100.0, "n_len_1024": 1}
    # BABILong: its synthetic rows record the answer fact's depth, HF and local rows do not
    assert "depth_0_len_1k" in _declared(_babilong("synthetic"))
    assert not [m for m in _declared(_babilong("hf")) if "depth_" in m]
    doc = {
        "length": "2k",
        "target": "garden",
        "question": "Where is Mary?",
        "task": "qa1",
        "depth": 80.0,
        "depth_bucket": 75,
    }
    assert _babilong("synthetic").score_document(doc, ["The answer is garden."]) == {
        "score": 100.0,
        "len_2k": 100.0,
        "n_len_2k": 1,
        "depth_75_len_2k": 100.0,
        "n_depth_75_len_2k": 1,
    }
    assert "depth_75_len_2k" not in _babilong("hf").score_document(doc, ["garden"])
