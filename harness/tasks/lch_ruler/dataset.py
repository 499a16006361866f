"""RULER's 13 synthetic tasks (docs/formulas.md §6; wording ours), seeded and cached: sample ``i`` draws its content
from ``random.Random(f"{task}-{length}-{i}-{seed}")``, then only its haystack size ``n`` is searched so that
``prompt_tokens + budget <= length`` with less than one haystack unit unused."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from harness.core.errors import UsageError, check_known
from harness.core.files import entry_lock
from harness.core.options import MAX_SAMPLES, MAX_SEED, MAX_TOKENS, option
from harness.data import haystacks
from harness.data.inputs import Input
from harness.data.lengths import check_lengths, length_tokens
from harness.data.prompt_tokens import PromptCounter, PromptOptions, counter_for
from harness.tasks.lch_ruler import fitting
from harness.tasks.lch_ruler.builders import BUILDERS, Builder
from harness.tasks.lch_ruler.cache import cache_path, read_counts, read_rows, write_rows
from harness.tasks.lch_ruler.definitions import DEPTHS, GENERATOR_VERSION, TASKS, TaskSpec
from harness.tasks.lch_ruler.fitting import SegmentCounter, SourceTooShortError, TooShortError

LAYER = "data"  # harness/devtools/layers.py

__all__ = [
    "BUILDERS",
    "DEPTHS",
    "GENERATOR_VERSION",
    "TASKS",
    "Builder",
    "RulerOptions",
    "SegmentCounter",
    "Sources",
    "SourceTooShortError",
    "TaskSpec",
    "TooShortError",
    "generate",
    "ruler_dataset",
]


@dataclasses.dataclass(frozen=True)
class RulerOptions(PromptOptions):
    """Options of one RULER task: which task, at which lengths, how many samples, from which sources."""

    ruler_task: str | None = option(None, "RULER task of a subtask YAML", choices=tuple(TASKS), cache_key="value")
    lengths: tuple[int | str, ...] | None = option(
        None,
        "context lengths to generate samples at (token counts or k-labels; default max_seq_lengths, else 4096)",
        cache_key="entry",
    )
    max_seq_lengths: tuple[int | str, ...] = option(
        (4096,), "lengths (lm-eval RULER spelling)", nonempty=True, low=1, high=MAX_TOKENS, cache_key="entry"
    )
    num_samples: int = option(500, "samples per length", low=1, high=MAX_SAMPLES, cache_key="value")
    seed: int = option(42, "random seed of sampling", low=0, high=MAX_SEED, cache_key="value")
    essays: str = option(
        haystacks.ESSAYS_HF,
        f"folder of essays (RULER haystack): path, HF id, {haystacks.BUILTIN_ESSAYS} (shipped) or synthetic",
        path=True,
        cache_key="source",
    )
    squad: str | None = option(None, "SQuAD v2 file for RULER qa_squad (or synthetic)", path=True, cache_key="source")
    hotpotqa: str | None = option(
        None, "HotpotQA file for RULER qa_hotpot (or synthetic)", path=True, cache_key="source"
    )
    icl_example: bool = option(True, "RULER worked example in the prompt", cache_key="value")

    def __post_init__(self) -> None:
        if self.lengths is not None and not self.lengths:
            raise UsageError("lengths must not be empty, got ()")
        check_lengths(self.length_list(), self.num_samples, 1, MAX_TOKENS, MAX_SAMPLES)

    def length_list(self) -> tuple[int | str, ...]:
        """The lengths of this run: ``lengths``, else lm-eval's ``max_seq_lengths``."""
        return self.lengths or self.max_seq_lengths

    def source(self) -> str | None:
        """The source option this task's haystack reads: a qa task's ``dataset``, ``essays`` for an essay haystack;
        None for a generated haystack."""
        params = TASKS[str(self.ruler_task)].params
        return params.get("dataset", "essays" if params.get("haystack") == "essay" else None)

    def unused(self) -> set[str]:
        """The source options (:data:`SOURCE_OPTIONS`) this task does not read."""
        return set(SOURCE_OPTIONS) - {self.source()} if self.ruler_task in TASKS else set()

    def inputs(self) -> list[Input]:
        """What this RULER task's haystack reads (:mod:`harness.data.inputs`): the essays of the essay haystacks,
        the QA dataset of qa_squad / qa_hotpot; ``synthetic`` and the shipped essays read nothing outside."""
        key = self.source() if self.ruler_task in TASKS else None
        if key is None or getattr(self, key) == haystacks.SYNTHETIC:
            return []
        if key == "essays" and self.essays == haystacks.BUILTIN_ESSAYS:
            return []
        value = getattr(self, key)
        if key == "essays":
            kind = "hf_dataset" if value == haystacks.ESSAYS_HF else "path"
            return [
                Input(
                    key,
                    value,
                    kind,
                    f"pass essays=<folder of .txt essays>, essays={haystacks.BUILTIN_ESSAYS} "
                    "(the essays shipped with the package), or essays=synthetic (generated prose: a smoke run)",
                )
            ]
        return [
            Input(
                key,
                value or haystacks.QA_SOURCES[key].hub[0],
                "path" if value else "hf_dataset",
                f"pass {key}=<the official dev JSON>, or {key}=synthetic (generated questions: a smoke run)",
            )
        ]


