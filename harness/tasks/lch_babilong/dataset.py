"""BABILong samples and prompts: HF ``RMT-team/babilong`` (config = length, split = task), a local folder
``<folder>/<length>/<task>.jsonl`` (or ``.json``; the HF columns), or the offline generator (:mod:`.babi`, qa1-qa5,
fitted so that prompt + :data:`BUDGET` <= ``N * 1024`` tokens for length ``Nk``). Prompts follow the official
:data:`TEMPLATE`, in our wording (:data:`PROMPTS`) or that of ``prompts_file``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.core.errors import missing_data_on_error
from harness.core.options import MAX_SAMPLES, MAX_SEED, MAX_TOKENS, option
from harness.data.documents import MissingDataError, read_jsonl
from harness.data.haystacks import BUILTIN_ESSAYS
from harness.data.inputs import Input
from harness.data.lengths import check_lengths, length_label, length_tokens
from harness.data.prompt_tokens import PromptOptions, counter_for
from harness.data.truncation import PromptParts

LAYER = "data"  # harness/devtools/layers.py

HF_DATASET = "RMT-team/babilong"
BUDGET = 20  # generated tokens, as the official evaluation
DEPTH_KEYS = ("depth", "depth_bucket")  # what a synthetic row records of its answer fact (harness.data.depth)
TEMPLATE = "{instruction}\n\n{examples}\n\n{post_prompt}\n\n<context>\n{context}\n</context>\n\nQuestion: {question}"

_TOPICS = {
    "qa1": "where people are",
    "qa2": "where objects are",
    "qa3": "where objects were before",
    "qa4": "how places lie relative to each other",
    "qa5": "who gave what to whom",
}
PROMPTS: dict[str, dict[str, str]] = {
    task: {
        "instruction": (
            "The context below is a long text with a few short facts mixed into it. "
            + (f"The facts describe {_TOPICS[task]}. " if task in _TOPICS else "")
            + "Use only those facts to answer the question."
        ),
        "post_prompt": "Reply with one short sentence that gives the answer and stop.",
    }
    for task in (f"qa{i}" for i in range(1, 21))
}


@dataclass(frozen=True)
class BabilongOptions(PromptOptions):
    """Options of one BABILong task: which task, at which lengths, from which source (module docstring)."""

    babilong_task: str | None = option(
        None, "BABILong task of a subtask YAML", choices=tuple(f"qa{i}" for i in range(1, 21))
    )
    lengths: tuple[int | str, ...] = option(
        ("0k",),
        "context lengths to generate samples at (k-labels or token counts)",
        nonempty=True,
        low=0,
        high=MAX_TOKENS,
    )
    source: str = option("hf", "haystack / data source: hf, a local folder, or synthetic", path=True)
    hf_dataset: str = option(HF_DATASET, "HF dataset of the samples (source hf)")
    num_samples: int | None = option(None, "samples per length (default: all; synthetic: 100)", low=1, high=MAX_SAMPLES)
    seed: int = option(0, "random seed of sampling", low=0, high=MAX_SEED)
    filler: str = option(
        "synthetic",
        f"BABILong filler text folder (source synthetic; {BUILTIN_ESSAYS}: the essays shipped with the package)",
        path=True,
    )
    prompts_file: str | None = option(None, "BABILong prompts file", path=True)

    def __post_init__(self) -> None:
        check_lengths(self.lengths, self.num_samples, 0, MAX_TOKENS, MAX_SAMPLES)
        for length in self.lengths:
            length_label(length)  # BABILong's lengths are whole k

    def length_list(self) -> tuple[int | str, ...]:
        return self.lengths

    def unused(self) -> set[str]:
        """The options of the sources not read: the HF dataset's unless ``source`` hf, the filler's unless synthetic."""
        return ({"hf_dataset"} if self.source != "hf" else set()) | (
            {"filler"} if self.source != "synthetic" else set()
        )

    def inputs(self) -> list[Input]:
        """What the samples read (:mod:`harness.data.inputs`): the HF dataset (``source`` hf), a local folder, or for
        ``synthetic`` the filler folder when one is named; the prompts file when given."""
        instead = (
            "pass source=<folder of <length>/<task>.jsonl files>, or source=synthetic (generated bAbI stories, qa1-qa5)"
        )
        if self.source == "hf":
            found = [Input("hf_dataset", self.hf_dataset, "hf_dataset", "download it to the HF cache, or " + instead)]
        elif self.source == "synthetic":
            found = (
                []
                if self.filler in ("synthetic", BUILTIN_ESSAYS)
                else [
                    Input(
                        "filler",
                        self.filler,
                        "path",
                        f"pass filler=<folder of .txt texts>, filler={BUILTIN_ESSAYS} "
                        "(the essays shipped with the package), or filler=synthetic",
                    )
                ]
            )
        else:
            found = [Input("source", self.source, "path", instead)]
        if self.prompts_file:
            found.append(
                Input(
                    "prompts_file",
                    self.prompts_file,
                    "path",
                    "give an existing prompts file, or leave prompts_file unset (the published prompts)",
                )
            )
        return found


def _examples(task: str) -> str:
    from harness.tasks.lch_babilong.babi import GENERATORS, babi_story

    if task not in GENERATORS:
        return ""
    facts, question, answer = babi_story(task, -1)
    return f"<example>\n{' '.join(facts)}\nQuestion: {question}\nAnswer: The answer is {answer}.\n</example>"


@lru_cache(maxsize=4)
def _prompts_file(path: str) -> dict:
    file = Path(path).expanduser()
    if not file.is_file():
        raise MissingDataError(f"BABILong prompts_file {file} does not exist")
    return json.loads(file.read_text(encoding="utf-8"))


def prompt_parts(task: str, context: str, question: str, prompts_file: str | None = None) -> PromptParts:
    """The prompt of :data:`TEMPLATE` as instruction (with the worked examples and the post-prompt, up to the opening
    ``<context>`` tag), context and question (from the closing tag): only the context may be cut."""
    fields = dict(PROMPTS[task], examples=_examples(task))
    if prompts_file:
        fields.update(_prompts_file(prompts_file).get(task, {}))
    head, tail = TEMPLATE.split("{context}")
    return PromptParts(head.format(**fields), context.strip(), tail.format(question=question))


def format_prompt(task: str, context: str, question: str, prompts_file: str | None = None) -> str:
    return prompt_parts(task, context, question, prompts_file).text


def _local(folder: Path, length: str, task: str) -> list[dict]:
    for suffix in (".jsonl", ".json"):
        path = folder / length / f"{task}{suffix}"
        if path.is_file():
            rows = read_jsonl(path) if suffix == ".jsonl" else json.loads(path.read_text(encoding="utf-8"))
            return [{"input": r["input"], "question": r["question"], "target": r["target"]} for r in rows]
    raise MissingDataError(f"BABILong: {folder}/{length}/{task}.jsonl does not exist")


def _hf(name: str, length: str, task: str) -> list[dict]:
    with missing_data_on_error(
        f"BABILong: HF {name} ({length}, {task}) is not in the HF cache",
        'download it, pass --metadata \'{"source": "<folder>/<length>/<task>.jsonl"}\', or "synthetic" for qa1-qa5',
    ):
        import datasets

        ds = datasets.load_dataset(name, length, split=task)
    return [{"input": r["input"], "question": r["question"], "target": r["target"]} for r in ds]


def _synthetic(
    task: str, length: str, num_samples: int, seed: int, counter: Any, filler: str, prompts_file: str | None
) -> list[dict]:
    from harness.data.haystacks import essay_sentences
    from harness.tasks.lch_babilong.babi import babilong_sample, fact_depth, story_with_answer_fact

    budget = length_tokens(length)
    sentences = essay_sentences(filler) if budget else ()
    rows = []
    for i in range(num_samples):
        facts, question, answer, key = story_with_answer_fact(task, seed + i)

        def tokens(context: str) -> int:
            return counter(format_prompt(task, context, question, prompts_file)) + BUDGET  # noqa: B023 (used in this iteration)

        if budget:
            rows.append({**babilong_sample(task, seed + i, budget, tokens, sentences), "prompt_budget": budget})
        else:
            rows.append({"input": " ".join(facts), "question": question, "target": answer, **fact_depth(facts, key)})
    return rows


def babilong_dataset(options: BabilongOptions, model: Any = None) -> dict:
    """lm-eval ``custom_dataset`` result (:meth:`harness.tasks.base.LchTask.download`) for ``babilong_task`` at every
    length of ``lengths``."""
    import datasets

    task, source, prompts_file, num_samples = (
        str(options.babilong_task),
        options.source,
        options.prompts_file,
        options.num_samples,
    )
    rows = []
    for length in [length_label(x) for x in options.length_list()]:
        if source == "synthetic":
            part = _synthetic(
                task, length, num_samples or 100, options.seed, counter_for(options), options.filler, prompts_file
            )
        elif source == "hf":
            part = _hf(options.hf_dataset, length, task)
        else:
            part = _local(Path(source).expanduser(), length, task)
        if num_samples is not None:
            part = part[:num_samples]
        for i, row in enumerate(part):
            parts = prompt_parts(task, row["input"], row["question"], prompts_file)
            start = len(parts.instruction)
            rows.append(
                {
                    "index": i,
                    "task": task,
                    "length": length,
                    "prompt_budget": row.get("prompt_budget", 0),
                    "input": row["input"],
                    "question": row["question"],
                    "target": row["target"],
                    "prompt": parts.text,
                    "context_span": [start, start + len(parts.context)],
                    **{k: row[k] for k in DEPTH_KEYS if k in row},
                }
            )
    return {"test": datasets.Dataset.from_list(rows)}
