"""Needle / fact depth: the percentage and its bucket (harness/data/depth.py), as RULER's niah rows and BABILong's
synthetic rows record them where they are built, without changing what the samples contain."""

from __future__ import annotations

import random
import re
from dataclasses import asdict

import pytest

from harness.data.depth import DEPTH_BUCKETS, depth_bucket, depth_fields, depth_percent
from harness.tasks.lch_babilong.babi import GENERATORS, babi_story, babilong_sample, fact_depth, story_with_answer_fact
from harness.tasks.lch_ruler import dataset as ruler

SYNTHETIC = ruler.Sources(essays="synthetic", squad="synthetic", hotpotqa="synthetic")


def test_depth_is_the_needles_offset_over_the_room_it_could_take():
    # a haystack of 110 characters with a needle of 10: 11 starting places, 0 .. 100
    assert depth_percent(0, 10, 110) == 0.0
    assert depth_percent(100, 10, 110) == 100.0
    assert depth_percent(25, 10, 110) == 25.0
    assert depth_percent(0, 5, 5) == 0.0  # the needle is the whole haystack
    for bad in ((101, 10, 110), (-1, 10, 110), (0, -1, 10)):
        with pytest.raises(ValueError):
            depth_percent(*bad)


def test_buckets_are_the_nearest_of_the_grid_ties_to_the_deeper():
    assert DEPTH_BUCKETS == (0, 25, 50, 75, 100)
    cases = {0: 0, 12.49: 0, 12.5: 25, 25: 25, 37.49: 25, 37.5: 50, 62.5: 75, 87.49: 75, 87.5: 100, 100: 100}
    assert {d: depth_bucket(d) for d in cases} == cases
    for bad in (-0.01, 100.01):
        with pytest.raises(ValueError, match="percentage"):
            depth_bucket(bad)
    # the bucket is that of the recorded (rounded) depth
    assert depth_fields(12.499) == {"depth": 12.5, "depth_bucket": 25}


def test_fact_depth_in_a_hand_built_context():
    parts = ["abc", "de", "fghij"]  # "abc de fghij": 12 characters
    assert fact_depth(parts, 0) == {"depth": 0.0, "depth_bucket": 0}
    assert fact_depth(parts, 1) == {"depth": 40.0, "depth_bucket": 50}  # "de" at 4 of the 12 - 2 = 10 places
    assert fact_depth(parts, 2) == {"depth": 100.0, "depth_bucket": 100}


_MOVE = re.compile(r"(\w+) (?:moved|went|journeyed|travelled|went back) to the (\w+)\.")


@pytest.mark.parametrize("task", sorted(GENERATORS))
def test_the_answer_fact_names_the_answer(task):
    for seed in range(60):
        facts, question, answer, k = story_with_answer_fact(task, seed)
        assert (facts, question, answer) == babi_story(task, seed)  # the stories themselves are unchanged
        assert answer in facts[k], (task, seed)
        if task in ("qa1", "qa2", "qa3"):  # a move naming the place asked for
            assert _MOVE.fullmatch(facts[k]).group(2) == answer
        if task == "qa1":  # the person's last move
            person = question.split()[-1].rstrip("?")
            assert k == max(i for i, f in enumerate(facts) if f.startswith(person + " "))
        if task == "qa5":
            assert k == len(facts) - 1


def test_babilong_sample_records_the_character_depth_of_its_answer_fact():
    filler = [f"Filler sentence number {i} says nothing." for i in range(300)]
    words = lambda text: len(text.split())
    for task in sorted(GENERATORS):
        for seed in (3, 4):
            sample = babilong_sample(task, seed, 600, words, filler)
            facts, _, _, k = story_with_answer_fact(task, seed)
            text, at = sample["input"], -1
            for fact in facts[: k + 1]:  # the facts appear in order: the k-th one's place
                at = text.index(fact, at + 1)
            expected = 100 * at / (len(text) - len(facts[k]))
            assert sample["depth"] == pytest.approx(expected, abs=0.005)
            assert sample["depth_bucket"] == depth_bucket(sample["depth"])
    story = babilong_sample("qa5", 1, 600, words, [])  # no filler: the story alone
    facts, _, _, k = story_with_answer_fact("qa5", 1)
    assert story["input"] == " ".join(facts) and story["depth"] == 100.0


