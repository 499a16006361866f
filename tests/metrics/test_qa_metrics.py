"""BABILong, MRQA and RULER scoring pinned to hand-built cases, official definitions and released predictions."""

import csv

import pytest

from harness.metrics.qa import em_f1, normalize_answer, rouge1_f1, string_match_all, string_match_part
from harness.tasks.lch_babilong.scoring import TASK_LABELS, compare_answers, first_sentence
from tests.conftest import SHARED_DATA

BABILONG = SHARED_DATA / "babilong"


def test_babilong_hand_built():
    q = "Where is John? "
    assert compare_answers("hallway", "The most recent location of John is hallway.", q, "qa1")
    assert not compare_answers("hallway", "John is in the hallway or the kitchen.", q, "qa1")  # two labels
    assert compare_answers("hallway", "Hallway. Earlier he was in the kitchen.", q, "qa1")  # first sentence only
    assert not compare_answers("kitchen", "bathroom <example> kitchen", q, "qa1")
    # labels named by the question are never the answer: 'milk' is dropped, 'kitchen' remains
    assert compare_answers("kitchen", "The milk is in the kitchen", "Where is the milk?", "qa2")
    # the official cut at "Question" never fires (it runs after lower-casing)
    assert first_sentence("Kitchen Question: where") == "kitchen question: where"
    # list targets (qa8): every part and nothing else
    assert compare_answers("apple,milk", "He carries the milk and the apple", "What is he carrying?", "qa8")
    assert not compare_answers("apple,milk", "He carries the milk", "What is he carrying?", "qa8")
    assert not compare_answers("apple,milk", "apple, milk, football", "What is he carrying?", "qa8")
    # substring matching as in the official code: 'none' also contains 'one' (qa7)
    assert not compare_answers("none", "none", "How many objects?", "qa7")
    assert len(TASK_LABELS) == 20
    with pytest.raises(ValueError, match="qa1 .. qa20"):
        compare_answers("x", "x", "x", "qa21")


def _official_rule(target, output, question, labels):
    """The official definition written out independently (label set, question filter, exact set)."""
    text = output.lower().split(".")[0].split("<context>")[0].split("<example>")[0]
    labels = [label.lower() for label in labels]
    in_question = [label for label in labels if label in question.lower()]
    found = sorted({label for label in labels if label in text and label not in in_question})
    target = target.lower()
    wanted = sorted(target.split(",")) if ("," in target and len(target) > 3) else [target]
    return found == wanted


# Released BABILong predictions (gemini-3-flash, 4k, ../shared/data/babilong/gemini-3-flash_<task>_4k.csv:
# columns target / output / question). Under the official answer rule (docs/formulas.md §6, BABILong's
# compare_answers) the correct counts are these; they were counted with a separate script that re-implements
# the official preprocess_output / compare_answers (including its no-op split on "Question") and agree
# with the accuracies quoted for this fixture: 0.995, 0.842, 0.700, 0.974, 0.942.
RELEASED_CORRECT = {
    "qa1": (995, 1000, 0.995),
    "qa2": (841, 999, 0.842),
    "qa3": (699, 999, 0.700),
    "qa4": (973, 999, 0.974),
    "qa5": (941, 999, 0.942),
}


@pytest.mark.skipif(not BABILONG.exists(), reason="../shared/data not present")
@pytest.mark.parametrize("task", ["qa1", "qa2", "qa3", "qa4", "qa5"])
def test_babilong_released_predictions(task):
    rows = list(csv.DictReader((BABILONG / f"gemini-3-flash_{task}_4k.csv").open(encoding="utf-8")))
    ours = [compare_answers(r["target"], r["output"], r["question"], task) for r in rows]
    reference = [_official_rule(r["target"], r["output"], r["question"], TASK_LABELS[task]) for r in rows]
    assert ours == reference
    n_correct, n, accuracy = RELEASED_CORRECT[task]
    assert (sum(ours), len(ours)) == (n_correct, n)
    assert sum(ours) / len(ours) == pytest.approx(accuracy, abs=5e-4)


def test_squad_normalisation_and_em_f1():
    assert normalize_answer("The  Quick, brown fox!") == "quick brown fox"
    assert em_f1("the Eiffel Tower", ["Eiffel Tower", "Paris"]) == (100.0, 100.0)
    em, f1 = em_f1("Eiffel Tower in Paris", ["Eiffel Tower"])
    # prediction tokens: eiffel tower in paris (4); gold: eiffel tower (2); common 2 -> P .5, R 1, F1 2/3
    assert em == 0.0 and f1 == pytest.approx(200 / 3)
    assert em_f1("nothing", ["Eiffel Tower"]) == (0.0, 0.0)
    with pytest.raises(ValueError):
        em_f1("x", [])


def test_rouge1():
    assert rouge1_f1("the eiffel tower", ["eiffel tower"]) == pytest.approx(100 * 2 * (2 / 3) * 1 / (2 / 3 + 1))
    assert rouge1_f1("paris", ["eiffel tower", "paris"]) == 100.0


def test_ruler_string_match():
    assert string_match_all("The numbers are 123 and 456.", ["123", "456", "789"]) == pytest.approx(200 / 3)
    assert string_match_part("Answer: PARIS", ["paris", "london"]) == 100.0  # any reference, not the fraction
    assert string_match_part("Answer: Rome", ["paris", "london"]) == 0.0
