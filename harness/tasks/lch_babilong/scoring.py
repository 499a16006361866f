"""BABILong official answer scoring (docs/formulas.md §6), as a pure function: the output is lower-cased, cut before
its first ".", then at "<context>" and "<example>" (the official cut at "Question", made after lower-casing, never
matches); the task's labels found in it (substring match), less those in the lower-cased question, must be exactly
the target, or for a list target (a "," in a target longer than 3 characters) exactly its parts."""

from __future__ import annotations

from harness.core.errors import UsageError

LAYER = "pure"  # harness/devtools/layers.py

TASK_LABELS: dict[str, tuple[str, ...]] = {
    **{f"qa{i}": ("bathroom", "bedroom", "garden", "hallway", "kitchen", "office") for i in (1, 2, 3, 4, 11, 12, 13)},
    "qa5": ("Bill", "Fred", "Jeff", "Mary", "apple", "football", "milk"),
    "qa6": ("no", "yes"),
    "qa7": ("none", "one", "three", "two"),
    "qa8": ("apple", "football", "milk", "nothing"),
    "qa9": ("no", "yes"),
    "qa10": ("maybe", "no", "yes"),
    "qa14": ("bedroom", "cinema", "kitchen", "office", "park", "school"),
    "qa15": ("cat", "mouse", "sheep", "wolf"),
    "qa16": ("gray", "green", "white", "yellow"),
    "qa17": ("no", "yes"),
    "qa18": ("no", "yes"),
    "qa19": ("e,e", "e,n", "e,s", "n,e", "n,n", "n,w", "s,e", "s,s", "s,w", "w,n", "w,s", "w,w"),
    "qa20": ("bedroom", "bored", "garden", "hungry", "kitchen", "thirsty", "tired"),
}


def first_sentence(output: str) -> str:
    """The part of the output the official scorer reads."""
    text = output.lower().split(".")[0]
    for marker in ("<context>", "<example>"):
        text = text.split(marker)[0]
    return text  # the official split on "Question" happens after lower-casing: never a cut


def compare_answers(target: str, output: str, question: str, task: str) -> bool:
    """True iff ``output`` answers ``question`` with ``target`` under the official rule for ``task``."""
    if task not in TASK_LABELS:
        raise UsageError(f"BABILong task {task!r} is unknown; allowed: qa1 .. qa20")
    labels = {label.lower() for label in TASK_LABELS[task]}
    answer, question, target = first_sentence(output), question.lower(), target.lower()
    found = {label for label in labels if label in answer} - {label for label in labels if label in question}
    if "," in target and len(target) > 3:
        parts = target.split(",")
        return all(p in found for p in parts) and len(found) == len(parts)
    return found == {target}
