"""``lch plan``'s work: a run's settings checked, then each task planned from its data cache or its built requests."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import Any

from harness.core.errors import UsageError
from harness.core.sizes import GIB
from harness.longppl.formulas import EvaluatorRun
from harness.plan.cells import PlanCell, scores_only
from harness.plan.devices import DeviceMemory

LAYER = "lmeval"  # harness/devtools/layers.py


@dataclass(frozen=True)
class EvalSettings:
    """What a plan is of: the settings of an ``lch eval`` / ``lm_eval`` run that decide its requests."""

    model: str
    model_args: dict[str, Any]
    tasks: list[str]
    metadata: dict[str, Any] = field(default_factory=dict)
    include_path: str | None = None
    apply_chat_template: bool = False
    limit: float | None = None
    gen_kwargs: dict[str, Any] | None = None
    device: str | None = None


@dataclass(frozen=True)
class Plan:
    """A run's cells, the tokenizer they were counted in, the memory checked against, and what would fit each misfit."""

    cells: list[PlanCell]
    tokenizer: str
    device: DeviceMemory | None = None
    misfits: tuple[str, ...] = ()


# what an lch eval process holds beyond this plan's own before its model's passes (lm-eval's evaluator, the model's
# wrapper and object, the requests it builds): measured, benchmarks/plan_memory_cpu.py
RUN_OVERHEAD = int(0.15 * GIB)


def make_plan(
    run: EvalSettings, device: DeviceMemory | None = None, helpers_ran: Collection[tuple[str, str]] = ()
) -> Plan:
    """The plan of ``run``; :class:`UsageError` for a run that could not start or that names others' tasks.
    ``helpers_ran``: ``(model, dtype)`` of the models a recorded run loaded beside its own (``lch plan --against``:
    LongPPL's evaluator ran there though its key tokens are cached now)."""
    from harness.core.options import parse_options
    from harness.core.run_record import asking_chat_template
    from harness.data.prompt_tokens import ModelKeys, PromptCounter, load_tokenizer, tokenizer_name
    from harness.plan.requests import plan_requests
    from harness.plugin.discovery import through_user_groups
    from harness.plugin.in_process import task_manager
    from harness.plugin.preflight import preflight
    from harness.tasks import TASKS_PATH

    device = device or run_device_memory(run)  # before a tokenizer or a document is read here
    names = through_user_groups(run.tasks, run.include_path)
    if names is None:
        raise UsageError(
            f"lch plan plans the tasks of this package; {', '.join(run.tasks)} holds others: plan "
            "them with their own harness, or leave them out"
        )
    preflight(run.model, run.model_args, run.tasks, run.metadata, run.include_path, planning=True)
    metadata = {**run.model_args, **run.metadata}  # as lm-eval's command line hands them to the tasks
    name = tokenizer_name(parse_options(ModelKeys, metadata))
    if name is None:
        raise UsageError(
            "lch plan counts prompts in the evaluated model's tokenizer: pass --model_args "
            "pretrained=<model> (or tokenizer=<name>)"
        )
    counter = PromptCounter(load_tokenizer(name))
    from harness.plugin.task_index import check_task_options

    parsed = check_task_options(run.metadata, run.model_args, names, str(TASKS_PATH))
    cells: list[PlanCell] = []
    with asking_chat_template(run.apply_chat_template):
        counted = []
        for task in names:
            task_class, model_keys, options = parsed.get(task, (None, None, None))
            planner = getattr(task_class, "plan_from_cache", None)
            own = planner(model_keys, options, run.limit) if callable(planner) else None
            if own is None:
                counted.append(task)
            else:
                cells += [
                    PlanCell(
                        task,
                        c.length,
                        c.prompts,
                        c.budgets,
                        scored_tokens=c.scored_tokens,
                        cached=c.cached,
                        helper=c.helper,
                    )
                    for c in own
                ]
        if counted:
            manager = task_manager([run.include_path] if run.include_path else (), metadata, ours_only=True)
            cells += plan_requests(
                manager,
                counted,
                counter,
                limit=run.limit,
                apply_chat_template=run.apply_chat_template,
                gen_kwargs=run.gen_kwargs,
            )
    order = {task: i for i, task in enumerate(names)}
    cells.sort(key=lambda c: order.get(c.task, len(order)))  # stable: each task's lengths stay in order
    if device.kind == "cpu":
        device = replace(device, runtime=own_resident_bytes() + RUN_OVERHEAD)
    cells, misfits = with_memory(cells, run, device, helpers_ran)
    return Plan(cells, name, device, tuple(misfits))


