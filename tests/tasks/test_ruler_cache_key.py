"""The RULER row cache's key comes from RulerOptions' declaration: every option that changes the generated rows
changes the key, the ones that do not leave it alone, and an option that does not say which it is refuses the task
class that would cache under it."""

from __future__ import annotations

import dataclasses
import json

import pytest

from harness.core.cache_keys import data_key
from harness.core.options import option
from harness.tasks.lch_ruler.cache import cache_key
from harness.tasks.lch_ruler.dataset import RulerOptions
from harness.tasks.lch_ruler.task import RulerTask


class Counter:
    def __init__(self, fingerprint: str) -> None:
        self._fingerprint = fingerprint

    def fingerprint(self) -> str:
        return self._fingerprint


# Written from what the generator reads (dataset._fit_samples / the builders), not from the declaration: the options
# whose change gives other rows, and another value for each.
CHANGES_ROWS = {"ruler_task": "vt", "num_samples": 4, "seed": 43, "icl_example": False}
SOURCES = ("essays", "squad", "hotpotqa")  # change the rows of the tasks that read them
LENGTHS = ("lengths", "max_seq_lengths")  # one cache entry per length: the entry's length is in its key
TOKENIZER = ("pretrained", "tokenizer", "model", "chat_template")  # counted through the counter's fingerprint
LEAVES_ROWS = {"truncation": "skip", "effective_threshold": 50.0, "max_length": 999, "max_model_len": 999}


@pytest.fixture
def sources(tmp_path):
    (tmp_path / "essays").mkdir()
    (tmp_path / "essays" / "a.txt").write_text("An essay.")
    (tmp_path / "squad.json").write_text("{}")
    (tmp_path / "hotpot.json").write_text("[]")
    return {
        "essays": str(tmp_path / "essays"),
        "squad": str(tmp_path / "squad.json"),
        "hotpotqa": str(tmp_path / "hotpot.json"),
    }


def test_every_option_is_known_to_this_test():
    named = set(CHANGES_ROWS) | set(SOURCES) | set(LENGTHS) | set(TOKENIZER) | set(LEAVES_ROWS)
    assert {f.name for f in dataclasses.fields(RulerOptions)} == named  # a new option: say here what it does


@pytest.mark.parametrize("task", ["niah_single_1", "niah_single_2", "qa_squad", "qa_hotpot", "vt"])
def test_each_option_that_changes_the_rows_changes_the_key(task, sources):
    base = RulerOptions(ruler_task=task, num_samples=3, essays="synthetic", squad="synthetic", hotpotqa="synthetic")
    key = cache_key(base, 1024, Counter("tok"))
    for name, other in CHANGES_ROWS.items():
        if name == "ruler_task" and task == other:
            other = "cwe"
        assert cache_key(dataclasses.replace(base, **{name: other}), 1024, Counter("tok")) != key, name
    reads = {"niah_single_2": {"essays"}, "qa_squad": {"squad"}, "qa_hotpot": {"hotpotqa"}}.get(task, set())
    for name in SOURCES:
        changed = cache_key(dataclasses.replace(base, **{name: sources[name]}), 1024, Counter("tok")) != key
        assert changed == (name in reads), name  # a source the task does not read leaves its rows alone
    assert cache_key(base, 2048, Counter("tok")) != key
    for name in LENGTHS:  # the run's list of lengths is not the entry's: the entry keys on its own length
        assert cache_key(dataclasses.replace(base, **{name: (1024, 2048)}), 1024, Counter("tok")) == key, name
    assert cache_key(base, 1024, Counter("another tokenizer or template")) != key
    for name in TOKENIZER:  # the counter built from them is what counts
        value = True if name == "chat_template" else "some/model"
        assert cache_key(dataclasses.replace(base, **{name: value}), 1024, Counter("tok")) == key, name
    for name, other in LEAVES_ROWS.items():
        assert cache_key(dataclasses.replace(base, **{name: other}), 1024, Counter("tok")) == key, name


def test_a_source_folder_edited_after_generation_changes_the_key(sources):
    from pathlib import Path

    base = RulerOptions(ruler_task="niah_single_2", num_samples=3, essays=sources["essays"])
    key = cache_key(base, 1024, Counter("tok"))
    (Path(sources["essays"]) / "b.txt").write_text("Another essay.")
    assert cache_key(base, 1024, Counter("tok")) != key


def test_the_shipped_essays_by_name_are_keyed_and_read_as_their_folder():
    from harness.data.haystacks import BUILTIN_ESSAYS, BUILTIN_ESSAYS_DIR, essay_sentences

    named = RulerOptions(ruler_task="niah_single_2", num_samples=3, essays=BUILTIN_ESSAYS)
    folder = dataclasses.replace(named, essays=str(BUILTIN_ESSAYS_DIR))
    assert cache_key(named, 1024, Counter("tok")) == cache_key(folder, 1024, Counter("tok"))
    assert str(BUILTIN_ESSAYS_DIR) in json.dumps(cache_key(named, 1024, Counter("tok")), default=str)  # by content
    assert essay_sentences(BUILTIN_ESSAYS) == essay_sentences(str(BUILTIN_ESSAYS_DIR))


@dataclasses.dataclass(frozen=True)
class WithAForgottenOption(RulerOptions):
    haystack_style: str = option("plain", "a new data option whose author forgot to say how it shapes the rows")


def test_an_option_that_does_not_declare_how_it_shapes_the_rows_is_refused():
    with pytest.raises(TypeError, match="haystack_style declare no cache_key="):
        type("NewRulerTask", (RulerTask,), {"OPTIONS": WithAForgottenOption})
    with pytest.raises(TypeError, match="haystack_style"):
        data_key(WithAForgottenOption(ruler_task="vt"), {})
    with pytest.raises(TypeError, match="not one of"):
        option(1, "x", cache_key="maybe")


def test_a_source_folder_is_walked_once_per_process_while_its_entries_stand(sources, monkeypatch):
    """Every task and length of a run keys on one walk of the essays folder; a file added is seen."""
    from pathlib import Path

    from harness.tasks.lch_ruler.builders import source_fingerprint

    walks = []
    rglob = Path.rglob
    monkeypatch.setattr(Path, "rglob", lambda self, pattern: walks.append(self) or rglob(self, pattern))
    first = source_fingerprint(sources["essays"])
    assert source_fingerprint(sources["essays"]) == first and len(walks) == 1
    (Path(sources["essays"]) / "c.txt").write_text("A third essay.")
    assert source_fingerprint(sources["essays"]) != first and len(walks) == 2
