"""Per-task seeded RULER sample builders and their haystack sources. A builder draws all a sample holds from ``rng`` at
once; the :class:`Builder` renders it at any haystack size ``n`` in ``[n_min, n_max]`` without drawing again, so the
fitting search may try sizes freely. Prompt wording is our own."""

from __future__ import annotations

import random
import uuid
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from harness.data import haystacks
from harness.data.depth import depth_fields
from harness.tasks.lch_ruler.definitions import DEPTHS

LAYER = "data"  # harness/devtools/layers.py

if TYPE_CHECKING:
    from harness.tasks.lch_ruler.dataset import RulerOptions


def source_fingerprint(src: str | None) -> str | None:
    """What the text read from ``src`` depends on (for the cache key): a local file or folder by its resolved path and
    its files' names, sizes and mtimes; anything else (an HF id, ``synthetic``, None) by itself. A folder is walked once
    per process while its own entry is unchanged; the shipped essays' name stands for their folder."""
    path = Path(haystacks.essays_path(str(src))).expanduser() if src else None
    if path is None or not path.exists():
        return src
    top = path.stat()
    memo = (str(path.resolve()), top.st_mtime_ns, top.st_size)
    if memo not in _FINGERPRINTS:
        files = sorted(path.rglob("*")) if path.is_dir() else [path]
        _FINGERPRINTS[memo] = f"{path.resolve()}:" + ",".join(
            f"{f.name}:{f.stat().st_size}:{int(f.stat().st_mtime)}" for f in files if f.is_file()
        )
    return _FINGERPRINTS[memo]


_FINGERPRINTS: dict[tuple[str, int, int], str] = {}  # (resolved path, its mtime and size) -> fingerprint


@dataclass
class Builder:
    """``build(n) -> (input, outputs, gen_prefix)`` for ``n`` in ``[n_min, n_max]``; every input starts with
    ``instruction`` and ends with ``question``, and the context between them is all a truncation policy may cut."""

    build: Callable[[int], tuple[str, list[str], str]]
    n_min: int
    n_max: int
    extra: dict = field(default_factory=dict)
    instruction: str = ""
    question: str = ""
    # optional: the input as segments (``"".join(parts(n)) == build(n)[0]``), for SegmentCounter's additive count
    parts: Callable[[int], list[str]] | None = None


def _random_value(rng: random.Random, kind: str) -> str:
    if kind == "numbers":
        return str(rng.randint(1_000_000, 9_999_999))
    if kind == "words":
        words = haystacks.word_lists()
        return f"{rng.choice(words['adjective'])}-{rng.choice(words['noun'])}"
    if kind == "uuids":
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))
    raise ValueError(f"unknown needle kind {kind!r}")


_SINGULAR = {"numbers": "number", "words": "word", "uuids": "UUID"}
_PLURAL = {"numbers": "numbers", "words": "words", "uuids": "UUIDs"}


def _needle(kind: str, key: str, value: str) -> str:
    return f"One special magic {_SINGULAR[kind]} for {key} is: {value}."


def _insert(units: list[str], items: Sequence[str], fractions: Sequence[float]) -> list[str]:
    """``items`` inserted (in order) before unit ``int(f * len(units))`` for their sorted fractions."""
    out, positions = list(units), [int(f * len(units)) for f in fractions]
    for shift, (pos, item) in enumerate(sorted(zip(positions, items), key=lambda p: p[0])):
        out.insert(pos + shift, item)
    return out


