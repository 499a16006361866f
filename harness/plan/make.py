"""``lch plan``'s work: a run's settings checked, then each task planned from its data cache or its built requests."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Collection

from harness.core.errors import UsageError
from harness.core.sizes import GIB
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


# a run's extra memory for a task planned from its cache (lm-eval builds its requests): benchmarks/plan_memory_cpu.py
TASK_BUILD = int(0.15 * GIB)


def make_plan(run: EvalSettings, device: DeviceMemory | None = None,
              helpers_ran: Collection[tuple[str, str]] = ()) -> Plan:
    """The plan of ``run``; :class:`UsageError` for a run that could not start or that names others' tasks.
    ``helpers_ran``: ``(model, dtype)`` of the models a recorded run loaded beside its own (``lch plan --against``:
    LongPPL's evaluator ran there though its key tokens are cached now)."""
    from harness.core.run_record import asking_chat_template
    from harness.data.prompt_tokens import ModelKeys, PromptCounter, load_tokenizer, tokenizer_name
    from harness.core.options import parse_options
    from harness.plan.requests import plan_requests
    from harness.plugin.in_process import task_manager
    from harness.plugin.preflight import preflight, through_user_groups
    from harness.tasks import TASKS_PATH

    device = device or run_device_memory(run)  # before a tokenizer or a document is read here
    names = through_user_groups(run.tasks, run.include_path)
    if names is None:
        raise UsageError(f"lch plan plans the tasks of this package; {', '.join(run.tasks)} holds others: plan "
                         "them with their own harness, or leave them out")
    preflight(run.model, run.model_args, run.tasks, run.metadata, run.include_path, planning=True)
    metadata = {**run.model_args, **run.metadata}  # as lm-eval's command line hands them to the tasks
    name = tokenizer_name(parse_options(ModelKeys, metadata))
    if name is None:
        raise UsageError("lch plan counts prompts in the evaluated model's tokenizer: pass --model_args "
                         "pretrained=<model> (or tokenizer=<name>)")
    counter = PromptCounter(load_tokenizer(name))
    from harness.plugin.metadata import check_task_options

    parsed = check_task_options(run.metadata, run.model_args, names, str(TASKS_PATH))
    cells: list[PlanCell] = []
    from_cache = False
    with asking_chat_template(run.apply_chat_template):
        counted = []
        for task in names:
            task_class, model_keys, options = parsed.get(task, (None, None, None))
            planner = getattr(task_class, "plan_from_cache", None)
            own = planner(model_keys, options, run.limit) if callable(planner) else None
            if own is None:
                counted.append(task)
            else:
                from_cache = True
                cells += [PlanCell(task, c.length, c.prompts, c.budgets, scored_tokens=c.scored_tokens, cached=c.cached,
                                   helper=c.helper) for c in own]
        if counted:
            manager = task_manager([run.include_path] if run.include_path else (), metadata, ours_only=True)
            cells += plan_requests(manager, counted, counter, limit=run.limit,
                                   apply_chat_template=run.apply_chat_template, gen_kwargs=run.gen_kwargs)
    order = {task: i for i, task in enumerate(names)}
    cells.sort(key=lambda c: order.get(c.task, len(order)))  # stable: each task's lengths stay in order
    if device.kind == "cpu":
        device = replace(device, runtime=own_resident_bytes() + (TASK_BUILD if from_cache else 0))
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


def with_memory(cells: list[PlanCell], run: EvalSettings, device: DeviceMemory,
                helpers_ran: Collection[tuple[str, str]] = ()) -> tuple[list[PlanCell], list[str]]:
    """Each cell with its longest request's memory (from the model's config) and whether it fits ``device``, and what
    would fit each misfit; a cell's helper counts where what it makes is not cached, or where it is in
    ``helpers_ran``. Only hf-pic and vllm-pic runs with a ``pretrained`` are sized."""
    from harness.core.sizes import in_words

    pretrained = run.model_args.get("pretrained")
    if run.model not in ("hf-pic", "vllm-pic") or not isinstance(pretrained, str) or not cells:
        return cells, []
    dtype = str(run.model_args.get("dtype") or "auto")
    pooled = run.model == "vllm-pic" and any(cell.scored_tokens for cell in cells)
    need, room = _need_function(run, pretrained, dtype, device, pooled)
    out, misfits, engines_fit = [], [], True
    if pooled and device.kind == "cuda":
        from harness.engines.vllm_pic.lm import POOLED_GPU_MEMORY

        share = float(run.model_args.get("gpu_memory_utilization", 0.9))
        if share > POOLED_GPU_MEMORY:
            engines_fit = False
            misfits.append(f"the run scores from hidden states: vllm-pic starts a pooling engine beside the generating "
                           f"one on {device.name}, each with gpu_memory_utilization={share:g}: pass "
                           f"gpu_memory_utilization={POOLED_GPU_MEMORY} (each cell's memory is one engine's)")
    for cell in cells:
        budget = max(cell.budgets, default=0)
        scores = scores_only(cell.scored_tokens, sum(cell.budgets))
        helper = cell.helper if cell.helper and (not cell.cached or cell.helper in helpers_ran) else None
        beside = _helper_need(helper, pretrained, dtype, device) if helper else (lambda prompt: 0)
        if beside is None:  # a helper whose config is not at hand here: the cell's memory is not known
            out.append(cell)
            continue
        cell_need = (lambda prompt, need=need, beside=beside, budget=budget, scores=scores:
                     need(prompt, budget, scores) + beside(prompt))
        total = cell_need(cell.longest_prompt)
        short = _vllm_cpu_cache_short(run, pretrained, dtype, device, cell.longest_prompt + budget)
        out.append(replace(cell, memory=total, fits=total <= room and short is None and engines_fit))
        if short is not None:
            misfits.append(f"{cell.task} {cell.length}: {short}")
        if total <= room:
            continue
        lo, hi = 0, cell.longest_prompt  # the longest prompt that fits: need grows with the prompt
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if cell_need(mid) <= room else (lo, mid - 1)
        ways = [f"prompts up to {lo:,} tokens fit" if lo else "no prompt fits beside the weights"]
        if dtype in ("auto", "float32"):
            narrow, _ = _need_function(run, pretrained, "bfloat16", device, pooled)
            halved = narrow(cell.longest_prompt, budget, scores) + beside(cell.longest_prompt)
            ways.append(f"dtype=bfloat16 needs {in_words(halved)}")
        if run.model == "vllm-pic" and device.kind == "cuda":
            ways.append(f"tensor_parallel_size={-(-total // room)} spreads it over that many such devices")
        misfits.append(f"{cell.task} {cell.length}: needs {in_words(total)}, {device.name} has {in_words(room)}"
                       f"{' for vLLM' if run.model == 'vllm-pic' else ''}: {'; '.join(ways)}")
    return out, misfits


def _helper_need(helper: tuple[str, str], pretrained: str, dtype: str, device: DeviceMemory):  # noqa: ANN202
    """``beside(prompt) -> bytes`` a helper model (LongPPL's evaluator) adds to the evaluated model's; None when its
    config cannot be read here. On the CPU, mapped weights are resident only while read: the phases do not overlap."""
    from harness.models.device_sizing import model_dtype
    from harness.models.memory import meta_model, request_need

    name, helper_dtype = helper
    try:
        model = meta_model(name, helper_dtype)
    except (OSError, ValueError):
        return None
    evaluated = meta_model(pretrained, dtype)
    mapped = device.kind == "cpu" and model_dtype(evaluated) == model_dtype(meta_model(pretrained, "auto"))

    def beside(prompt: int) -> int:
        own = request_need(model, prompt, scores=True, device=device.kind)
        theirs = request_need(evaluated, prompt, scores=True, device=device.kind)
        if mapped:
            return max(0, own.weights + own.work - theirs.weights - theirs.work)
        return own.weights + max(0, own.work - theirs.work)

    return beside


def _need_function(run: EvalSettings, pretrained: str, dtype: str, device: DeviceMemory,
                   pooled: bool = False):  # noqa: ANN202
    """``(need(prompt, budget, scores) -> bytes, room)`` on ``device``; ``pooled``: vllm-pic adds a pooling engine."""
    from harness.models.memory import meta_model, request_need

    model = meta_model(pretrained, dtype)
    if run.model != "vllm-pic":
        return (lambda prompt, budget, scores: device.runtime + request_need(model, prompt, budget, scores=scores,
                                                                              device=device.kind).total), device.size
    from harness.engines.vllm_pic.memory import vllm_need

    shape = _engine_shape(pretrained, dtype, device)
    share = float(run.model_args.get("gpu_memory_utilization", 0.9)) if device.kind == "cuda" else 1.0
    runtime = device.runtime if device.kind == "cpu" else 0
    return (lambda prompt, budget, scores: runtime + vllm_need(shape, run.model_args, device.kind, device.size, prompt,
                                                               budget, scores, pooled)), int(device.size * share)


def _engine_shape(pretrained: str, dtype: str, device: DeviceMemory) -> Any:
    """:class:`~harness.engines.vllm_pic.memory.EngineShape` of the model, from its meta model."""
    from harness.engines.vllm_pic.memory import EngineShape
    from harness.models.device_sizing import text_config
    from harness.models.memory import kv_cache_bytes, meta_model, request_need, weight_bytes

    model = meta_model(pretrained, dtype)
    config = text_config(model)
    return EngineShape(weight_bytes(model), lambda n: kv_cache_bytes(model, n), int(config.hidden_size),
                       int(config.vocab_size), lambda n: request_need(model, n, scores=True, device=device.kind).work)


def _vllm_cpu_cache_short(run: EvalSettings, pretrained: str, dtype: str, device: DeviceMemory,
                          tokens: int) -> str | None:
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
    return EvalSettings(model=invocation.model, model_args=dict(invocation.model_args), tasks=list(invocation.tasks),
                       metadata=dict(invocation.metadata),
                       include_path=invocation.include_path[0] if invocation.include_path else None,
                       apply_chat_template=bool(arguments.get("apply_chat_template")),
                       limit=None if limit is None else float(limit),
                       gen_kwargs=as_dict(arguments.get("gen_kwargs")) or None,  # key=value text or a dict
                       device=device if isinstance(device, str) else None)