_SOURCE_FIELDS = [f for f in dataclasses.fields(RulerOptions) if f.metadata.get("cache_key") == "source"]
SOURCE_OPTIONS = tuple(f.name for f in _SOURCE_FIELDS)
# the source options alone (what a builder reads of RulerOptions), for callers that build samples without a task
Sources = dataclasses.make_dataclass(
    "Sources", [(f.name, f.type, dataclasses.field(default=f.default)) for f in _SOURCE_FIELDS]
)

_ICL_KINDS = ("vt", "cwe", "fwe")  # the kinds that can prepend a worked example


def generate(
    options: RulerOptions, length: int, counter: PromptCounter, use_cache: bool = True
) -> list[dict[str, Any]]:
    """``options.num_samples`` samples of ``options.ruler_task`` fitted to ``length`` tokens (prompt + budget) by
    ``counter``, from the cache when ``use_cache`` and there. Rows: ``index, input, outputs, gen_prefix, context_span,
    length, prompt_tokens, max_gen_toks, task, n_units`` (niah also ``depth``, ``depth_bucket``, ``needle_depths``);
    ``context_span``: the ``[start, end)`` of the input between instruction and question, all a truncation may cut."""
    task = options.ruler_task
    check_known("RULER task", task, TASKS)
    if not use_cache:
        return _build_rows(options, length, counter)
    path = cache_path(options, length, counter)
    cached = read_rows(path, options.num_samples)
    if cached is not None:
        return cached
    with entry_lock(path):  # concurrent runs: one generates, the others wait and read its rows (an optimisation)
        cached = read_rows(path, options.num_samples)
        if cached is not None:
            return cached
        rows = _build_rows(options, length, counter)
        write_rows(path, rows)
    return rows


def counts(options: RulerOptions, length: int, counter: PromptCounter) -> tuple[dict[str, list[int]], bool]:
    """The ``prompt_tokens`` and ``max_gen_toks`` of each sample :func:`generate` gives (:func:`.cache.read_counts`),
    and whether they were cached: samples not cached yet are generated (and cached) first."""
    path = cache_path(options, length, counter)
    found = read_counts(path, options.num_samples)
    if found is not None:
        return found, True
    generate(options, length, counter)
    found = read_counts(path, options.num_samples)
    if found is None:
        raise RuntimeError(f"RULER {options.ruler_task} at {length}: the samples just generated are not in {path}")
    return found, False