def run_device_memory(run: EvalSettings) -> DeviceMemory:
    """The memory of the device the run would use: a CUDA device's total, or what this machine has available."""
    import torch

    from harness.models.device_sizing import host_available_bytes

    wanted = run.device or str(run.model_args.get("device") or ("cuda" if torch.cuda.is_available() else "cpu"))
    if wanted.startswith("cuda") and torch.cuda.is_available():
        return DeviceMemory(torch.cuda.get_device_name(wanted), int(torch.cuda.mem_get_info(wanted)[1]), "cuda")
    # a run has what is available now beside this process, which ends before it starts
    own = own_resident_bytes()
    return DeviceMemory("this machine (available now)", host_available_bytes() + own, "cpu", runtime=own)


def own_resident_bytes() -> int:
    """This process's resident memory: after counting, what a run's process holds before its model loads."""
    import psutil

    return int(psutil.Process().memory_info().rss)


@dataclass(frozen=True)
class CellMemory:
    """A cell's longest request on the planned device: ``total``, what the run holds at its peak (the plan's memory);
    ``checked``, what the run-time check asks for at its tightest pass (:data:`FIT_MARGIN` on that pass's work: a
    cell fits when this does)."""

    total: int
    checked: int


def with_memory(
    cells: list[PlanCell], run: EvalSettings, device: DeviceMemory, helpers_ran: Collection[tuple[str, str]] = ()
) -> tuple[list[PlanCell], list[str]]:
    """Each cell with its longest request's memory (from the model's config) and whether it fits ``device``, and what
    would fit each misfit; a cell's helper counts where what it makes is not cached, or where the run that is planned
    again recorded it (``helpers_ran``). Only hf-pic and vllm-pic runs with a ``pretrained`` are sized."""
    from harness.core.sizes import in_words

    pretrained = run.model_args.get("pretrained")
    if run.model not in ("hf-pic", "vllm-pic") or not isinstance(pretrained, str) or not cells:
        return cells, []
    dtype = str(run.model_args.get("dtype") or "auto")
    pooled = run.model == "vllm-pic" and any(cell.scored_tokens for cell in cells)
    need, room = _need_function(run, pretrained, dtype, device, pooled)
    # a run of one task that only scores passes its longest request first: the model's first pass in the process; a
    # helper (LongPPL's evaluator) reads its documents in the data's order: its first pass known only for one document
    single = len({c.task for c in cells}) == 1 and all(scores_only(c.scored_tokens, sum(c.budgets)) for c in cells)
    first_longest = max(c.longest_prompt for c in cells) if single else None
    helper_first = single and len(cells) == 1 and len(cells[0].prompts) == 1
    out, misfits, engines_fit = [], [], True
    if pooled and device.kind == "cuda":
        from harness.engines.vllm_pic.lm import POOLED_GPU_MEMORY

        share = float(run.model_args.get("gpu_memory_utilization", 0.9))
        if share > POOLED_GPU_MEMORY:
            engines_fit = False
            misfits.append(
                f"the run scores from hidden states: vllm-pic starts a pooling engine beside the generating "
                f"one on {device.name}, each with gpu_memory_utilization={share:g}: pass "
                f"gpu_memory_utilization={POOLED_GPU_MEMORY} (each cell's memory is one engine's)"
            )
    for cell in cells:
        budget = max(cell.budgets, default=0)
        scores = scores_only(cell.scored_tokens, sum(cell.budgets))
        helper = cell.helper if cell.helper and (not cell.cached or cell.helper.key in helpers_ran) else None
        if helper is not None and _helper_model(helper) is None:  # its config is not at hand: memory not known
            out.append(cell)
            continue
        longest = cell.longest_prompt
        first = longest == first_longest

        def cell_need(
            prompt: int, need=need, budget=budget, scores=scores, helper=helper, longest=longest, first=first
        ) -> CellMemory:
            return need(prompt, budget, scores, helper, prompt / longest if longest else 1.0, (first, helper_first))

        memory = cell_need(longest)
        total = memory.total
        short = _vllm_cpu_cache_short(run, pretrained, dtype, device, longest + budget)
        out.append(replace(cell, memory=total, fits=memory.checked <= room and short is None and engines_fit))
        if short is not None:
            misfits.append(f"{cell.task} {cell.length}: {short}")
        if memory.checked <= room:
            continue
        lo, hi = 0, longest  # the longest prompt that fits: need grows with the prompt
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if cell_need(mid).checked <= room else (lo, mid - 1)
        ways = [f"prompts up to {lo:,} tokens fit" if lo else "no prompt fits beside the weights"]
        if dtype in ("auto", "float32"):
            narrow, _ = _need_function(run, pretrained, "bfloat16", device, pooled)
            narrowed = narrow(longest, budget, scores, helper, 1.0, (first, helper_first)).total
            ways.append(f"dtype=bfloat16 needs {in_words(narrowed)}")
        if run.model == "vllm-pic" and device.kind == "cuda":
            ways.append(f"tensor_parallel_size={-(-total // room)} spreads it over that many such devices")
        misfits.append(
            f"{cell.task} {cell.length}: needs {in_words(total)}, {device.name} has {in_words(room)}"
            f"{' for vLLM' if run.model == 'vllm-pic' else ''}: {'; '.join(ways)}"
        )
    return out, misfits


