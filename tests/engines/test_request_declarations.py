"""Our request types as declarations (harness/engines/requests.py: REQUESTS): requests built and
parsed through them, their defaults written once, served under their names, filling lm-eval's output_type,
and responses checked where the response cache reads them."""

import dataclasses
import json
from types import SimpleNamespace

import pytest
from lm_eval.api.instance import Instance
from lm_eval.api.model import hash_args

from harness.core.errors import UsageError
from harness.engines.requests import (
    GENERATE_LONG,
    LSM,
    REQUESTS,
    TOKEN_LOGPROBS,
    CompressRequestOptions,
    LongGenerationOptions,
    LsmOptions,
    ScoringOptions,
    check_response,
    encode_for_scoring,
)
from harness.engines.response_cache import answer_with_cache

# one non-default value of every option of every declared type
NON_DEFAULT = {
    "token_logprobs": ScoringOptions(max_tokens=7, add_special_tokens=False, return_offsets=False),
    "lsm": LsmOptions(context_length=64, n_samples=3, seed=5, estimator="direct", max_tokens=300),
    "generate_long": LongGenerationOptions(
        max_gen_toks=12, do_sample=True, temperature=0.5, top_p=0.9, until=("\n\n", "END")
    ),
    "compress_ae": CompressRequestOptions(max_tokens=100),
    "compress_lm": CompressRequestOptions(max_tokens=100),
}
GOOD_RESPONSES = {
    "token_logprobs": {"token_ids": [1, 2, 3], "logprobs": [-0.5, -1.0], "offsets": [[0, 1], [1, 2], [2, 3]]},
    "lsm": {"sce": [0.25, 0.5]},
    "generate_long": {"text": "x", "ended_with_eos": True, "n_tokens": 1},
    "compress_ae": {"reference": "a b", "prediction": "a c"},
    "compress_lm": {"logprobs": [-1.0]},
}


def test_every_declared_type_is_covered_here():
    assert set(NON_DEFAULT) == set(REQUESTS) == set(GOOD_RESPONSES)


@pytest.mark.parametrize("kind", sorted(REQUESTS))
def test_requests_round_trip(kind):
    """options -> request args (JSON) -> parsed options: equal, and the args rebuilt from them equal too."""
    declaration = REQUESTS[kind]
    for options in (NON_DEFAULT[kind], declaration.options()):
        args = declaration.arguments("some text", options)
        assert json.loads(json.dumps(args)) == list(args)  # what lm-eval's cache key and --log_samples hold
        text, parsed = declaration.parse(json.loads(json.dumps(args)))
        assert text == "some text" and parsed == options
        assert declaration.arguments(text, parsed) == args


def test_requests_send_what_tasks_always_sent():
    """The dicts (lm-eval's cache keys) of the requests our tasks build are those they sent before the
    declarations: stated options only, in the same order."""
    assert TOKEN_LOGPROBS.arguments("t", ScoringOptions.of(max_tokens=None, add_special_tokens=None)) == ("t", {})
    assert TOKEN_LOGPROBS.arguments("t", ScoringOptions.of(max_tokens=9, add_special_tokens=True)) == (
        "t",
        {"max_tokens": 9, "add_special_tokens": True},
    )
    greedy = LongGenerationOptions.of(max_gen_toks=5, do_sample=False, temperature=None)
    assert GENERATE_LONG.arguments("c", greedy) == ("c", {"max_gen_toks": 5, "do_sample": False})
    sampled = LongGenerationOptions.of(max_gen_toks=5, do_sample=True, temperature=0.8)
    assert GENERATE_LONG.arguments("c", sampled) == ("c", {"max_gen_toks": 5, "do_sample": True, "temperature": 0.8})
    assert LSM.arguments("t", LsmOptions()) == (
        "t",
        {"context_length": 4096, "n_samples": 16, "seed": 0, "estimator": "overlap"},
    )
    compress = CompressRequestOptions(max_tokens=2040)
    assert REQUESTS["compress_ae"].arguments("t", compress) == ("t", {"max_tokens": 2040})


def test_parsing_refuses_what_is_not_a_request():
    with pytest.raises(UsageError, match=r"generate_long: unknown options \['top_k'\]; known: do_sample, max_gen_toks"):
        GENERATE_LONG.parse(("c", {"top_k": 3}))
    with pytest.raises(UsageError, match=r"token_logprobs: a request's args are \(text, options\), got 3 args"):
        TOKEN_LOGPROBS.parse(("t", {}, {}))
    with pytest.raises(TypeError, match="lsm takes LsmOptions, got ScoringOptions"):
        LSM.arguments("t", ScoringOptions())


@pytest.mark.parametrize("kind", sorted(REQUESTS))
def test_absent_options_take_the_declared_defaults(kind):
    declaration = REQUESTS[kind]
    assert declaration.parse(("t",))[1] == declaration.parse(("t", {}))[1] == declaration.options()


