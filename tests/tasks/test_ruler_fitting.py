"""The RULER fitting contract, checked against a brute-force search: the chosen haystack size ``n`` gives a
prompt that fits the budget, ``n + 1`` would not (additive search; the full-count search stops less than one
average unit short at most), and a prompt that cannot fit even at ``n_min`` raises TooShortError."""

from __future__ import annotations

import random
from dataclasses import asdict

import pytest

from harness.data.prompt_tokens import PromptCounter, load_tokenizer
from harness.tasks.lch_ruler.builders import Builder
from harness.tasks.lch_ruler.dataset import (
    BUILDERS,
    TASKS,
    RulerOptions,
    SegmentCounter,
    Sources,
    TooShortError,
    generate,
)
from harness.tasks.lch_ruler.fitting import fit_additive, fit_full

SYNTHETIC = Sources(essays="synthetic", squad="synthetic", hotpotqa="synthetic")


@pytest.fixture(scope="module")
def counter():
    # the tokenizer of the tests' tiny model (it depends on the seed and vocabulary size only), without
    # training the model: an untrained copy is built in seconds
    from harness.models.tiny import build_tiny_model

    return PromptCounter(load_tokenizer(str(build_tiny_model(max_positions=4096))))


def prompt_tokens(counter: PromptCounter, b: Builder, n: int) -> int:
    """Tokens of the prompt exactly as lm-eval sends it (input, a space, the answer prefix), counted directly."""
    text, _, prefix = b.build(n)
    return len(counter.tokenizer(f"{text} {prefix}")["input_ids"])


def brute_force(counter: PromptCounter, b: Builder, target: int) -> int:
    """The n just below the first size that does not fit, trying n_min, n_min + 1, ... in turn."""
    n = b.n_min
    while n < b.n_max and prompt_tokens(counter, b, n + 1) <= target:
        n += 1
    return n


def toy(words: list[str], n_max: int = 400) -> Builder:
    """A prompt of ``n`` words cycling through ``words`` (units of different sizes), with its segments."""

    def parts(n: int) -> list[str]:
        return ["Count the words below.\n", *(f" {words[i % len(words)]}" for i in range(n)), "\nHow many?"]

    return Builder(lambda n: ("".join(parts(n)), [str(n)], "Answer:"), 0, n_max, parts=parts)


def ruler_builders(task: str, length: int, count: int, **params) -> list[Builder]:
    spec = TASKS[task]
    return [
        BUILDERS[spec.kind]({**spec.params, **params}, random.Random(f"{task}-{length}-{i}-1"), length, SYNTHETIC, True)
        for i in range(count)
    ]


CASES = [  # (builders, target): toy units; noise lines, essay sentences and noise with variable assignments
    ("toy", lambda: [toy(["cat", "elephant", "a", "hippopotamus"]), toy(["dog"]), toy(["x y z", "antelope"])], 300),
    ("niah_single_1", lambda: ruler_builders("niah_single_1", 1024, 3), 1024 - 128),
    ("niah_single_2", lambda: ruler_builders("niah_single_2", 2048, 3), 2048 - 128),
    ("vt", lambda: ruler_builders("vt", 1024, 3), 1024 - 30),
]


@pytest.mark.parametrize("name,make,target", CASES, ids=[c[0] for c in CASES])
def test_additive_fit_is_the_largest_n_that_fits(counter, name, make, target):
    builders = make()
    fitted = fit_additive(builders, SegmentCounter(counter), target)
    assert fitted is not None  # byte-level BPE: every junction of these prompts is clean
    for b, (n, tokens) in zip(builders, fitted):
        assert n == brute_force(counter, b, target)
        assert tokens == prompt_tokens(counter, b, n) <= target
        assert n == b.n_max or prompt_tokens(counter, b, n + 1) > target


