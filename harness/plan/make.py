"""``lch plan``'s work: a run's settings (as ``lch eval`` takes them) checked as a run checks them, then planned
task by task: a task that plans itself from its data cache (:meth:`harness.tasks.base.LchTask.plan_from_cache`)
does, the others have their requests built and counted (:mod:`harness.plan.requests`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.core.errors import UsageError
from harness.plan.cells import PlanCell

LAYER = "lmeval"  # harness/devtools/layers.py


@dataclass(frozen=True)
class RunSettings:
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
    """The cells of a run (one per task and length) and the tokenizer they were counted in."""

    cells: list[PlanCell]
    tokenizer: str


def make_plan(run: RunSettings) -> Plan:
    """The plan of ``run`` (module docstring); a one-line :class:`~harness.core.errors.UsageError` for a run that
    could not start (the preflight's checks) or that names a task not of ours (lm-eval's are not planned)."""
    from harness.core.run_record import asking_chat_template
    from harness.data.prompt_tokens import ModelKeys, PromptCounter, load_tokenizer, tokenizer_name
    from harness.core.options import parse_options
    from harness.plan.requests import plan_requests
    from harness.plugin.in_process import task_manager
    from harness.plugin.preflight import preflight, through_user_groups
    from harness.tasks import TASKS_PATH

    names = through_user_groups(run.tasks, run.include_path)
    if names is None:
        raise UsageError(f"lch plan plans the tasks of this package; {', '.join(run.tasks)} holds others: plan "
                         "them with their own harness, or leave them out")
    preflight(run.model, run.model_args, run.tasks, run.metadata, run.include_path)
    metadata = {**run.model_args, **run.metadata}  # as lm-eval's command line hands them to the tasks
    name = tokenizer_name(parse_options(ModelKeys, metadata))
    if name is None:
        raise UsageError("lch plan counts prompts in the evaluated model's tokenizer: pass --model_args "
                         "pretrained=<model> (or tokenizer=<name>)")
    counter = PromptCounter(load_tokenizer(name))
    from harness.plugin.metadata import check_task_options

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
                cells += [PlanCell(task, c.length, c.prompts, c.budgets, scored_tokens=c.scored_tokens, cached=c.cached)
                          for c in own]
        if counted:
            manager = task_manager([run.include_path] if run.include_path else (), metadata, ours_only=True)
            cells += plan_requests(manager, counted, counter, limit=run.limit,
                                   apply_chat_template=run.apply_chat_template, gen_kwargs=run.gen_kwargs)
    order = {task: i for i, task in enumerate(names)}
    cells.sort(key=lambda c: order.get(c.task, len(order)))  # stable: each task's lengths stay in order
    return Plan(cells, name)


def settings_of(invocation: Any) -> RunSettings:
    """The settings of the run a results file recorded (:class:`harness.core.invocation.Invocation`): what ``lch plan
    --against`` plans again to put its estimate beside what the run cost."""
    from harness.plugin.preflight import as_dict

    arguments = invocation.arguments
    limit = arguments.get("limit")
    device = arguments.get("device")
    return RunSettings(model=invocation.model, model_args=dict(invocation.model_args), tasks=list(invocation.tasks),
                       metadata=dict(invocation.metadata),
                       include_path=invocation.include_path[0] if invocation.include_path else None,
                       apply_chat_template=bool(arguments.get("apply_chat_template")),
                       limit=None if limit is None else float(limit),
                       gen_kwargs=as_dict(arguments.get("gen_kwargs")) or None,  # key=value text or a dict
                       device=device if isinstance(device, str) else None)

