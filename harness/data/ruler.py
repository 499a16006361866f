"""RULER's 13 synthetic tasks: seeded sample generation fitted to a token budget, cached on disk.

Task definitions follow RULER (Hsieh et al., 2024; SPEC.md §6); all prompt wording is our own.

* ``niah_*``: needles ``One special magic <value kind> for <key> is: <value>.`` hidden at depths drawn
  from 40 evenly spaced percentages in a haystack of noise, essays or distractor needles; keys are
  adjective-noun words or UUIDs, values 7-digit numbers, words or UUIDs; several keys (multikey), values
  per key (multivalue) or queried keys (multiquery).
* ``vt``: one chain of 4 hops ``VAR X = 12345``, ``VAR Y = VAR X``... in noise; answer: every variable.
* ``cwe``: a numbered word list, 10 common words x 30 and the rest x 3; answer: the 10 common words.
* ``fwe``: coded words with Zipf counts (alpha 2); answer: the three most frequent.
* ``qa_squad`` / ``qa_hotpot``: the gold paragraphs among distractor paragraphs; answer: the gold answers.

**Fitting.** Every sample draws its content (keys, values, depths, word choices) from
``random.Random(f"{task}-{length}-{index}-{seed}")`` first; only the haystack size ``n`` (noise units,
essay sentences, distractor needles, uncommon words, top-word count or documents) is then searched. A
sample is accepted at the ``n`` whose prompt, counted exactly by :class:`~harness.data.prompt_length.
PromptCounter` (the evaluated tokenizer, chat template included when declared), satisfies
``prompt_tokens + budget <= length`` and leaves less than one average haystack unit unused. The search
starts from a linear model of tokens-vs-``n`` calibrated on two probes and corrects by secant steps
inside a bracket; all samples of one (task, length) are counted in batched tokenizer calls, so a sample
typically costs one or two tokenizations. lm-eval's generator instead grows the haystack in fixed steps,
re-tokenising the whole prompt each time, and shrinks by a fixed step per sample.

**Cache.** Samples are stored under ``<cache>/ruler/`` keyed by a hash of everything they depend on (task,
length, sample count, seed, tokenizer and chat-template fingerprint, haystack sources, generator version):
a second run reads them and generates nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import uuid
import zlib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Sequence

from harness.cache import cache_root
from harness.data import haystacks
from harness.data.prompt_length import PromptCounter

log = logging.getLogger(__name__)

GENERATOR_VERSION = "2"
DEPTHS = tuple(round(100 * i / 39) for i in range(40))  # 40 evenly spaced needle depths, in percent


@dataclass(frozen=True)
class TaskSpec:
    kind: str  # niah | vt | cwe | fwe | qa
    budget: int  # generation budget in tokens (SPEC.md §6)
    params: dict = field(default_factory=dict)
    metric: str = "string_match_all"


def _niah(haystack: str, key: str = "words", value: str = "numbers", n_keys: int = 1, n_values: int = 1,
          n_queries: int = 1) -> TaskSpec:
    return TaskSpec("niah", 128, dict(haystack=haystack, key=key, value=value, n_keys=max(n_keys, n_queries),
                                      n_values=n_values, n_queries=n_queries))


TASKS: dict[str, TaskSpec] = {
    "niah_single_1": _niah("noise"),
    "niah_single_2": _niah("essay"),
    "niah_single_3": _niah("essay", value="uuids"),
    "niah_multikey_1": _niah("essay", n_keys=4),
    "niah_multikey_2": _niah("needle"),
    "niah_multikey_3": _niah("needle", key="uuids", value="uuids"),
    "niah_multivalue": _niah("essay", n_values=4),
    "niah_multiquery": _niah("essay", n_queries=4),
    "vt": TaskSpec("vt", 30, dict(n_chains=1, n_hops=4)),
    "cwe": TaskSpec("cwe", 120, dict(n_common=10, freq_common=30, freq_uncommon=3)),
    "fwe": TaskSpec("fwe", 50, dict(alpha=2.0)),
    "qa_squad": TaskSpec("qa", 32, dict(dataset="squad"), "string_match_part"),
    "qa_hotpot": TaskSpec("qa", 32, dict(dataset="hotpotqa"), "string_match_part"),
}
NIAH_M = ("niah_multikey_1", "niah_multikey_2", "niah_multikey_3", "niah_multivalue", "niah_multiquery")


@dataclass
class Sources:
    """Where haystack text comes from: ``essays`` (path, HF id or ``synthetic``), ``squad`` / ``hotpotqa``
    (official JSON path, ``synthetic``, or None for HF)."""

    essays: str = haystacks.ESSAYS_HF
    squad: str | None = None
    hotpotqa: str | None = None

    def fingerprint(self, spec: TaskSpec) -> str:
        used = []
        if spec.params.get("haystack") == "essay":
            used.append(("essays", self.essays))
        if spec.kind == "qa":
            used.append((spec.params["dataset"], getattr(self, spec.params["dataset"])))
        parts = []
        for name, src in used:
            path = Path(str(src)).expanduser() if src else None
            if path is not None and path.exists():
                files = sorted(path.rglob("*")) if path.is_dir() else [path]
                src = f"{path.resolve()}:" + ",".join(f"{f.name}:{f.stat().st_size}:{int(f.stat().st_mtime)}" for f in files if f.is_file())
            parts.append(f"{name}={src}")
        return ";".join(parts)


# --- one sample: content drawn once, haystack size n searched -------------------------------------------


@dataclass
class Builder:
    """``build(n) -> (input, outputs, gen_prefix)`` for haystack size ``n`` in ``[n_min, n_max]``."""

    build: Callable[[int], tuple[str, list[str], str]]
    n_min: int
    n_max: int
    extra: dict = field(default_factory=dict)
    # Optional: the input text of size n as consecutive segments (``"".join(parts(n)) == build(n)[0]``),
    # each haystack item with its separator, which lets :class:`SegmentCounter` count it additively.
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


def _niah_builder(p: dict, rng: random.Random, length: int, sources: Sources, icl: bool) -> Builder:
    keys, needles, values = [], [], {}
    while len(keys) < p["n_keys"]:
        key = _random_value(rng, p["key"])
        if key not in values:
            keys.append(key)
            values[key] = [_random_value(rng, p["value"]) for _ in range(p["n_values"])]
            needles += [_needle(p["value"], key, v) for v in values[key]]
    rng.shuffle(needles)
    fractions = sorted(d / 100 for d in rng.sample(DEPTHS, len(needles)))
    queries = rng.sample(keys, p["n_queries"])
    answers = [v for q in queries for v in values[q]]
    query = queries[0] if len(queries) == 1 else ", ".join(queries[:-1]) + ", and " + queries[-1]
    single = len(answers) == 1
    kind = _SINGULAR[p["value"]] if single else _PLURAL[p["value"]]
    if single:
        head = f"Somewhere in the following text a special magic {kind} is hidden. Memorize it; you will be asked for it afterwards."
        tail = f"What is the special magic {kind} for {query} mentioned in the text above?"
        prefix = f"The special magic {kind} for {query} mentioned in the text above is"
    else:
        head = f"Somewhere in the following text special magic {kind} are hidden. Memorize them; you will be asked for them afterwards."
        tail = f"What are all the special magic {kind} for {query} mentioned in the text above?"
        prefix = f"The special magic {kind} for {query} mentioned in the text above are"

    if p["haystack"] == "essay":
        sentences = haystacks.essay_sentences(sources.essays)
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

    # distractor needles are all distinct strings, so counting them one by one costs more than counting
    # the whole prompt: only noise and essay haystacks (repeated units) are counted additively
    return Builder(build, 0, n_max, parts=None if p["haystack"] == "needle" else parts)


def _vt_chain(rng: random.Random, n_hops: int) -> tuple[list[str], str, list[str]]:
    value = str(rng.randint(10000, 99999))
    names: list[str] = []
    while len(names) < n_hops + 1:
        name = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(5))
        if name not in names:
            names.append(name)
    statements = [f"VAR {names[0]} = {value}"] + [f"VAR {names[i + 1]} = VAR {names[i]}" for i in range(n_hops)]
    return statements, value, names


def _vt_builder(p: dict, rng: random.Random, length: int, sources: Sources, icl: bool) -> Builder:
    statements, value, names = _vt_chain(rng, p["n_hops"])
    fractions = sorted(rng.random() for _ in statements)
    head = "Memorize the variable assignments hidden in the text below; you will be asked to trace them."

    def body(stmts: list[str], fr: list[float], n: int, val: str) -> tuple[list[str], str]:
        items = _insert([haystacks.NOISE] * n, stmts, fr)
        return ([items[0], *("\n" + item for item in items[1:]),
                 f"\nQuestion: Which variables are assigned the value {val} in the text above?"],
                f"Answer: The variables assigned the value {val} are:")

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

    return Builder(build, 0, max(length // 8, 16), parts=parts)


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
    """A fixed pseudo-random sort key per occurrence (splitmix64 of seed, word and k): growing the list
    inserts items and never reshuffles it, so the token count grows smoothly with its size, which the
    fitting search relies on. Deterministic across processes (no salted ``hash``)."""
    x = (int(seed * (1 << 53)) ^ (zlib.crc32(word.encode()) << 20) ^ k) & 0xFFFFFFFFFFFFFFFF
    x = (x + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 31)


def _cwe_list(words: Sequence[str], counts: Sequence[int], seed: float) -> str:
    items = sorted((_order_key(seed, w, k), w) for w, c in zip(words, counts) for k in range(c))
    return "\n".join(f"{i + 1}. {w}" for i, (_, w) in enumerate(items))


def _cwe_builder(p: dict, rng: random.Random, length: int, sources: Sources, icl: bool) -> Builder:
    n_common, freq_c, freq_u = p["n_common"], p["freq_common"], p["freq_uncommon"]
    n_max = max(length // (2 * freq_u), 8)
    words = _cwe_words(rng, n_common + n_max)
    order_seed = rng.random()
    question = f"Question: What are the {n_common} most common words in the list above?"
    prefix = f"Answer: The {n_common} most common words in the list are:"
    head = f"Below is a numbered list of words. Some words occur more often than others; find the {n_common} most frequent ones."
    example = ""
    if icl:
        ex_rng = random.Random(rng.random())
        ex_words = _cwe_words(ex_rng, n_common + 2 * n_common)
        ex_list = _cwe_list(ex_words, [3] * n_common + [1] * (2 * n_common), ex_rng.random())
        example = f"{ex_list}\n{question}\n{prefix} {' '.join(ex_words[:n_common])}\n\n"

    def build(n: int) -> tuple[str, list[str], str]:
        listing = _cwe_list(words[: n_common + n], [freq_c] * n_common + [freq_u] * n, order_seed)
        return f"{head}\n\n{example}{listing}\n{question}", list(words[:n_common]), prefix

    return Builder(build, 0, n_max, {"freq_common": freq_c})


def _fwe_text(vocab: Sequence[str], top: int, alpha: float, seed: float) -> str:
    items = sorted((_order_key(seed, w, k), w) for r, w in enumerate(vocab, start=1) for k in range(int(top * r ** -alpha)))
    return " ".join(w for _, w in items)


def _fwe_builder(p: dict, rng: random.Random, length: int, sources: Sources, icl: bool) -> Builder:
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
        example = f"{_fwe_text(ex_vocab, 18, alpha, ex_rng.random())}\n{question}\n{prefix} {' '.join(ex_vocab[:3])}\n\n"

    def build(n: int) -> tuple[str, list[str], str]:
        text = _fwe_text(vocab, n, alpha, order_seed)
        return f"{head}\n\n{example}{text}\n{question}", vocab[:3], prefix

    # 18 is the smallest top count whose int(top * r^-2) keeps ranks 1 > 2 > 3 > 4 strictly apart
    return Builder(build, 18, max(length, 18))


def _qa_builder(p: dict, rng: random.Random, length: int, sources: Sources, icl: bool) -> Builder:
    corpus = haystacks.load_qa(p["dataset"], getattr(sources, p["dataset"]))
    question, answers, gold = corpus.questions[rng.randrange(len(corpus.questions))]
    wanted = min(len(corpus.documents), max(length // 16, 8) + len(gold))
    others = [d for d in rng.sample(range(len(corpus.documents)), wanted) if d not in gold]
    keys = {d: rng.random() for d in (*gold, *others)}
    instruction = "Answer the question from the documents. Reply with the answer only, no other words."

    def build(n: int) -> tuple[str, list[str], str]:
        docs = sorted([*gold, *others[: n - len(gold)]], key=lambda d: keys.get(d, 2.0))
        context = "\n\n".join(f"Document {j + 1}:\n{corpus.documents[d]}" for j, d in enumerate(docs))
        return f"{instruction}\n\n{context}\n\n{instruction}\n\nQuestion: {question}", list(answers), "Answer:"

    return Builder(build, len(gold), len(gold) + len(others))


BUILDERS = {"niah": _niah_builder, "vt": _vt_builder, "cwe": _cwe_builder, "fwe": _fwe_builder, "qa": _qa_builder}


# --- fitting ---------------------------------------------------------------------------------------------


class TooShortError(ValueError):
    pass


class SegmentCounter:
    """Exact prompt token counts from cached per-segment counts.

    A prompt rendered as ``pre + s_0 + s_1 + ... + s_k + post`` (``pre`` / ``post``: chat template and
    answer prefix around the input) has ``specials + sum(tokens(segment))`` tokens when every junction
    between adjacent segments is clean: ``tokens(x + y) == tokens(x) + tokens(y)``. Tokenizers built on a
    local pre-tokenizer (byte-level BPE, Metaspace with whitespace splitting) never merge across such a
    junction, and :meth:`count` checks every junction of every prompt it counts (each distinct pair once,
    cached) and returns None when one is not clean, so callers fall back to full tokenization. Segment
    and junction results are cached across samples: an essay sentence is tokenized once per run.
    """

    def __init__(self, counter: PromptCounter) -> None:
        self.counter, self.tok = counter, counter.tokenizer
        self._tokens: dict[str, int] = {}
        self._clean: dict[tuple[str, str], bool] = {}
        self._wrap: dict[str, tuple[str, str, int]] = {}

    def _count_new(self, texts: list[str]) -> None:
        missing = list(dict.fromkeys(t for t in texts if t not in self._tokens))
        if missing:
            for text, ids in zip(missing, self.tok(missing, add_special_tokens=False)["input_ids"]):
                self._tokens[text] = len(ids)

    def wrapping(self, prefix: str) -> tuple[str, str, int]:
        """``(pre, post, n_special)``: the rendered prompt is ``pre + text + post``."""
        if prefix not in self._wrap:
            marker = "\x00\x01\x00"
            pre, post = self.counter.render(marker, prefix).split(marker)
            rendered = self.counter.render("x", prefix)
            flag = self.counter._special_kwargs(rendered)["add_special_tokens"]
            n_special = len(self.tok(rendered, add_special_tokens=flag)["input_ids"]) - len(
                self.tok(rendered, add_special_tokens=False)["input_ids"])
            self._wrap[prefix] = (pre, post, n_special)
        return self._wrap[prefix]

    def count(self, segments: list[str], prefix: str) -> int | None:
        pre, post, n_special = self.wrapping(prefix)
        segments = [s for s in segments if s]
        segments[0], segments[-1] = pre + segments[0], segments[-1] + post
        pairs = list(zip(segments, segments[1:]))
        self._count_new(segments)
        unseen = list(dict.fromkeys(p for p in pairs if p not in self._clean))
        if unseen:
            self._count_new([x + y for x, y in unseen])
            for x, y in unseen:
                self._clean[(x, y)] = self._tokens[x + y] == self._tokens[x] + self._tokens[y]
        if not all(self._clean[p] for p in pairs):
            return None
        return n_special + sum(self._tokens[s] for s in segments)


def _fit_additive(builders: list[Builder], seg: SegmentCounter, target: int, spot_check: int = 50) -> list | None:
    """Additive fitting for builders with ``parts``: for each, the largest ``n`` with an exact count <=
    ``target`` (so ``n + 1`` does not fit). None if a junction is not clean or a spot check (full
    tokenization of sample 0 and every ``spot_check``-th sample) disagrees: the caller then counts fully."""
    results = []
    guess, slope = None, 1.0
    for i, b in enumerate(builders):
        prefix = b.build(b.n_min)[2]

        def count(n: int) -> int | None:
            return seg.count(b.parts(n), prefix)

        lo_c = count(b.n_min) if guess is None or guess <= b.n_min else None
        if guess is None or guess <= b.n_min:
            if lo_c is None:
                return None
            if lo_c > target:
                raise TooShortError(f"the prompt alone needs {lo_c} tokens, more than the {target} available")
        if guess is None:  # the first sample: per-unit cost from a short probe
            probe = min(b.n_max, b.n_min + 16)
            c = count(probe)
            if c is None:
                return None
            slope = max((c - lo_c) / max(probe - b.n_min, 1), 1e-3)
            guess = b.n_min + int((target - lo_c) / slope)
        lo, hi = b.n_min, b.n_max + 1  # count(lo) <= target < count(hi)
        n = min(max(guess, lo + 1), b.n_max) if b.n_max > lo else lo
        if lo_c is None:  # not counted: only known to fit if nothing larger does
            lo_c = -1
        while hi - lo > 1:
            c = count(n)
            if c is None:
                return None
            if c <= target:
                lo, lo_c = n, c
                n += max(1, int((target - c) / slope))  # secant step, then kept inside (lo, hi)
            else:
                hi = n
                n -= max(1, math.ceil((c - target) / slope))
            if hi - lo > 1 and not lo < n < hi:
                n = (lo + hi) // 2
        guess = lo
        if lo_c < 0:
            lo_c = count(lo)
            if lo_c is None:
                return None
            if lo_c > target:
                raise TooShortError(f"the prompt alone needs {lo_c} tokens, more than the {target} available")
        if i % spot_check == 0:
            text, _, prefix = b.build(lo)
            if seg.counter(text, prefix) != lo_c:
                log.warning("RULER additive token count disagreed with full tokenization; counting fully")
                return None
        results.append((lo, lo_c))
    return results


def _fit(builders: list[Builder], counter: PromptCounter, target: int, chunk: int = 16) -> list[tuple[int, int]]:
    """For each builder, ``(n, prompt_tokens)`` with ``prompt_tokens <= target`` and less than one average
    unit left unused (or ``n == n_max``). Raises :class:`TooShortError` when even ``n_min`` is too long."""

    def count(pairs: list[tuple[int, int]]) -> list[int]:
        rendered = []
        for b, n in pairs:
            text, _, prefix = builders[b].build(n)
            rendered.append(counter.render(text, prefix))
        return counter.count_rendered(rendered)

    first = builders[0]
    lo_n = first.n_min
    hi_n = min(first.n_max, max(first.n_min + 1, first.n_min + 16))
    c_lo, c_hi = count([(0, lo_n), (0, hi_n)])
    if c_lo > target:
        raise TooShortError(f"the prompt alone needs {c_lo} tokens, more than the {target} available")
    slope = max((c_hi - c_lo) / max(hi_n - lo_n, 1), 1e-3)
    results: list[tuple[int, int] | None] = [None] * len(builders)
    # per builder: best fitting (n, tokens) and smallest n known not to fit
    state = [{"fit": None, "over": b.n_max + 1, "guess": min(b.n_max, max(b.n_min, lo_n + int((target - c_lo) / slope)))}
             for b in builders]
    pending = list(range(len(builders)))
    for _ in range(64):
        if not pending:
            break
        for start in range(0, len(pending), chunk):
            batch = pending[start : start + chunk]
            done = sorted(r[0] for r in results[max(0, batch[0] - chunk) : batch[0]] if r is not None)
            if done:  # samples of one task fit at similar sizes: start this chunk where the last one ended
                for b in batch:
                    s = state[b]
                    if s["fit"] is None and s["over"] > builders[b].n_max:
                        s["guess"] = min(builders[b].n_max, max(builders[b].n_min, done[len(done) // 2]))
            counts = count([(b, state[b]["guess"]) for b in batch])
            for b, c in zip(batch, counts):
                s, n = state[b], state[b]["guess"]
                if c <= target:
                    s["fit"] = (n, c) if s["fit"] is None or n > s["fit"][0] else s["fit"]
                else:
                    s["over"] = min(s["over"], n)
                fit_n, fit_c = s["fit"] if s["fit"] else (builders[b].n_min - 1, None)
                if s["fit"] and (target - fit_c < slope or fit_n + 1 >= s["over"]):
                    results[b] = s["fit"]
                    continue
                if s["fit"] is None and n <= builders[b].n_min:
                    raise TooShortError(f"the prompt alone needs {c} tokens, more than the {target} available")
                # secant step from this probe (through this sample's previous probe when there is one:
                # units differ in size between samples), kept inside the bracket
                prev = s.get("prev")
                own = (c - prev[1]) / (n - prev[0]) if prev and prev[0] != n and c != prev[1] else 0.0
                s["prev"] = (n, c)
                step = (target - c) / (own if own > 0 else slope)
                nxt = n + (math.floor(step) if step > 0 else -math.ceil(-step) - 1)
                s["guess"] = min(max(nxt, fit_n + 1, builders[b].n_min), s["over"] - 1)
                if s["guess"] <= fit_n:
                    s["guess"] = (fit_n + s["over"]) // 2
        pending = [b for b in pending if results[b] is None]
    if pending:
        raise RuntimeError(f"RULER fitting did not converge for {len(pending)} samples")
    return results  # type: ignore[return-value]


# --- datasets ---------------------------------------------------------------------------------------------


def _cache_file(task: str, length: int, key: dict) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:20]
    return cache_root("ruler", f"{task}-{length}-{digest}.jsonl")


def generate(task: str, length: int, num_samples: int, counter: PromptCounter, seed: int = 42,
             sources: Sources | None = None, icl: bool = True, use_cache: bool = True) -> list[dict[str, Any]]:
    """``num_samples`` RULER samples of ``task`` fitted to ``length`` tokens (prompt + generation budget).

    Rows: ``index, input, outputs, gen_prefix, length, prompt_tokens, max_gen_toks, task`` (+ ``n_units``)."""
    if task not in TASKS:
        raise ValueError(f"RULER task {task!r} is unknown; allowed: {', '.join(TASKS)}")
    spec, sources = TASKS[task], sources or Sources()
    key = {"task": task, "spec": spec.params, "length": length, "n": num_samples, "seed": seed, "icl": icl,
           "tokenizer": counter.fingerprint(), "sources": sources.fingerprint(spec), "version": GENERATOR_VERSION}
    path = _cache_file(task, length, key)
    if use_cache and path.is_file():
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    target = length - spec.budget
    params = dict(spec.params)
    while True:
        builders = [BUILDERS[spec.kind](params, random.Random(f"{task}-{length}-{i}-{seed}"), length, sources, icl)
                    for i in range(num_samples)]
        try:
            fitted = None
            if builders[0].parts is not None:
                fitted = _fit_additive(builders, SegmentCounter(counter), target)
            if fitted is None:
                fitted = _fit(builders, counter, target)
            break
        except TooShortError as err:
            # Short lengths: first fewer repeats of cwe's common words (they stay the most common), then
            # no worked example; both are recorded in the rows.
            if spec.kind == "cwe" and params["freq_common"] > params["freq_uncommon"] + 1:
                params["freq_common"] = max(params["freq_uncommon"] + 1, params["freq_common"] // 2)
                continue
            if icl and spec.kind in ("vt", "cwe", "fwe"):
                icl = False
                continue
            raise TooShortError(f"RULER {task} at length {length}: {err}") from None
    rows = []
    for i, (b, (n, tokens)) in enumerate(zip(builders, fitted)):
        text, outputs, prefix = b.build(n)
        rows.append({"index": i, "task": task, "input": text, "outputs": outputs, "gen_prefix": prefix,
                     "length": length, "prompt_budget": length, "prompt_tokens": tokens, "max_gen_toks": spec.budget, "n_units": n,
                     "icl_example": icl and spec.kind in ("vt", "cwe", "fwe"),
                     **b.extra})
    if use_cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{random.randrange(1 << 30)}")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        tmp.replace(path)
    return rows


def dataset_from_metadata(metadata: dict) -> dict:
    """lm-eval ``custom_dataset``: samples of metadata ``ruler_task`` at every length of ``lengths`` (or
    lm-eval's name ``max_seq_lengths``; default 4096). Other keys: ``num_samples`` (500), ``seed`` (42),
    ``essays``, ``squad``, ``hotpotqa`` (see :class:`Sources`), ``icl_example`` (true), ``chat_template``
    (set it when running with ``--apply_chat_template``), ``tokenizer`` / ``pretrained``."""
    import datasets

    from harness.data.prompt_length import counter_from_metadata
    from harness.data.lengths import length_tokens, parse_lengths

    lengths = [length_tokens(x) for x in parse_lengths(metadata.get("lengths") or metadata.get("max_seq_lengths"), [4096])]
    counter = counter_from_metadata(metadata)
    sources = Sources(essays=metadata.get("essays") or haystacks.ESSAYS_HF, squad=metadata.get("squad"),
                      hotpotqa=metadata.get("hotpotqa"))
    rows = [row for length in lengths
            for row in generate(metadata["ruler_task"], int(length), int(metadata.get("num_samples", 500)), counter,
                                seed=int(metadata.get("seed", 42)), sources=sources,
                                icl=bool(metadata.get("icl_example", True)))]
    return {"test": datasets.Dataset.from_list(rows)}
