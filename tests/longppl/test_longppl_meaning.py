"""A LongPPL says when it means nothing: key spans lost to another tokenizer are counted, key tokens are counted,
no key token is an error and a handful is a caution in the results, a window as long as a document is refused
up front."""

from __future__ import annotations

import logging

import pytest

from harness.core.errors import UsageError
from harness.core.results import SUPPORT as SUPPORT_KEY
from harness.longppl.corpus import check_key_windows
from harness.longppl.formulas import (
    MIN_KEY_TOKENS,
    KeyTokens,
    count_key_tokens,
    document_stats,
    dropped_key_spans,
    key_tokens_support,
)
from harness.metrics.support import documents_support
from harness.plugin.finish_results import record_cautions
from harness.tasks.aggregations import key_perplexity


def test_a_key_span_no_evaluated_token_fits_in_is_counted():
    # evaluated tokens of "The cost rose." cut as "The| cost| rose|." (offsets), with a BOS of width 0
    evaluated = [[0, 0], [0, 3], [3, 8], [8, 13], [13, 14]]
    # key spans of another tokenizer: " cost" (fits token 2), "os" (inside " rose": no token fits), "rose" (" rose"
    # starts one character before it and "." after it: none fits), "." (fits token 4)
    spans = [[3, 8], [10, 12], [9, 13], [13, 14]]
    assert dropped_key_spans(evaluated, spans) == 2
    assert dropped_key_spans(evaluated, []) == 0 and dropped_key_spans([[0, 0]], [[1, 2]]) == 1
    stats = document_stats([-1.0, -2.0, -3.0, -4.0], evaluated, spans)
    assert stats["n_spans_dropped"] == 2 and stats["n_key"] == 2  # " cost" and "."


def test_key_tokens_are_counted_in_the_evaluators_tokens():
    offsets = [[0, 3], [3, 8], [8, 13], [13, 14]]
    assert count_key_tokens(KeyTokens([[3, 14]], offsets)) == 3  # one merged span of three tokens
    assert count_key_tokens(KeyTokens([[3, 8], [13, 14]])) == 2  # spans from files, no offsets: the spans