FULL_CASES = CASES + [  # and builders without segments: distractor needles, word lists, coded words, documents
    ("niah_multikey_2", lambda: ruler_builders("niah_multikey_2", 1024, 20), 1024 - 128),
    ("cwe", lambda: ruler_builders("cwe", 2048, 3, freq_common=7), 2048 - 120),  # 30 repeats do not fit
    ("fwe", lambda: ruler_builders("fwe", 1024, 3), 1024 - 50),
    ("qa_hotpot", lambda: ruler_builders("qa_hotpot", 2048, 3), 2048 - 32),
]


@pytest.mark.parametrize("name,make,target", FULL_CASES, ids=[c[0] for c in FULL_CASES])
def test_full_fit_stops_less_than_one_unit_short(counter, name, make, target):
    builders = make()
    fitted = fit_full(builders, counter, target, chunk=8)  # 20 needle samples: three batches
    first = builders[0]
    probe = min(first.n_max, first.n_min + 16)  # the average unit: the first sample's first 16 units
    unit = (prompt_tokens(counter, first, probe) - prompt_tokens(counter, first, first.n_min)) / (probe - first.n_min)
    for b, (n, tokens) in zip(builders, fitted):
        best = brute_force(counter, b, target)
        assert tokens == prompt_tokens(counter, b, n) <= target
        assert n <= best
        assert n == best or target - tokens < unit


@pytest.mark.parametrize("search", ["additive", "full"])
def test_a_prompt_too_long_at_n_min_raises(counter, search):
    builders = [toy(["cat"]), toy(["dog"])]
    alone = prompt_tokens(counter, builders[0], 0)
    with pytest.raises(TooShortError) as err:
        if search == "additive":
            fit_additive(builders, SegmentCounter(counter), alone - 1)
        else:
            fit_full(builders, counter, alone - 1)
    assert str(err.value) == f"the prompt alone needs {alone} tokens, more than the {alone - 1} available"
    # at the exact size of the bare prompt, n_min fits and nothing more does
    assert fit_additive(builders[:1], SegmentCounter(counter), alone) == [(0, alone)]
    assert fit_full(builders[:1], counter, alone) == [(0, alone)]


def test_generate_names_the_task_and_length_when_too_short(counter):
    b = BUILDERS["niah"](TASKS["niah_single_2"].params, random.Random("niah_single_2-150-0-42"), 150, SYNTHETIC, True)
    alone = prompt_tokens(counter, b, 0)
    with pytest.raises(TooShortError) as err:
        generate(
            RulerOptions(ruler_task="niah_single_2", num_samples=1, **asdict(SYNTHETIC)), 150, counter, use_cache=False
        )
    assert str(err.value) == (
        f"RULER niah_single_2 at length 150: the prompt alone needs {alone} tokens, "
        f"more than the {150 - 128} available (the answer budget takes 128); use a longer length"
    )
    with pytest.raises(TooShortError) as err:  # a length the answer budget alone fills
        generate(
            RulerOptions(ruler_task="niah_single_2", num_samples=1, **asdict(SYNTHETIC)), 100, counter, use_cache=False
        )
    assert str(err.value) == (
        "RULER niah_single_2 at length 100: the answer budget alone takes 128 tokens; use "
        "lengths well above it (e.g. 1k or more)"
    )


def test_a_dirty_junction_hands_over_to_full_counting(counter):
    # cuts inside words: the halves tokenize differently from the whole, so segment sums cannot be trusted
    def parts(n: int) -> list[str]:
        return ["Count the wo", "rds below.", *(" elephant" for _ in range(n)), "\nHow many?"]

    b = Builder(lambda n: ("".join(parts(n)), [str(n)], "Answer:"), 0, 100, parts=parts)
    assert fit_additive([b], SegmentCounter(counter), 200) is None
    ((n, tokens),) = fit_full([b], counter, 200)
    assert tokens == prompt_tokens(counter, b, n) <= 200 and n <= brute_force(counter, b, 200)