def test_the_engines_apply_the_declared_defaults(tiny_model_dir):
    """A request without options is answered as one that states every declared default."""
    from harness.engines.hf_pic import HFPicLM

    lm = HFPicLM(pretrained=str(tiny_model_dir), device="cpu", dtype="float32", batch_size=1)
    text = "one two three four five six seven eight nine ten " * 6
    every = {f.name: getattr(ScoringOptions(), f.name) for f in dataclasses.fields(ScoringOptions)}
    assert encode_for_scoring(lm.tokenizer, text) == encode_for_scoring(lm.tokenizer, text, every)

    def ask(kind, *args):
        return getattr(lm, kind)([Instance(request_type=kind, doc={}, arguments=args, idx=0)])[0]

    assert ask("token_logprobs", text) == ask("token_logprobs", text, every)
    small = {"context_length": 16, "n_samples": 2}
    stated = {**small, "seed": LsmOptions.seed, "estimator": LsmOptions.estimator}
    assert ask("lsm", text, small) == ask("lsm", text, stated)
    greedy = ask("generate_long", "Hello there", {"max_gen_toks": 4})
    assert greedy == ask("generate_long", "Hello there", {"max_gen_toks": 4, "do_sample": False, "until": []})


def test_the_generation_tasks_sampling_temperature_is_the_requests():
    from harness.tasks.longform import GenerationOptions

    assert GenerationOptions().temperature == LongGenerationOptions().temperature


@pytest.mark.parametrize("kind", sorted(REQUESTS))
def test_every_declared_type_is_served_under_its_name(kind):
    """lm-eval calls the method named like the request type: some model of ours has it for every declared type
    (the engine core's three for both engines, through their primitives)."""
    from harness.engines.registry import models

    serving = [entry.name for entry in models() if kind in entry.serves]
    assert serving
    for entry in models():
        if kind in entry.serves:
            assert callable(getattr(entry.cls, kind, None)), (entry.name, kind)
    if kind in ("token_logprobs", "lsm", "generate_long"):
        assert serving == ["hf-pic", "vllm-pic"]


def test_check_response():
    for kind, value in GOOD_RESPONSES.items():
        check_response(kind, value)
    check_response("token_logprobs", {"token_ids": [1], "logprobs": [], "offsets": None})
    bad = [
        ("token_logprobs", {"token_ids": [1], "logprobs": []}),
        ("lsm", {"sce": "0.5"}),
        ("lsm", [0.5]),
        ("generate_long", {"text": "x", "ended_with_eos": 1, "n_tokens": 1}),
        ("generate_long", {"text": "x", "ended_with_eos": True, "n_tokens": 1.5}),
    ]
    for kind, value in bad:
        with pytest.raises(ValueError, match=kind):
            check_response(kind, value)


def test_a_malformed_cached_response_is_recomputed():
    """An entry of the wrong shape in lm-eval's response cache is a miss: computed again and stored."""
    good, bad = (
        Instance(request_type="lsm", doc={}, arguments=("a", {}), idx=0),
        Instance(request_type="lsm", doc={}, arguments=("b", {}), idx=0),
    )
    db = {hash_args("lsm", good.args): {"sce": [1.0]}, hash_args("lsm", bad.args): {"sce": "garbled"}}
    stored = []
    lm = SimpleNamespace(cache_hook=SimpleNamespace(dbdict=db, add_partial=lambda *a: stored.append(a)))
    computed = []

    def compute(todo, done):
        for j, req in enumerate(todo):
            computed.append(req.args[0])
            done(j, {"sce": [2.0]})

    assert answer_with_cache(lm, "lsm", [good, bad], compute) == [{"sce": [1.0]}, {"sce": [2.0]}]
    assert computed == ["b"] and stored == [("lsm", bad.args, {"sce": [2.0]})]


@pytest.fixture
def ppl_folder(tmp_path):
    """A task folder with a YAML of one of our task classes that states no output_type."""
    data = tmp_path / "docs.jsonl"
    data.write_text("".join(json.dumps({"text": f"Report {i}: the committee met."}) + "\n" for i in range(2)))
    folder = tmp_path / "tasks"
    folder.mkdir()
    (folder / "utils.py").write_text("from harness.tasks.logprob import PerplexityTask  # noqa: F401\n")
    (folder / "my_ppl.yaml").write_text(
        "task: my_ppl\n"
        "class: !function utils.PerplexityTask\n"
        "dataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {data}\n"
        "test_split: test\n"
        "doc_to_text: ''\n"
        "doc_to_target: text\n"
        "metric_list:\n  - metric: ppl\n    aggregation: mean\n    higher_is_better: false\n"
        "metadata:\n  version: 1.0\n  min_tokens: 1\n  max_tokens: 5\n"
    )
    assert "output_type" not in (folder / "my_ppl.yaml").read_text()
    return folder


def test_a_yaml_without_output_type_builds_and_validates(ppl_folder):
    from lm_eval.tasks import TaskManager

    task = TaskManager(include_path=str(ppl_folder), include_defaults=False).load(["my_ppl"])["tasks"]["my_ppl"]
    assert task.config.output_type == "loglikelihood_rolling"  # what token_logprobs stands in for
    assert task.OUTPUT_TYPE == "token_logprobs"
    doc = next(iter(task.test_docs()))
    request = task.construct_requests(doc, "")
    assert request.request_type == "token_logprobs" and request.args == (doc["text"], {"max_tokens": 5})


def test_a_task_class_must_name_a_declared_request_type():
    from harness.tasks.base import LchTask

    with pytest.raises(TypeError, match="REQUEST_TYPE 'token_logprob' is not a declared request type"):
        type("Typo", (LchTask,), {"REQUEST_TYPE": "token_logprob"})