def test_longppl_over_no_key_token_is_an_error_and_over_a_few_a_caution_in_the_results(caplog):
    with pytest.raises(UsageError, match=r"^LongPPL has no key token in any of the 2 documents"):
        key_perplexity([(0.0, 0), (0.0, 0)])
    assert key_perplexity([(3.0, 2), (1.0, 2)]) == pytest.approx(2.718281828459045)  # exp(4 / 4)
    # what a run of longppl_govreport over 4 key tokens and 2 of 3 documents asked for returns: the task's declared
    # supports in its metadata, the counts in its results
    supports = [key_tokens_support("longppl"), documents_support("longppl", 3), documents_support("ppl", 3)]
    results = {
        "configs": {"longppl_govreport": {"metadata": {SUPPORT_KEY: [s.to_json() for s in supports]}}},
        "results": {
            "longppl_govreport": {
                "sample_len": 2,
                "longppl,none": 2.7,
                "ppl,none": 5.0,
                "n_key_tokens,none": 4,
                "n_docs,none": 2,
            }
        },
    }
    with caplog.at_level(logging.WARNING, logger="harness.plugin.finish_results"):
        found = record_cautions(results)
    expected = [
        f"longppl_govreport/longppl rests on 4 key tokens, fewer than {MIN_KEY_TOKENS}: the mean NLL of n key "
        "tokens is known to about 2/sqrt(n) nats",
        "longppl_govreport: longppl rests on 2 documents, ppl on 2; fewer than 3 each: fewer long-enough "
        "documents were found than num_docs asked for, so it is not the corpus asked for",
    ]
    assert found == {"longppl_govreport": expected} and results["lch_cautions"] == found
    assert [r.getMessage() for r in caplog.records] == [f"caution: {e}" for e in expected]
    # enough key tokens and every document found: nothing to say, and the results say that they were checked
    results["results"]["longppl_govreport"].update({"n_key_tokens,none": MIN_KEY_TOKENS, "n_docs,none": 3})
    assert record_cautions(results) == {} and results["lch_cautions"] == {}
    # a model that is its own evaluator: its LongPPL is favoured, said whatever the counts (model_args as lm-eval
    # records them: a dict, or its k=v string); another evaluator, or reference key spans, say nothing of it
    results["configs"]["longppl_govreport"]["metadata"]["evaluator"] = "/models/smollm2-135m"
    own = (
        "longppl_govreport/longppl: the evaluated model is its own LongPPL evaluator: its key tokens are where its "
        "own long context helps it most, so its LongPPL is favoured against any model judged by it; compare models "
        "under one evaluator that none of them is"
    )
    for model_args in ({"pretrained": "/models/smollm2-135m", "pic": "ntk"}, "pretrained=/models/smollm2-135m,pic=ntk"):
        results["config"] = {"model_args": model_args}
        assert record_cautions(results) == {"longppl_govreport": [own]}
    # the same metadata on a task without a LongPPL (lm-eval hands a run's metadata to every task): nothing said
    ruler = {"metadata": {"evaluator": "/models/smollm2-135m", SUPPORT_KEY: []}}
    with_ruler = {
        **results,
        "configs": {**results["configs"], "lch_ruler_niah_single_1": ruler},
        "results": {**results["results"], "lch_ruler_niah_single_1": {"score,none": 100.0}},
    }
    results["config"] = {"model_args": {"pretrained": "/models/smollm2-135m"}}
    assert record_cautions(with_ruler) == {"longppl_govreport": [own]}
    results["config"] = {"model_args": {"pretrained": "/models/gemma3-270m"}}
    assert record_cautions(results) == {}
    results["config"] = {"model_args": {"pretrained": "/models/smollm2-135m"}}
    results["configs"]["longppl_govreport"]["metadata"]["key_spans_dir"] = "/spans"
    assert record_cautions(results) == {}
    del results["configs"]["longppl_govreport"]["metadata"]["key_spans_dir"], results["config"]
    # a count of zero is said as such
    results["results"]["longppl_govreport"]["n_docs,none"] = 0
    assert (
        record_cautions(results)["longppl_govreport"][0]
        == "longppl_govreport/longppl rests on no documents: it means nothing"
    )


def test_a_window_as_long_as_a_document_is_refused_before_the_evaluator_runs():
    docs = [{"doc_id": 0, "n_tokens": 5000}, {"doc_id": 1, "n_tokens": 2048}, {"doc_id": 2, "n_tokens": 4096}]
    with pytest.raises(UsageError) as err:
        check_key_windows(docs, 4096)
    assert str(err.value) == (
        "trunc_len (K) 4096 is at least as long as 2 of the 3 documents (document 1: 2048 "
        "tokens): no token of them can be a key token; give trunc_len (and sliding_window) "
        "below the shortest document, or min_tokens above trunc_len"
    )
    check_key_windows(docs, 2047)


def test_the_results_say_the_device_the_model_ran_on():
    """lm-eval records its --device (cuda:0 by default) on a CPU run too; a run of ours records where it ran, and
    what was asked beside it when that differs."""
    from harness.plugin.finish_results import finish_results

    results = {"results": {}, "configs": {}, "config": {"device": "cuda:0", "lch_run": {"device": "cpu"}}}
    assert finish_results(results)["config"]["device"] == "cpu" and results["config"]["lch_device_asked"] == "cuda:0"
    same = {"results": {}, "configs": {}, "config": {"device": "cpu", "lch_run": {"device": "cpu"}}}
    assert "lch_device_asked" not in finish_results(same)["config"]
    foreign = {"results": {}, "configs": {}, "config": {"device": "cuda:0"}}  # no record of ours: left as it is
    assert finish_results(foreign)["config"] == {"device": "cuda:0"}
