"""Seeded bAbI-style stories (qa1-qa5) hidden in filler text at a target token length — BABILong offline.

Each generator simulates a small world and asks one question whose answer lies in the task's official
label set (:data:`harness.tasks.lch_babilong.scoring.TASK_LABELS`):

* qa1 single supporting fact: people move; "Where is X?"
* qa2 two supporting facts: people move and carry objects; "Where is the <object>?"
* qa3 three supporting facts: "Where was the <object> before the <place>?" (its place before the last move)
* qa4 two-argument relations: "The A is north of the B."; "What is north of the B?" / "What is the B south of?"
* qa5 three-argument relations: "X gave the <object> to Y."; who gave / who received / what was given

:func:`babilong_sample` spreads the story's sentences, in order, through filler sentences until the text
reaches ``target_tokens`` under the caller's token counter (never more).
"""

from __future__ import annotations

import random
from typing import Callable, Sequence

from harness.core.errors import UsageError

PEOPLE = ("Mary", "John", "Daniel", "Sandra")
PLACES = ("bathroom", "bedroom", "garden", "hallway", "kitchen", "office")
OBJECTS = ("apple", "football", "milk")
MOVES = ("moved to", "went to", "journeyed to", "travelled to", "went back to")
GIVERS = ("Bill", "Fred", "Jeff", "Mary")
DIRECTIONS = {"north": "south", "south": "north", "east": "west", "west": "east"}


def _moves(rng: random.Random, n: int) -> tuple[list[str], dict[str, str]]:
    facts, where = [], {}
    for _ in range(n):
        person, place = rng.choice(PEOPLE), rng.choice(PLACES)
        facts.append(f"{person} {rng.choice(MOVES)} the {place}.")
        where[person] = place
    return facts, where


def _qa1(rng: random.Random) -> tuple[list[str], str, str]:
    facts, where = _moves(rng, rng.randint(4, 8))
    person = rng.choice(sorted(where))
    return facts, f"Where is {person}?", where[person]


def _carrying_world(rng: random.Random, steps: int) -> tuple[list[str], dict[str, list[str]]]:
    """People move, pick up and drop objects; returns facts and each object's history of places."""
    facts: list[str] = []
    person_at: dict[str, str] = {}
    holder: dict[str, str | None] = {o: None for o in OBJECTS}
    history: dict[str, list[str]] = {o: [] for o in OBJECTS}
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
        elif held and action < 0.45:
            obj = rng.choice(held)
            holder[obj] = None
            facts.append(f"{person} dropped the {obj}.")
        else:
            place = rng.choice(PLACES)
            person_at[person] = place
            facts.append(f"{person} {rng.choice(MOVES)} the {place}.")
            for obj in held:
                if history[obj][-1] != place:
                    history[obj].append(place)
    return facts, history


def _qa2(rng: random.Random) -> tuple[list[str], str, str]:
    while True:
        facts, history = _carrying_world(rng, rng.randint(8, 14))
        known = [o for o in OBJECTS if history[o]]
        if known:
            obj = rng.choice(known)
            return facts, f"Where is the {obj}?", history[obj][-1]


def _qa3(rng: random.Random) -> tuple[list[str], str, str]:
    while True:
        facts, history = _carrying_world(rng, rng.randint(12, 20))
        moved = [o for o in OBJECTS if len(history[o]) >= 2]
        if moved:
            obj = rng.choice(moved)
            return facts, f"Where was the {obj} before the {history[obj][-1]}?", history[obj][-2]


def _qa4(rng: random.Random) -> tuple[list[str], str, str]:
    a, b, c = rng.sample(PLACES, 3)
    d1, d2 = rng.choice(sorted(DIRECTIONS)), rng.choice(sorted(DIRECTIONS))
    facts = [f"The {a} is {d1} of the {b}.", f"The {c} is {d2} of the {a}."]
    rng.shuffle(facts)
    if rng.random() < 0.5:
        return facts, f"What is {d1} of the {b}?", a
    return facts, f"What is the {b} {DIRECTIONS[d1]} of?", a


def _qa5(rng: random.Random) -> tuple[list[str], str, str]:
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
        return facts, question, answer


GENERATORS: dict[str, Callable[[random.Random], tuple[list[str], str, str]]] = {
    "qa1": _qa1, "qa2": _qa2, "qa3": _qa3, "qa4": _qa4, "qa5": _qa5,
}


def babi_story(task: str, seed: int) -> tuple[list[str], str, str]:
    """``(facts, question, answer)`` of one story, deterministic in ``seed``."""
    if task not in GENERATORS:
        raise UsageError(f"offline bAbI generator covers {', '.join(GENERATORS)}; got {task!r}")
    return GENERATORS[task](random.Random(f"{task}-{seed}"))


def babilong_sample(
    task: str, seed: int, target_tokens: int, count_tokens: Callable[[str], int], filler: Sequence[str]
) -> dict[str, str]:
    """A story spread through filler sentences: ``{"input", "question", "target"}`` with
    ``count_tokens(input) <= target_tokens`` (the story alone must fit)."""
    facts, question, answer = babi_story(task, seed)
    rng = random.Random(f"filler-{task}-{seed}")
    story = " ".join(facts)
    if count_tokens(story) > target_tokens:
        raise UsageError(f"target_tokens={target_tokens} is shorter than the {task} story itself")
    if not filler:
        return {"input": story, "question": question, "target": answer}
    head = list(filler[:20])  # marginal cost per sentence (the counter may include a fixed prompt overhead)
    per_sentence = max(1.0, (count_tokens(" ".join(head)) - count_tokens("")) / len(head))
    offset = rng.randrange(len(filler))
    pool = [filler[(offset + i) % len(filler)] for i in range(int(1.5 * target_tokens / per_sentence) + 2)]

    def build(k: int) -> str:
        # the facts keep their order and land between filler sentences at seeded positions
        slots = sorted(random.Random(f"slots-{task}-{seed}-{k}").choices(range(k + 1), k=len(facts)))
        parts, facts_left = [], iter(facts)
        for position in range(k + 1):
            parts.extend(next(facts_left) for _ in range(slots.count(position)))
            if position < k:
                parts.append(pool[position])
        return " ".join(parts)

    lo, hi = 0, len(pool)  # largest k whose text fits, by bisection on the (nearly monotone) length
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if count_tokens(build(mid)) <= target_tokens else (lo, mid - 1)
    while lo > 0 and count_tokens(build(lo)) > target_tokens:
        lo -= 1
    return {"input": build(lo), "question": question, "target": answer}
