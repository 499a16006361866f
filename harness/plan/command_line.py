"""A run's plan from ``lch eval``'s own command line: its settings checked as ``lch eval`` checks them, and the
throughput its time estimate rests on (``lch plan`` and ``lch sweep`` both start here)."""

from __future__ import annotations

import sys
from typing import Any

from harness.core.errors import UsageError

LAYER = "lmeval"  # harness/devtools/layers.py: parses lm-eval's command line


def plan_settings(argv: list[str]) -> Any:
    """The :class:`harness.plan.make.EvalSettings` of an ``lch eval`` command line, its flags checked as there."""
    from harness.plan.make import EvalSettings
    from harness.plugin.activation import activate
    from harness.plugin.lm_eval_cli import parse_command_line
    from harness.plugin.lm_eval_flags import check_json_args, cli_settings
    from harness.plugin.preflight import as_dict, check_cli_run

    check_json_args(argv)
    activate()
    _, args = parse_command_line(argv)
    settings = cli_settings(args)
    tasks = settings.get("tasks")
    tasks = [t.strip() for t in (tasks.split(",") if isinstance(tasks, str) else tasks or []) if t.strip()]
    if not settings.get("model") or not tasks:
        raise UsageError("lch plan needs a run to plan: --model and --tasks, as `lch eval` takes them")
    check_cli_run(args)
    gen_kwargs = as_dict(settings.get("gen_kwargs"))  # key=value text or JSON, as lm-eval takes them
    limit = settings.get("limit")
    return EvalSettings(model=settings["model"], model_args=as_dict(getattr(args, "model_args", None)), tasks=tasks,
                       metadata=as_dict(settings.get("metadata")), include_path=settings.get("include_path"),
                       apply_chat_template=bool(settings.get("apply_chat_template")),
                       limit=None if limit is None else float(limit), gen_kwargs=gen_kwargs or None,
                       device=settings.get("device"))


def estimate_source(run, plan, calibrate: bool):
    """The throughput the time estimate rests on, in words: measured now (``--calibrate``), earlier, or none."""
    from harness.plan import throughput as tp
    from harness.plan.cells import totals

    setting = tp.setting_of(run.model, run.model_args, run.device)
    if calibrate:
        from harness.data.prompt_tokens import ModelKeys, model_max_length
        from harness.core.options import parse_options

        keys = parse_options(ModelKeys, {**run.model_args, **run.metadata})
        lengths = tp.calibration_lengths(totals(plan.cells)["longest_prompt"], model_max_length(keys))
        print(f"calibrating {run.model} at {lengths[0]} and {lengths[1]} prompt tokens ...", file=sys.stderr)
        found, points = tp.calibrate(tp.load_engine(run.model, run.model_args, setting["device"]), lengths)
        tp.store(setting, found, points)
        return found, "measured now"
    found = tp.stored(setting)
    return found, ("measured by an earlier `lch plan --calibrate` of this setting" if found is not None else None)