def _helper_model(helper: EvaluatorRun) -> Any:
    """The helper's meta model, or None where its config is not at hand here (a hub name offline)."""
    from harness.models.memory import meta_model

    try:
        return meta_model(helper.model, helper.dtype)
    except (OSError, ValueError):
        return None


def _mapped(name: str, dtype: str) -> bool:
    """Whether a CPU run loads ``name`` in ``dtype`` by mapping its checkpoint (the same dtype): its weights become
    resident as its own passes read them, not at load."""
    from harness.models.device_sizing import model_dtype
    from harness.models.memory import meta_model

    return model_dtype(meta_model(name, dtype)) == model_dtype(meta_model(name, "auto"))


def helper_phase(
    helper: EvaluatorRun, device: DeviceMemory, taken: int = 0, scale: float = 1.0, first: bool = False
) -> tuple[int, int]:
    """``(bytes, work checked)`` the helper adds while it runs (before the evaluated model's passes: lm-eval loads
    the model, then the tasks, whose key tokens the evaluator finds, and lets it go): its weights and the larger of
    its long pass over its document (``scale`` of its tokens; ``first``: its first pass, on the CPU over a mapped
    checkpoint its embeddings and head not yet resident in the decoder phase) and its largest batch of short windows,
    sized as :func:`~harness.longppl.estimator.window_batch` sizes them (on a CUDA device from what ``taken`` and its
    weights leave free), as a process holds them (:meth:`~harness.models.memory.MemoryNeed.resident`); the long pass
    is the one the run-time check sizes. Its tokenizer is in the plan's runtime (the plan loads it to count the
    document)."""
    from harness.longppl.estimator import window_batch
    from harness.models.device_sizing import predicted_peak
    from harness.models.memory import MemoryNeed, request_need, weight_bytes

    model = _helper_model(helper)
    weights = weight_bytes(model)
    free = None if device.kind == "cpu" else max(0, device.size - taken - weights)
    tokens = max(1, int(helper.tokens * scale))
    mapped = first and device.kind == "cpu" and _mapped(helper.model, helper.dtype)
    long = request_need(model, tokens + int(helper.bos), scores=True, device=device.kind, first_mapped=mapped)
    windows = [
        predicted_peak(
            model, width, min(count, window_batch(model, device.kind, width, free)), None, device.kind, padded=False
        )  # windows of one width: no padding
        for width, count in helper.window_widths(tokens).items()
    ]
    after = MemoryNeed(weights, max(windows, default=0)).resident(device.kind)  # after the long pass: all resident
    return max(long.resident(device.kind), after), long.work