def test_babilong_rows_carry_depth_only_when_generated(tiny_model_dir, tmp_path):
    from harness.core.options import parse_options
    from harness.tasks.lch_babilong import dataset as babilong

    def rows(meta):
        return list(babilong.babilong_dataset(parse_options(babilong.BabilongOptions, meta))["test"])

    synthetic = rows(
        {
            "babilong_task": "qa1",
            "lengths": ["0k", "1k"],
            "source": "synthetic",
            "num_samples": 2,
            "pretrained": str(tiny_model_dir),
        }
    )
    for row in synthetic:
        facts, _, _, k = story_with_answer_fact("qa1", row["index"])
        assert row["depth_bucket"] == depth_bucket(row["depth"])
        if row["length"] == "0k":  # the story alone
            assert row["depth"] == fact_depth(facts, k)["depth"]
    (tmp_path / "1k").mkdir()
    (tmp_path / "1k" / "qa1.jsonl").write_text(
        '{"input": "Mary went to the garden.", "question": "Where is Mary?", "target": "garden"}\n'
    )
    local = rows({"babilong_task": "qa1", "lengths": ["1k"], "source": str(tmp_path)})
    assert "depth" not in local[0] and "depth_bucket" not in local[0]  # nothing says which fact answers


def _needle_lines(text: str) -> tuple[list[str], list[int]]:
    """The haystack items of a noise-haystack prompt (head line and question line left out) and where the needles
    are among them."""
    items = text.split("\n")[1:-1]
    return items, [j for j, item in enumerate(items) if item.startswith("One special magic")]


def test_niah_rows_record_the_drawn_depth_of_the_answer_needle():
    # hand-built parameters: 3 keys x 2 values on a noise haystack, one key asked: 2 answer needles among 6
    params = {"haystack": "noise", "key": "words", "value": "numbers", "n_keys": 3, "n_values": 2, "n_queries": 1}
    for seed in range(20):
        builder = ruler.BUILDERS["niah"](params, random.Random(seed), 4096, SYNTHETIC, True)
        depth = builder.extra
        n = 80
        text, answers, _ = builder.build(n)
        items, needles = _needle_lines(text)
        assert len(items) == n + 6 and len(needles) == 6
        # needle k (in depth order) goes before haystack unit int(d_k / 100 * n): k needles precede it
        mine = [j - rank for rank, j in enumerate(needles) if any(f"is: {a}." in items[j] for a in answers)]
        assert mine == [int(d / 100 * n) for d in depth["needle_depths"]], seed
        assert set(depth["needle_depths"]) <= set(ruler.DEPTHS) and len(depth["needle_depths"]) == 2
        assert depth["depth"] == pytest.approx(sum(depth["needle_depths"]) / 2)
        assert depth["depth_bucket"] == depth_bucket(depth["depth"])


def test_generated_niah_rows_carry_their_depth_and_other_tasks_none(tiny_model_dir):
    from harness.data.prompt_tokens import PromptCounter, load_tokenizer

    counter = PromptCounter(load_tokenizer(str(tiny_model_dir)))
    for row in ruler.generate(
        ruler.RulerOptions(ruler_task="niah_single_1", num_samples=3, seed=11, **asdict(SYNTHETIC)),
        1024,
        counter,
        use_cache=False,
    ):
        items, needles = _needle_lines(row["input"])
        assert len(needles) == 1 and row["needle_depths"] == [row["depth"]]
        assert needles[0] == int(row["depth"] / 100 * row["n_units"])
        assert row["depth_bucket"] == depth_bucket(row["depth"])
    row = ruler.generate(
        ruler.RulerOptions(ruler_task="vt", num_samples=1, seed=11, **asdict(SYNTHETIC)), 1024, counter, use_cache=False
    )[0]
    assert "depth" not in row and "depth_bucket" not in row


def test_rows_cached_without_depths_or_with_other_buckets_are_not_read_back(monkeypatch):
    from harness.tasks.lch_ruler import cache

    counter = type("Counter", (), {"fingerprint": lambda self: "tok"})()

    def path():
        return cache.cache_path(
            ruler.RulerOptions(ruler_task="niah_single_1", num_samples=3, **asdict(SYNTHETIC)), 1024, counter
        )

    now = path()
    monkeypatch.setattr(cache, "GENERATOR_VERSION", "2")  # the version whose rows had no depth
    assert path() != now
    monkeypatch.setattr(cache, "GENERATOR_VERSION", ruler.GENERATOR_VERSION)
    assert path() == now
    monkeypatch.setattr(cache, "DEPTH_BUCKETS", (0, 50, 100))
    assert path() != now
