"""The metric catalogue (harness/metrics/catalogue.py): every metric our tasks report is declared there once, and a
task's metric list takes its direction from it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.metrics.catalogue import metric_info, metric_role

TASKS = Path(__file__).resolve().parents[2] / "harness" / "tasks"


def _yaml_metrics() -> set[str]:
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: f"!{suffix}")
    names = set()
    for path in TASKS.rglob("*yaml"):
        config = yaml.load(path.read_text(encoding="utf-8"), Loader=Loader) or {}
        names |= {m["metric"] for m in config.get("metric_list") or [] if isinstance(m, dict)}
    return names


def test_every_metric_of_our_tasks_is_in_the_catalogue_and_no_yaml_restates_its_direction():
    from harness.tasks.longform import LongBenchWriteTask, LongGenerationTask

    names = _yaml_metrics() | set(LongGenerationTask.JUDGED_METRICS) | set(LongBenchWriteTask.JUDGED_METRICS)
    names |= {"prompt_tokens", "over_length", "over_target", "len_4096", "len_4k", "n_len_1024"}
    assert {"ppl", "longppl", "longppl_soft", "lsm", "em", "f1", "rouge1", "bleu4", "n_valid"} <= names
    assert [n for n in sorted(names) if metric_info(n) is None] == []
    for path in TASKS.rglob("*yaml"):
        text = path.read_text(encoding="utf-8")
        if "metric_list:" in text:
            body = text.split("metric_list:", 1)[1].split("\nmetadata:", 1)[0]
            assert "higher_is_better" not in body, path


def test_directions_and_roles_as_the_papers_define_them():
    lower = {"ppl", "longppl", "longppl_soft", "lsm", "corrupted_ratio", "rep4", "over_length", "docs_skipped"}
    higher = {"score", "em", "f1", "rouge1", "bleu4", "quality", "length_score", "distinct2", "len_8k", "n_tokens"}
    assert {n for n in lower if metric_info(n).higher_is_better} == set()
    assert {n for n in higher if not metric_info(n).higher_is_better} == set()
    assert [metric_role(n) for n in ("ppl", "longppl", "lsm", "n_valid", "n_len_2k", "prompt_tokens", "len_2k")] == [
        "perplexity",
        "perplexity",
        "score",
        "bookkeeping",
        "bookkeeping",
        "bookkeeping",
        "score",
    ]
    assert metric_role("acc_norm") == "score" and metric_info("acc_norm") is None  # another package's metric


def test_a_task_metric_list_takes_its_direction_from_the_catalogue():
    from harness.tasks.metric_lists import described

    pooled = object()
    assert described([{"metric": "ppl", "aggregation": pooled}, {"metric": "n_docs"}], "t") == [
        {"metric": "ppl", "aggregation": pooled, "higher_is_better": False},
        {"metric": "n_docs", "higher_is_better": True},
    ]
    with pytest.raises(TypeError, match="metric 'pll' is not in harness/metrics/catalogue.py"):
        described([{"metric": "pll"}], "t")
    with pytest.raises(TypeError, match="says higher_is_better True, the catalogue False"):
        described([{"metric": "ppl", "higher_is_better": True}], "t")


def _yaml_aggregations() -> list[tuple[str, str, object]]:
    """``(task, metric, aggregation)`` of every metric_list entry of our YAMLs, ``!function utils.X`` resolved in the
    YAML's folder as lm-eval resolves it."""
    import importlib

    class Loader(yaml.SafeLoader):
        pass

    out = []
    for path in TASKS.rglob("*yaml"):
        folder = path.parent.relative_to(TASKS.parent.parent)

        def function(loader, node, folder=folder):
            module, _, name = loader.construct_scalar(node).rpartition(".")
            return getattr(importlib.import_module(".".join((*folder.parts, module))), name)

        Loader.add_constructor("!function", function)
        config = yaml.load(path.read_text(encoding="utf-8"), Loader=Loader) or {}
        out += [(config.get("task"), m["metric"], m.get("aggregation")) for m in config.get("metric_list") or []]
    return out


def test_each_aggregation_declares_how_it_pools_over_documents():
    """The pooling a task records for ``--common`` and ``lch agree`` is its aggregation's declaration, not a rule
    guessed from the numbers: a perplexity is exp of the pooled NLL, a pooled ratio sum / count, a score a mean, a
    count a sum, a corpus-level BLEU nothing."""
    from lm_eval.api.metrics import mean as lm_eval_mean

    from harness.metrics.pooling import pools_as
    from harness.tasks.metric_lists import pooling_of

    found = {
        (task, metric): pooling_of({"metric": metric, "aggregation": aggregation}, task)
        for task, metric, aggregation in _yaml_aggregations()
    }
    assert found[("ppl_govreport", "ppl")] == "pooled_exp" and found[("ppl_govreport", "n_tokens")] == "sum"
    assert found[("longppl_govreport", "longppl")] == found[("longppl_govreport", "longppl_soft")] == "pooled_exp"
    assert found[("lsm_govreport", "lsm")] == "pooled"
    assert found[("compress_ae", "bleu4")] is None
    assert {found[("longbench_write", m)] for m in ("length_score", "length", "rep4", "distinct2")} == {"mean"}
    assert pooling_of({"metric": "score", "aggregation": lm_eval_mean}, "t") == "mean"
    with pytest.raises(TypeError, match="task t: the aggregation of metric 'score' .* does not say how it pools"):
        pooling_of({"metric": "score", "aggregation": lambda items: 0.0}, "t")
    assert pools_as(None)(lambda items: 0.0).pooling is None
    with pytest.raises(ValueError, match="pooling 'median'"):
        pools_as("median")


def test_judged_metrics_declare_their_pooling():
    """LongBench-Write's S_q is linear in the samples (a mean of per-sample S_q); its S mixes S_l over all samples
    with S_q over the parsed ones, and HelloBench's quality weights categories: neither pools."""
    from harness.tasks.longform import HelloBenchTask, LongBenchWriteTask

    assert LongBenchWriteTask.JUDGED_POOLING == {"quality": "mean", "n_valid": "sum"}
    assert HelloBenchTask.JUDGED_POOLING == {"n_valid": "sum"}
