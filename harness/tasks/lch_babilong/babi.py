"""Seeded bAbI-style stories (qa1-qa5: one, two, three supporting facts, two- and three-argument relations) hidden in
filler text at a target token length: BABILong offline. Every answer is in the task's official label set
(:data:`harness.tasks.lch_babilong.scoring.TASK_LABELS`)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from harness.core.errors import UsageError
from harness.data.depth import depth_fields, depth_percent

LAYER = "data"  # harness/devtools/layers.py

PEOPLE = ("Mary", "John", "Daniel", "Sandra")
PLACES = ("bathroom", "bedroom", "garden", "hallway", "kitchen", "office")
OBJECTS = ("apple", "football", "milk")
MOVES = ("moved to", "went to", "journeyed to", "travelled to", "went back to")
GIVERS = ("Bill", "Fred", "Jeff", "Mary")
DIRECTIONS = {"north": "south", "south": "north", "east": "west", "west": "east"}


def _qa1(rng: random.Random) -> tuple[list[str], str, str, int]:
    facts, where = [], {}
    for _ in range(rng.randint(4, 8)):
        person, place = rng.choice(PEOPLE), rng.choice(PLACES)
        facts.append(f"{person} {rng.choice(MOVES)} the {place}.")
        where[person] = place
    person = rng.choice(sorted(where))
    last_move = max(i for i, fact in enumerate(facts) if fact.startswith(f"{person} "))
    return facts, f"Where is {person}?", where[person], last_move


def _carrying_world(rng: random.Random, steps: int) -> tuple[list[str], dict[str, list[str]], dict[str, list[int]]]:
    """``(facts, history, named_by)``: people move, pick up and drop objects; each object's places in order and, per
    place, the fact naming it (the move that carried it there, or the picker's last move at a first pick-up)."""
    facts: list[str] = []
    person_at: dict[str, str] = {}
    last_move: dict[str, int] = {}
    holder: dict[str, str | None] = {o: None for o in OBJECTS}
    history: dict[str, list[str]] = {o: [] for o in OBJECTS}
    named_by: dict[str, list[int]] = {o: [] for o in OBJECTS}
    for _ in range(steps):
        person = rng.choice(PEOPLE)
        held = [o for o, h in holder.items() if h == person]
        here = person_at.get(person)
        # an object can be picked up where it lies (or anywhere before it was first placed)
        free = [o for o, h in holder.items() if h is None and (not history[o] or history[o][-1] == here)]
        action = rng.random()
        if here is not None and free and action < 0.3:
            obj = rng.choice(free)
            holder[obj] = person
            facts.append(f"{person} picked up the {obj}.")
            if not history[obj] or history[obj][-1] != person_at[person]:
                history[obj].append(person_at[person])
                named_by[obj].append(last_move[person])
        elif held and action < 0.45:
            obj = rng.choice(held)
            holder[obj] = None
            facts.append(f"{person} dropped the {obj}.")
        else:
            place = rng.choice(PLACES)
            person_at[person] = place
            facts.append(f"{person} {rng.choice(MOVES)} the {place}.")
            last_move[person] = len(facts) - 1
            for obj in held:
                if history[obj][-1] != place:
                    history[obj].append(place)
                    named_by[obj].append(len(facts) - 1)
    return facts, history, named_by


def _carried(rng: random.Random, steps: tuple[int, int], back: int) -> tuple[list[str], str, str, int]:
    """qa2 (``back`` 1: where an object is) and qa3 (``back`` 2: where it was before its current place)."""
    while True:
        facts, history, named_by = _carrying_world(rng, rng.randint(*steps))
        placed = [o for o in OBJECTS if len(history[o]) >= back]
        if placed:
            obj = rng.choice(placed)
            question = f"Where is the {obj}?" if back == 1 else f"Where was the {obj} before the {history[obj][-1]}?"
            return facts, question, history[obj][-back], named_by[obj][-back]


def _qa4(rng: random.Random) -> tuple[list[str], str, str, int]:
    a, b, c = rng.sample(PLACES, 3)
    d1, d2 = rng.choice(sorted(DIRECTIONS)), rng.choice(sorted(DIRECTIONS))
    stated = f"The {a} is {d1} of the {b}."
    facts = [stated, f"The {c} is {d2} of the {a}."]
    rng.shuffle(facts)
    if rng.random() < 0.5:
        return facts, f"What is {d1} of the {b}?", a, facts.index(stated)
    return facts, f"What is the {b} {DIRECTIONS[d1]} of?", a, facts.index(stated)


def _qa5(rng: random.Random) -> tuple[list[str], str, str, int]:
    while True:
        events = []
        holder: dict[str, str] = {}  # bAbI qa5: only whoever holds an object can give it
        for _ in range(rng.randint(2, 5)):
            obj = rng.choice(OBJECTS)
            giver = holder.get(obj) or rng.choice(GIVERS)
            receiver = rng.choice([p for p in GIVERS if p != giver])
            holder[obj] = receiver
            events.append((giver, obj, receiver))
        facts = [f"{g} gave the {o} to {r}." for g, o, r in events]
        giver, obj, receiver = events[-1]
        questions = []
        if len({g for g, o, r in events if (o, r) == (obj, receiver)}) == 1:
            questions.append((f"Who gave the {obj} to {receiver}?", giver))
        questions.append((f"Who received the {obj}?", receiver))  # the most recent receiver
        if len({o for g, o, r in events if (g, r) == (giver, receiver)}) == 1:
            questions.append((f"What did {giver} give to {receiver}?", obj))
        question, answer = rng.choice(questions)
        return facts, question, answer, len(facts) - 1  # every question asks about the last gift


# each returns (facts, question, answer, the index of the answer's fact: see story_with_answer_fact)
GENERATORS: dict[str, Callable[[random.Random], tuple[list[str], str, str, int]]] = {
    "qa1": _qa1,
    "qa2": partial(_carried, steps=(8, 14), back=1),
    "qa3": partial(_carried, steps=(12, 20), back=2),
    "qa4": _qa4,
    "qa5": _qa5,
}


def story_with_answer_fact(task: str, seed: int) -> tuple[list[str], str, str, int]:
    """``(facts, question, answer, k)`` of one story, deterministic in ``seed``; ``facts[k]`` is the fact that names the
    answer: qa1 the person's last move, qa2 / qa3 the fact naming the object's current / previous place, qa4 the stated
    relation, qa5 the last gift."""
    if task not in GENERATORS:
        raise UsageError(f"offline bAbI generator covers {', '.join(GENERATORS)}; got {task!r}")
    return GENERATORS[task](random.Random(f"{task}-{seed}"))


def babi_story(task: str, seed: int) -> tuple[list[str], str, str]:
    """``(facts, question, answer)`` of one story, deterministic in ``seed``."""
    return story_with_answer_fact(task, seed)[:3]


def fact_depth(parts: Sequence[str], index: int) -> dict[str, Any]:
    """``{"depth", "depth_bucket"}`` (:mod:`harness.data.depth`) of ``parts[index]`` in ``" ".join(parts)``, in
    characters: 0 when it opens the text, 100 when it closes it."""
    offset = sum(len(part) + 1 for part in parts[:index])
    return depth_fields(depth_percent(offset, len(parts[index]), len(" ".join(parts))))


def babilong_sample(
    task: str, seed: int, target_tokens: int, count_tokens: Callable[[str], int], filler: Sequence[str]
) -> dict[str, Any]:
    """A story spread, in order, through filler: ``{"input", "question", "target", "depth", "depth_bucket"}`` (depth:
    :func:`fact_depth`) with ``count_tokens(input) <= target_tokens``; UsageError when the story alone does not fit."""
    facts, question, answer, key = story_with_answer_fact(task, seed)
    rng = random.Random(f"filler-{task}-{seed}")
    story = " ".join(facts)
    if count_tokens(story) > target_tokens:
        raise UsageError(f"target_tokens={target_tokens} is shorter than the {task} story itself")
    if not filler:
        return {"input": story, "question": question, "target": answer, **fact_depth(facts, key)}
    head = list(filler[:20])  # marginal cost per sentence (the counter may include a fixed prompt overhead)
    per_sentence = max(1.0, (count_tokens(" ".join(head)) - count_tokens("")) / len(head))
    offset = rng.randrange(len(filler))
    pool = [filler[(offset + i) % len(filler)] for i in range(int(1.5 * target_tokens / per_sentence) + 2)]

    def layout(k: int) -> tuple[list[str], int]:
        # the facts keep their order and land between filler sentences at seeded positions
        slots = sorted(random.Random(f"slots-{task}-{seed}-{k}").choices(range(k + 1), k=len(facts)))
        parts: list[str] = []
        facts_left, at = iter(enumerate(facts)), -1
        for position in range(k + 1):
            for _ in range(slots.count(position)):
                i, fact = next(facts_left)
                at = len(parts) if i == key else at
                parts.append(fact)
            if position < k:
                parts.append(pool[position])
        return parts, at  # at: where the answer's fact is in parts

    def build(k: int) -> str:
        return " ".join(layout(k)[0])

    lo, hi = 0, len(pool)  # largest k whose text fits, by bisection on the (nearly monotone) length
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if count_tokens(build(mid)) <= target_tokens else (lo, mid - 1)
    while lo > 0 and count_tokens(build(lo)) > target_tokens:
        lo -= 1
    parts, at = layout(lo)
    return {"input": " ".join(parts), "question": question, "target": answer, **fact_depth(parts, at)}
