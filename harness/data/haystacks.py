"""Text sources for RULER's synthetic tasks: a fixed noise paragraph, essays (local files, HF
``baber/paul_graham_essays``, the essays shipped with the package (:data:`BUILTIN_ESSAYS`) or ``synthetic``),
``wonderwords`` word lists, and QA corpora (SQuAD v2, HotpotQA distractor: official JSON, HF or ``synthetic``) as
:class:`QACorpus`, each question with its gold documents' indices."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.core.errors import UsageError, check_known, missing_data_on_error
from harness.data.documents import MissingDataError, load_documents

NOISE = (
    "The river runs down to the sea. The hills stay quiet at dawn. The clouds drift slowly east. "
    "Birds sing in the old oak. The day ends and night comes."
)
SYNTHETIC = "synthetic"
ESSAYS_HF = "baber/paul_graham_essays"
# Five essays written for this project (original prose, the package's license), 2,313-2,635 SmolLM2 tokens each:
# real prose where no other corpus is at hand (``lch demo`` installed away from ../shared; RULER essays / BABILong
# filler)
BUILTIN_ESSAYS = "lch-essays"
BUILTIN_ESSAYS_DIR = Path(__file__).with_name("lch_essays")
SQUAD_HF = ("rajpurkar/squad_v2", None, "validation")
HOTPOT_HF = ("hotpotqa/hotpot_qa", "distractor", "validation")

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(\[])")


def split_sentences(text: str) -> list[str]:
    """Sentences of whitespace-normalised text, split after . ! ? before a capital or opening mark (NLTK-free)."""
    return [s for s in _SENTENCE_END.split(" ".join(text.split())) if s]


@lru_cache(maxsize=1)
def word_lists() -> dict[str, tuple[str, ...]]:
    """Sorted, lower-case, alphabetic nouns / adjectives / verbs from ``wonderwords``."""
    from wonderwords import RandomWord

    rw = RandomWord()
    return {
        cat: tuple(sorted({w.lower() for w in rw.filter(include_categories=[cat]) if w.isalpha()}))
        for cat in ("noun", "adjective", "verb")
    }


@lru_cache(maxsize=1)
def word_lists_digest() -> str:
    """A digest of :func:`word_lists` (a cache key part: another ``wonderwords`` release may list other words)."""
    import hashlib

    return hashlib.sha256(json.dumps(word_lists(), sort_keys=True).encode()).hexdigest()[:16]


@lru_cache(maxsize=1)
def common_words() -> tuple[str, ...]:
    lists = word_lists()
    return tuple(sorted(set(lists["noun"]) | set(lists["adjective"]) | set(lists["verb"])))


def synthetic_prose(n_sentences: int, seed: int = 0) -> str:
    """Seeded filler prose: ``The <adj> <noun> <verb>s near the <noun>.`` style sentences."""
    rng = random.Random(f"prose-{seed}")
    w = word_lists()
    patterns = (
        "The {a} {n} {v}s near the {n2}.",
        "A {a} {n} can {v} the {n2}.",
        "Every {n} wants to {v} a {a} {n2}.",
        "Nobody saw the {a} {n} {v} by the {n2}.",
    )
    return " ".join(
        rng.choice(patterns).format(
            a=rng.choice(w["adjective"]), n=rng.choice(w["noun"]), v=rng.choice(w["verb"]), n2=rng.choice(w["noun"])
        )
        for _ in range(n_sentences)
    )


def essays_path(source: str) -> str:
    """``source`` with :data:`BUILTIN_ESSAYS` replaced by the folder it names; any other source unchanged."""
    return str(BUILTIN_ESSAYS_DIR) if source == BUILTIN_ESSAYS else source


@lru_cache(maxsize=4)
def essay_sentences(source: str = ESSAYS_HF) -> tuple[str, ...]:
    """Sentences of the essay haystack named by ``source`` (see module docstring)."""
    if source == SYNTHETIC:
        return tuple(split_sentences(synthetic_prose(20000)))
    source = essays_path(source)
    if Path(source).expanduser().exists():
        docs = load_documents(data_files=source)
    elif source == ESSAYS_HF:
        try:
            docs = load_documents(hf_dataset=source, hf_split="train")
        except MissingDataError:
            raise MissingDataError(
                f"RULER essays: {ESSAYS_HF} is not in the HF cache; download it, or pass --metadata "
                '\'{"essays": "<folder of .txt essays>"}\' (or "synthetic" for a smoke run)'
            ) from None
    else:
        raise MissingDataError(
            f"RULER essays: {source} is neither a local path nor {ESSAYS_HF!r} nor {BUILTIN_ESSAYS!r}"
        )
    sentences = tuple(s for d in docs for s in split_sentences(d["text"]))
    if not sentences:
        raise UsageError(f"RULER essays: {source} holds no text")
    return sentences


@dataclass(frozen=True)
class QACorpus:
    documents: tuple[str, ...]
    questions: tuple[tuple[str, tuple[str, ...], tuple[int, ...]], ...]  # (question, answers, gold doc ids)


def _corpus(pairs: list[tuple[str, list[str], list[str]]]) -> QACorpus:
    """Deduplicate documents; ``pairs`` = (question, answers, gold document texts)."""
    index: dict[str, int] = {}
    questions = []
    for question, answers, golds in pairs:
        ids = tuple(index.setdefault(doc, len(index)) for doc in golds)
        if answers:
            questions.append((question, tuple(answers), ids))
    return QACorpus(tuple(index), tuple(questions))


def _squad_pairs(rows: list[dict]) -> list[tuple[str, list[str], list[str]]]:
    """Official SQuAD v2 JSON ``data`` articles -> answerable questions (impossible ones skipped)."""
    pairs = []
    for article in rows:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                if not qa.get("is_impossible", False) and qa["answers"]:
                    pairs.append((qa["question"], [a["text"] for a in qa["answers"]], [paragraph["context"]]))
    return pairs


def _hotpot_pairs(rows: list[dict]) -> list[tuple[str, list[str], list[str]]]:
    """HotpotQA rows (official or HF context) -> each question with all its paragraphs as documents, as RULER does."""
    pairs = []
    for row in rows:
        ctx = row["context"]
        paragraphs = list(zip(ctx["title"], ctx["sentences"])) if isinstance(ctx, dict) else [tuple(p) for p in ctx]
        pairs.append((row["question"], [row["answer"]], [f"{t}\n{''.join(s)}" for t, s in paragraphs]))
    return pairs


def _synthetic_qa(n: int = 1000) -> QACorpus:
    """Seeded stand-in QA for offline smoke runs: each document states one project's code word."""
    w = word_lists()
    rng = random.Random("synthetic-qa")
    pairs = []
    for i in range(n):
        project = f"{rng.choice(w['adjective'])}-{rng.choice(w['noun'])}-{i}"
        answer = rng.choice(w["noun"])
        doc = (
            f"{synthetic_prose(4, seed=i)} The code word of project {project} is {answer}. "
            f"{synthetic_prose(3, seed=-i - 1)}"
        )
        pairs.append((f"What is the code word of project {project}?", [answer], [doc]))
    return _corpus(pairs)