def _build_rows(options: RulerOptions, length: int, counter: PromptCounter) -> list[dict[str, Any]]:
    task = str(options.ruler_task)
    spec = TASKS[task]
    builders, fitted, icl = _fit_samples(options, length, counter)
    rows = []
    for i, (b, (n, tokens)) in enumerate(zip(builders, fitted)):
        text, outputs, prefix = b.build(n)
        if not (
            text.startswith(b.instruction)
            and text.endswith(b.question)
            and len(b.instruction) + len(b.question) <= len(text)
        ):
            raise AssertionError(
                f"RULER {task}: a sample's input does not start with its instruction and end with its "
                "question (a builder defect)"
            )
        rows.append(
            {
                "index": i,
                "task": task,
                "input": text,
                "outputs": outputs,
                "gen_prefix": prefix,
                "context_span": [len(b.instruction), len(text) - len(b.question)],
                "length": length,
                "prompt_budget": length,
                "prompt_tokens": tokens,
                "max_gen_toks": spec.budget,
                "n_units": n,
                "icl_example": icl and spec.kind in _ICL_KINDS,
                **b.extra,
            }
        )
    return rows


def _fit_samples(
    options: RulerOptions, length: int, counter: PromptCounter
) -> tuple[list[Builder], list[tuple[int, int]], bool]:
    """The samples' builders, their fitted ``(n, prompt_tokens)``, and whether they carry a worked example; when even
    the smallest haystack does not fit, first fewer repeats of cwe's common words, then no worked example."""
    task = str(options.ruler_task)
    spec, icl = TASKS[task], options.icl_example
    target = length - spec.budget
    if target <= 0:
        raise TooShortError(
            f"RULER {task} at length {length}: the answer budget alone takes {spec.budget} tokens; "
            f"use lengths well above it (e.g. 1k or more)"
        )
    params = dict(spec.params)
    while True:
        builders = [
            BUILDERS[spec.kind](params, random.Random(f"{task}-{length}-{i}-{options.seed}"), length, options, icl)
            for i in range(options.num_samples)
        ]
        try:
            fitted = None
            if builders[0].parts is not None:
                fitted = fitting.fit_additive(builders, SegmentCounter(counter), target)
            if fitted is None:
                fitted = fitting.fit_full(builders, counter, target)
            _check_reached(options, length, target, builders, fitted)
            return builders, fitted, icl
        except TooShortError as err:
            if spec.kind == "cwe" and params["freq_common"] > params["freq_uncommon"] + 1:
                params["freq_common"] = max(params["freq_uncommon"] + 1, params["freq_common"] // 2)
                continue
            if icl and spec.kind in _ICL_KINDS:
                icl = False
                continue
            raise TooShortError(
                f"RULER {task} at length {length}: {err} (the answer budget takes {spec.budget}); use a longer length"
            ) from None


def _check_reached(
    options: RulerOptions, length: int, target: int, builders: list[Builder], fitted: list[tuple[int, int]]
) -> None:
    """Refuse samples that took every unit their source has (``n == n_max``) and still leave more than one unit's
    tokens of the target unused: the source cannot reach the length asked (a small QA set at a long length)."""
    short = [
        (n, tokens) for b, (n, tokens) in zip(builders, fitted) if n >= b.n_max and target - tokens > tokens / max(n, 1)
    ]
    if not short:
        return
    task = str(options.ruler_task)
    reach = max(tokens for _, tokens in short)
    spec, key = TASKS[task], options.source() or "essays"
    raise SourceTooShortError(
        f"RULER {task} at length {length}: its source ({key}={getattr(options, key)}) reaches "
        f"only {reach} prompt tokens of the {target} asked; give a larger source (the official "
        f"dev JSON) or lengths up to {reach + spec.budget}"
    )


def ruler_dataset(options: RulerOptions, model: Any = None) -> dict:
    """lm-eval ``custom_dataset`` result (:meth:`harness.tasks.base.LchTask.download`): ``ruler_task`` samples at every
    length, fitted in the evaluated tokenizer."""
    import datasets

    lengths = [length_tokens(x) for x in options.length_list()]
    counter = counter_for(options)
    rows = [row for length in lengths for row in generate(options, length, counter)]
    return {"test": datasets.Dataset.from_list(rows)}