def _need_function(run: EvalSettings, pretrained: str, dtype: str, device: DeviceMemory, pooled: bool = False):  # noqa: ANN202
    """``(need(prompt, budget, scores, helper, scale, first) -> CellMemory, room)`` on ``device``: the run's peak, the
    larger of the helper's phase (``scale`` of its document) and the evaluated model's passes (``first``: whether the
    pass is the model's, and the helper's, first in the process); ``pooled``: vllm-pic adds a pooling engine."""
    from harness.models.device_sizing import FIT_MARGIN
    from harness.models.memory import meta_model, request_need, weight_bytes

    model = meta_model(pretrained, dtype)
    margin = FIT_MARGIN - 1
    runtime = device.runtime if device.kind == "cpu" else 0
    if run.model != "vllm-pic":
        from harness.engines.model_args import resolve_model_args

        inference = resolve_model_args(run.model_args).inference
        dynamic = None
        if inference.entry.moves_cached_keys:
            from harness.models.device_sizing import attention_shape, text_config
            from harness.models.memory import DynamicPic
            from harness.pic.hf.rope_layout import kept_layers

            layers = attention_shape(model).layers - len(kept_layers(text_config(model)))
            dynamic = DynamicPic(inference.impl, layers)
        # on the CPU a model mapped from its checkpoint is read only by its own passes, after the helper's
        mapped = device.kind == "cpu" and _mapped(pretrained, dtype)
        resident = 0 if mapped else weight_bytes(model)

        def need(
            prompt: int, budget: int, scores: bool, helper: EvaluatorRun | None, scale: float, first: tuple[bool, bool]
        ) -> CellMemory:
            own = request_need(
                model,
                prompt,
                budget,
                scores=scores,
                device=device.kind,
                dynamic=dynamic,
                first_mapped=mapped and first[0],
            )
            total = own.resident(device.kind)
            checked = total + (int(margin * own.work) if scores else 0)
            if helper is not None:
                beside, long = helper_phase(helper, device, resident, scale, first[1])
                total, checked = max(total, resident + beside), max(checked, resident + beside + int(margin * long))
            return CellMemory(runtime + total, runtime + checked)

        return need, device.size
    from harness.engines.vllm_pic.memory import vllm_need

    shape = _engine_shape(pretrained, dtype, device)
    share = float(run.model_args.get("gpu_memory_utilization", 0.9)) if device.kind == "cuda" else 1.0

    def vllm(
        prompt: int, budget: int, scores: bool, helper: EvaluatorRun | None, scale: float, first: tuple[bool, bool]
    ) -> CellMemory:
        total = vllm_need(shape, run.model_args, device.kind, device.size, prompt, budget, scores, pooled)
        if helper is None:
            return CellMemory(runtime + total, runtime + total)
        # beside the generating engine, started with the model (a GPU cell is one engine's); the pooling engine
        # starts at the first scoring request, once the helper is gone
        one = vllm_need(shape, run.model_args, device.kind, device.size, prompt, budget, scores, False)
        beside, long = helper_phase(helper, device, int(device.size * share), scale, first[1])
        return CellMemory(runtime + max(total, one + beside), runtime + max(total, one + beside + int(margin * long)))

    return vllm, int(device.size * share)


def _engine_shape(pretrained: str, dtype: str, device: DeviceMemory) -> Any:
    """:class:`~harness.engines.vllm_pic.memory.EngineShape` of the model, from its meta model."""
    from harness.engines.vllm_pic.memory import EngineShape
    from harness.models.device_sizing import text_config
    from harness.models.memory import kv_cache_bytes, meta_model, request_need, weight_bytes

    model = meta_model(pretrained, dtype)
    config = text_config(model)
    return EngineShape(
        weight_bytes(model),
        lambda n: kv_cache_bytes(model, n),
        int(config.hidden_size),
        int(config.vocab_size),
        lambda n: request_need(model, n, scores=True, device=device.kind).work,
    )


def _vllm_cpu_cache_short(
    run: EvalSettings, pretrained: str, dtype: str, device: DeviceMemory, tokens: int
) -> str | None:
    """Why vLLM's CPU backend cannot hold one sequence of the run in the KV space it is given, or None."""
    if run.model != "vllm-pic" or device.kind != "cpu":
        return None
    from harness.engines.vllm_pic.memory import cpu_cache_short

    return cpu_cache_short(_engine_shape(pretrained, dtype, device), run.model_args, tokens)


def settings_of(invocation: Any) -> EvalSettings:
    """The settings of the run a results file recorded (:class:`harness.core.invocation.Invocation`)."""
    from harness.plugin.preflight import as_dict

    arguments = invocation.arguments
    limit = arguments.get("limit")
    device = arguments.get("device")
    return EvalSettings(
        model=invocation.model,
        model_args=dict(invocation.model_args),
        tasks=list(invocation.tasks),
        metadata=dict(invocation.metadata),
        include_path=invocation.include_path[0] if invocation.include_path else None,
        apply_chat_template=bool(arguments.get("apply_chat_template")),
        limit=None if limit is None else float(limit),
        gen_kwargs=as_dict(arguments.get("gen_kwargs")) or None,  # key=value text or a dict
        device=device if isinstance(device, str) else None,
    )