def _squad_hub_pairs(rows: list[dict]) -> list[tuple[str, list[str], list[str]]]:
    """HF SQuAD v2 rows are flat: one question per row, answers as ``{"text": [...]}``."""
    return [(r["question"], list(r["answers"]["text"]), [r["context"]]) for r in rows if r["answers"]["text"]]


@dataclass(frozen=True)
class QaSource:
    """A QA corpus RULER's qa tasks read: its HF dataset ``(name, config, split)``, the official file's rows as
    ``(question, answers, gold documents)`` pairs, and the HF rows'."""

    hub: tuple[str, str | None, str]
    official: Callable[[Any], list[tuple[str, list[str], list[str]]]]
    hub_rows: Callable[[list[dict]], list[tuple[str, list[str], list[str]]]]


# the qa tasks' corpora, by the option (and TaskSpec ``dataset``) that names each one's file
QA_SOURCES = {
    "squad": QaSource(SQUAD_HF, lambda raw: _squad_pairs(raw["data"]), _squad_hub_pairs),
    "hotpotqa": QaSource(HOTPOT_HF, _hotpot_pairs, _hotpot_pairs),
}


@lru_cache(maxsize=4)
def load_qa(dataset: str, source: str | None = None) -> QACorpus:
    """``dataset``: a key of :data:`QA_SOURCES`; ``source`` = local official JSON, ``synthetic`` or None (HF)."""
    check_known("RULER QA dataset", dataset, QA_SOURCES)
    if source == SYNTHETIC:
        return _synthetic_qa()
    spec = QA_SOURCES[dataset]
    if source:
        path = Path(source).expanduser()
        if not path.is_file():
            raise MissingDataError(f"RULER {dataset}: {path} does not exist; put the official dev JSON there")
        return _corpus(spec.official(json.loads(path.read_text(encoding="utf-8"))))
    name, config, split = spec.hub
    with missing_data_on_error(
        f"RULER {dataset}: HF {name} is not in the HF cache",
        f'download it or pass --metadata \'{{"{dataset}": "<official dev JSON>"}}\'',
    ):
        import datasets

        rows = list(datasets.load_dataset(name, config, split=split))
    return _corpus(spec.hub_rows(rows))