def niah_builder(p: dict, rng: random.Random, length: int, options: RulerOptions, icl: bool) -> Builder:
    """Needle(s) in a haystack of noise lines, essay sentences or distractor needles; ``n`` counts those units."""
    needles: list[str] = []
    values: dict[str, list[str]] = {}  # each key's, in the order the keys were drawn
    while len(values) < p["n_keys"]:
        key = _random_value(rng, p["key"])
        if key not in values:
            values[key] = [_random_value(rng, p["value"]) for _ in range(p["n_values"])]
            needles += [_needle(p["value"], key, v) for v in values[key]]
    rng.shuffle(needles)
    drawn = sorted(rng.sample(DEPTHS, len(needles)))  # needle i goes at depth drawn[i]
    fractions = [d / 100 for d in drawn]
    queries = rng.sample(list(values), p["n_queries"])
    answers = [v for q in queries for v in values[q]]
    # the depth recorded: the mean drawn depth of the needles holding an answer (distractor keys' needles aside)
    asked = {_needle(p["value"], q, v) for q in queries for v in values[q]}
    answer_depths = [d for d, needle in zip(drawn, needles) if needle in asked]
    depth = {**depth_fields(sum(answer_depths) / len(answer_depths)), "needle_depths": answer_depths}
    query = queries[0] if len(queries) == 1 else ", ".join(queries[:-1]) + ", and " + queries[-1]
    single = len(answers) == 1
    kind = _SINGULAR[p["value"]] if single else _PLURAL[p["value"]]
    if single:
        head = (
            f"Somewhere in the following text a special magic {kind} is hidden. "
            "Memorize it; you will be asked for it afterwards."
        )
        tail = f"What is the special magic {kind} for {query} mentioned in the text above?"
        prefix = f"The special magic {kind} for {query} mentioned in the text above is"
    else:
        head = (
            f"Somewhere in the following text special magic {kind} are hidden. "
            "Memorize them; you will be asked for them afterwards."
        )
        tail = f"What are all the special magic {kind} for {query} mentioned in the text above?"
        prefix = f"The special magic {kind} for {query} mentioned in the text above are"

    if p["haystack"] == "essay":
        sentences = haystacks.essay_sentences(options.essays)
        sep, n_max = " ", max(length, 64)  # a sentence is more than one token

        def units(n: int) -> list[str]:
            return [sentences[i % len(sentences)] for i in range(n)]
    elif p["haystack"] == "noise":
        sep, n_max = "\n", max(length // 8, 16)

        def units(n: int) -> list[str]:
            return [haystacks.NOISE] * n
    else:  # distractor needles, drawn from their own seeded stream so that n only truncates it
        sep, n_max = "\n", max(length // 8, 16)
        stream = random.Random(rng.random())
        distractors: list[str] = []

        def units(n: int) -> list[str]:
            while len(distractors) < n:
                k = _random_value(stream, p["key"])
                if k not in values:
                    distractors.append(_needle(p["value"], k, _random_value(stream, p["value"])))
            return distractors[:n]

    def parts(n: int) -> list[str]:
        items = _insert(units(n), needles, fractions)
        return [f"{head}\n{items[0]}", *(sep + item for item in items[1:]), f"\n{tail}"]

    def build(n: int) -> tuple[str, list[str], str]:
        return "".join(parts(n)), answers, prefix

    # distinct distractor needles cost more counted one by one than whole: only repeated units are counted additively
    return Builder(
        build,
        0,
        n_max,
        depth,
        parts=None if p["haystack"] == "needle" else parts,
        instruction=f"{head}\n",
        question=f"\n{tail}",
    )


def _vt_chain(rng: random.Random, n_hops: int) -> tuple[list[str], str, list[str]]:
    value = str(rng.randint(10000, 99999))
    names: list[str] = []
    while len(names) < n_hops + 1:
        name = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(5))
        if name not in names:
            names.append(name)
    statements = [f"VAR {names[0]} = {value}"] + [f"VAR {names[i + 1]} = VAR {names[i]}" for i in range(n_hops)]
    return statements, value, names


def vt_builder(p: dict, rng: random.Random, length: int, options: RulerOptions, icl: bool) -> Builder:
    """One chain of ``n_hops`` variable assignments in ``n`` noise lines (plus a worked example with ``icl``)."""
    statements, value, names = _vt_chain(rng, p["n_hops"])
    fractions = sorted(rng.random() for _ in statements)
    head = "Memorize the variable assignments hidden in the text below; you will be asked to trace them."

    def body(stmts: list[str], fr: list[float], n: int, val: str) -> tuple[list[str], str]:
        items = _insert([haystacks.NOISE] * n, stmts, fr)
        return (
            [
                items[0],
                *("\n" + item for item in items[1:]),
                f"\nQuestion: Which variables are assigned the value {val} in the text above?",
            ],
            f"Answer: The variables assigned the value {val} are:",
        )

    example = ""
    if icl:  # one worked example with a short haystack, its own seeded chain
        ex_rng = random.Random(rng.random())
        ex_statements, ex_value, ex_names = _vt_chain(ex_rng, p["n_hops"])
        ex_parts, ex_prefix = body(ex_statements, sorted(ex_rng.random() for _ in ex_statements), 3, ex_value)
        example = f"{''.join(ex_parts)}\n{ex_prefix} {' '.join(ex_names)}\n\n"
    prefix = body(statements, fractions, 0, value)[1]

    def parts(n: int) -> list[str]:
        segments = body(statements, fractions, n, value)[0]
        return [f"{head}\n\n{example}{segments[0]}", *segments[1:]]

    def build(n: int) -> tuple[str, list[str], str]:
        return "".join(parts(n)), names, prefix

    return Builder(
        build,
        0,
        max(length // 8, 16),
        parts=parts,
        instruction=f"{head}\n\n{example}",
        question=body(statements, fractions, 0, value)[0][-1],
    )


@lru_cache(maxsize=8)
def _cwe_pool(count: int) -> tuple[str, ...]:
    pool = haystacks.common_words()
    if count > len(pool):  # long contexts need more distinct words than the lists hold
        lists = haystacks.word_lists()
        pool += tuple(f"{a}-{n}" for a in lists["adjective"][:200] for n in lists["noun"][: 1 + count // 200])
    return pool


def _cwe_words(rng: random.Random, count: int) -> list[str]:
    return rng.sample(_cwe_pool(count), count)


def _order_key(seed: float, word: str, k: int) -> int:
    """A fixed pseudo-random sort key per occurrence (splitmix64 of seed, word and k, stable across processes): growing
    the list inserts items and never reshuffles it, so its token count grows smoothly, as the fitting search needs."""
    x = (int(seed * (1 << 53)) ^ (zlib.crc32(word.encode()) << 20) ^ k) & 0xFFFFFFFFFFFFFFFF
    x = (x + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 31)


def _cwe_list(words: Sequence[str], counts: Sequence[int], seed: float) -> str:
    items = sorted((_order_key(seed, w, k), w) for w, c in zip(words, counts) for k in range(c))
    return "\n".join(f"{i + 1}. {w}" for i, (_, w) in enumerate(items))


def cwe_builder(p: dict, rng: random.Random, length: int, options: RulerOptions, icl: bool) -> Builder:
    """A numbered word list: ``n_common`` words ``freq_common`` times and ``n`` uncommon words
    ``freq_uncommon`` times each, in a fixed pseudo-random order."""
    n_common, freq_c, freq_u = p["n_common"], p["freq_common"], p["freq_uncommon"]
    n_max = max(length // (2 * freq_u), 8)
    words = _cwe_words(rng, n_common + n_max)
    order_seed = rng.random()
    question = f"Question: What are the {n_common} most common words in the list above?"
    prefix = f"Answer: The {n_common} most common words in the list are:"
    head = (
        "Below is a numbered list of words. Some words occur more often than others; "
        f"find the {n_common} most frequent ones."
    )
    example = ""
    if icl:
        ex_rng = random.Random(rng.random())
        ex_words = _cwe_words(ex_rng, n_common + 2 * n_common)
        ex_list = _cwe_list(ex_words, [3] * n_common + [1] * (2 * n_common), ex_rng.random())
        example = f"{ex_list}\n{question}\n{prefix} {' '.join(ex_words[:n_common])}\n\n"

    def build(n: int) -> tuple[str, list[str], str]:
        listing = _cwe_list(words[: n_common + n], [freq_c] * n_common + [freq_u] * n, order_seed)
        return f"{head}\n\n{example}{listing}\n{question}", list(words[:n_common]), prefix

    return Builder(
        build, 0, n_max, {"freq_common": freq_c}, instruction=f"{head}\n\n{example}", question=f"\n{question}"
    )


def _fwe_text(vocab: Sequence[str], top: int, alpha: float, seed: float) -> str:
    items = sorted(
        (_order_key(seed, w, k), w) for r, w in enumerate(vocab, start=1) for k in range(int(top * r**-alpha))
    )
    return " ".join(w for _, w in items)


def fwe_builder(p: dict, rng: random.Random, length: int, options: RulerOptions, icl: bool) -> Builder:
    """Coded words with Zipf counts ``int(n * rank^-alpha)``: ``n`` is the count of the most frequent word."""
    alpha = p["alpha"]

    def vocab_of(r: random.Random, size: int) -> list[str]:
        words: dict[str, None] = {}  # insertion-ordered set
        while len(words) < size:
            words.setdefault("".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(6)))
        return list(words)

    vocab = vocab_of(rng, max(10, length // 50))
    order_seed = rng.random()
    head = "Below is a text of coded words. Find the three coded words that occur most often in it."
    question = "Question: Which three coded words occur most often in the coded text above?"
    prefix = "Answer: The three most frequent coded words are:"
    example = ""
    if icl:
        ex_rng = random.Random(rng.random())
        ex_vocab = vocab_of(ex_rng, 10)
        example = (
            f"{_fwe_text(ex_vocab, 18, alpha, ex_rng.random())}\n{question}\n{prefix} {' '.join(ex_vocab[:3])}\n\n"
        )

    def build(n: int) -> tuple[str, list[str], str]:
        text = _fwe_text(vocab, n, alpha, order_seed)
        return f"{head}\n\n{example}{text}\n{question}", vocab[:3], prefix

    # 18 is the smallest top count whose int(top * r^-2) keeps ranks 1 > 2 > 3 > 4 strictly apart
    return Builder(build, 18, max(length, 18), instruction=f"{head}\n\n{example}", question=f"\n{question}")


def qa_builder(p: dict, rng: random.Random, length: int, options: RulerOptions, icl: bool) -> Builder:
    """A question's gold paragraphs among ``n - len(gold)`` distractor paragraphs of the same corpus."""
    corpus = haystacks.load_qa(p["dataset"], getattr(options, p["dataset"]))
    question, answers, gold = corpus.questions[rng.randrange(len(corpus.questions))]
    wanted = min(len(corpus.documents), max(length // 16, 8) + len(gold))
    others = [d for d in rng.sample(range(len(corpus.documents)), wanted) if d not in gold]
    keys = {d: rng.random() for d in (*gold, *others)}
    instruction = "Answer the question from the documents. Reply with the answer only, no other words."

    def build(n: int) -> tuple[str, list[str], str]:
        docs = sorted([*gold, *others[: n - len(gold)]], key=lambda d: keys.get(d, 2.0))
        context = "\n\n".join(f"Document {j + 1}:\n{corpus.documents[d]}" for j, d in enumerate(docs))
        return f"{instruction}\n\n{context}\n\n{instruction}\n\nQuestion: {question}", list(answers), "Answer:"

    return Builder(
        build,
        len(gold),
        len(gold) + len(others),
        instruction=f"{instruction}\n\n",
        question=f"\n\n{instruction}\n\nQuestion: {question}",
    )


# TaskSpec.kind -> its builder
BUILDERS: dict[str, Callable[[dict, random.Random, int, RulerOptions, bool], Builder]] = {
    "niah": niah_builder,
    "vt": vt_builder,
    "cwe": cwe_builder,
    "fwe": fwe_builder,
    "qa": qa_builder,
}
