"""Synthetic report-like documents for offline demos and tests, whose early codes and figures are cited much later."""

from __future__ import annotations

import random

_AGENCIES = ["Agency", "Bureau", "Office", "Department", "Commission", "Administration", "Service"]
_TOPICS = ["health", "transport", "energy", "housing", "defense", "education", "water", "farming"]
_VERBS = ["reported", "reviewed", "estimated", "found", "recommended", "audited", "noted"]
_NOUNS = ["program", "contract", "grant", "project", "system", "initiative", "facility"]


def _code(rng: random.Random) -> str:
    return "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ") for _ in range(3)) + f"-{rng.randint(10, 99)}"


def synthetic_report(n_words: int, seed: int) -> str:
    """One report of about ``n_words`` words (deterministic in ``seed``)."""
    rng = random.Random(seed)
    entities = [(_code(rng), rng.choice(_TOPICS), rng.randint(2, 900)) for _ in range(12)]
    parts: list[str] = []
    words = 0
    section = 1
    while words < n_words:
        if rng.random() < 0.08:
            sentence = f"Section {section}."
            section += 1
        else:
            code, topic, amount = rng.choice(entities)
            agency = rng.choice(_AGENCIES)
            sentence = (
                f"The {agency} {rng.choice(_VERBS)} that the {topic} {rng.choice(_NOUNS)} {code} "
                f"cost {amount} million dollars in fiscal year {2000 + amount % 25}."
            )
        parts.append(sentence)
        words += len(sentence.split())
    return " ".join(parts)


def synthetic_reports(n_docs: int, n_words: int, seed: int = 0) -> list[str]:
    """``n_docs`` reports of about ``n_words`` words each."""
    return [synthetic_report(n_words, seed * 100003 + i) for i in range(n_docs)]
