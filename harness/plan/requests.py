"""A plan counted from the requests lm-eval would send: tasks loaded and requests built by lm-eval itself, each counted
in the evaluated model's tokenizer (no model loaded). :meth:`harness.tasks.base.LchTask.plan_from_cache` must agree."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from harness.data.prompt_tokens import PromptCounter
from harness.engines.requests import REQUESTS, TOKEN_LOGPROBS, encode_for_scoring
from harness.plan.cells import PlanCell
from harness.tasks.base import NO_LENGTH, LchTask

LAYER = "lmeval"  # harness/devtools/layers.py

GENERATING = ("generate_until", "generate_long")  # the request types that generate


class ChatRenderer:
    """lm-eval's HF model's ``apply_chat_template`` on a tokenizer alone, as ``build_all_requests`` receives it."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def __call__(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        return self.tokenizer.apply_chat_template(
            chat_history,
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=not add_generation_prompt,
        )


def sample_length(doc: Any) -> str:
    """The length a sample was fitted to (``doc["length"]``: RULER, BABILong), else :data:`NO_LENGTH`."""
    length = doc.get("length") if isinstance(doc, dict) else None
    return NO_LENGTH if length is None else str(length)


def request_counts(instance: Any, counter: PromptCounter, task: Any) -> tuple[int, int, int, bool]:
    """``(prompt tokens as sent, generation budget, tokens scored, cut or skipped)`` of one lm-eval ``Instance``."""
    kind, args = instance.request_type, instance.args
    text = args[0] if args and isinstance(args[0], str) else ""
    if kind == TOKEN_LOGPROBS.name:
        n = len(encode_for_scoring(counter.tokenizer, text, args[1] if len(args) > 1 else None)["token_ids"])
        return n, 0, max(0, n - 1), False
    if kind in ("loglikelihood", "loglikelihood_rolling"):
        context, continuation = (text, args[1]) if kind == "loglikelihood" else ("", text)
        whole, scored = counter.count_rendered([context + continuation])[0], 0
        if continuation:
            scored = len(counter.tokenizer(continuation, add_special_tokens=False)["input_ids"])
        return whole, 0, scored, False
    fitted = task.fitted(instance.doc) if callable(getattr(task, "fitted", None)) else None
    counted = task.prompt_lengths.tokens(instance.doc) if getattr(task, "COUNTS_PROMPT", False) else None
    cut = fitted is not None and (fitted.truncated or fitted.skipped)
    n = counted if counted is not None and not cut else counter.count_rendered([text])[0]
    # a generation request that states no budget gets the task's (LchTask.generation_budget: one home of the default)
    own = (
        task.generation_budget() if callable(getattr(task, "generation_budget", None)) else LchTask.DEFAULT_MAX_GEN_TOKS
    )
    if kind == "generate_until":
        options = args[1] if len(args) > 1 and isinstance(args[1], dict) else {}
        budget = int(options.get("max_gen_toks") or own)
    elif kind == "generate_long":
        budget = int(REQUESTS[kind].parse_options(args[1] if len(args) > 1 else None).max_gen_toks or own)
    else:  # lsm, compress_*: a forward over the text
        budget = 0
    scored = n if kind not in GENERATING else 0
    return n, budget, scored, cut


def judge_tokens(instance: Any, budget: int, counter: PromptCounter, task: Any) -> int | None:
    """At most the tokens of a sample's judge request; 0 without a judge; None if the judge's prompt is not at hand."""
    if not callable(getattr(task, "judge_tokens", None)):
        return 0
    found = task.judge_tokens(
        instance.doc, budget, lambda text: len(counter.tokenizer(text, add_special_tokens=False)["input_ids"])
    )
    return None if found is None else sum(found)


def count_task(name: str, task: Any, counter: PromptCounter) -> list[PlanCell]:
    """The cells of one task from its built requests, one per sample length; nothing is downloaded."""
    from harness.data.documents import no_downloads

    by_length: dict[str, list[tuple[int, int, int, bool, int | None]]] = defaultdict(list)
    with no_downloads():
        for instance in task.instances:
            counts = request_counts(instance, counter, task)
            by_length[sample_length(instance.doc)].append((*counts, judge_tokens(instance, counts[1], counter, task)))
    cells = []
    judged = callable(getattr(task, "judge_tokens", None))
    for length, rows in sorted(by_length.items(), key=lambda kv: _length_order(kv[0])):
        prompts, budgets, scored, cut, judge = zip(*rows)
        cells.append(
            PlanCell(
                task=name,
                length=length,
                prompts=prompts,
                budgets=budgets,
                scored_tokens=sum(scored),
                cut=sum(cut),
                judge_calls=len(rows) if judged else 0,
                judge_tokens=None if None in judge else sum(judge),
            )
        )
    return cells


def _length_order(length: str) -> tuple[int, str]:
    return (int(length), "") if length.isdigit() else (1 << 62, length)


def build_requests(
    tasks: dict[str, Any],
    counter: PromptCounter,
    *,
    limit: float | None = None,
    apply_chat_template: bool = False,
    gen_kwargs: dict | None = None,
) -> None:
    """Each task's requests built as lm-eval's evaluator builds them for one process (rank 0 of 1)."""
    from harness.plugin.in_process import sample_size

    for task in tasks.values():
        if gen_kwargs and task.get_config("output_type") == "generate_until":
            task.set_config(key="generation_kwargs", value=gen_kwargs, update=True)
        task.build_all_requests(
            limit=sample_size(task, limit),
            rank=0,
            world_size=1,
            apply_chat_template=apply_chat_template,
            chat_template=ChatRenderer(counter.tokenizer) if apply_chat_template else None,
            tokenizer_name=getattr(counter.tokenizer, "name_or_path", "") if apply_chat_template else "",
        )


def plan_requests(
    manager: Any,
    task_names: Iterable[str],
    counter: PromptCounter,
    *,
    limit: float | None = None,
    apply_chat_template: bool = False,
    gen_kwargs: dict | None = None,
) -> list[PlanCell]:
    """The cells of ``task_names`` (tasks or groups) loaded by ``manager``, requests built, in lm-eval's order."""
    loaded = manager.load(list(task_names))["tasks"]
    build_requests(loaded, counter, limit=limit, apply_chat_template=apply_chat_template, gen_kwargs=gen_kwargs)
    return [cell for name, task in loaded.items() for cell in count_task(str(name), task, counter)]
