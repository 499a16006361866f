"""A run's plan from ``lch eval``'s own command line: its settings checked as ``lch eval`` checks them, and the
throughput its time estimate rests on (``lch plan`` and ``lch sweep`` both start here)."""

from __future__ import annotations

import sys
from typing import Any

from harness.core.errors import UsageError

LAYER = "lmeval"  # harness/devtools/layers.py: parses lm-eval's command line


def plan_settings(argv: list[str]) -> Any:
    """The :class:`harness.plan.make.EvalSettings` of an ``lch eval`` command line: what lm-eval's own ``run`` command
    would hand ``simple_evaluate``, admitted by the door as ``lch eval`` would be (a refusal names lm-eval's flag)."""
    from harness.plan.make import EvalSettings
    from harness.plugin.activation import activate
    from harness.plugin.command_line import planned_run
    from harness.plugin.preflight import SettingRefused, as_dict, own_metadata

    activate()
    try:
        run = planned_run(argv)
    except SettingRefused as err:
        raise UsageError(err.on_command_line) from None
    model_args = as_dict(run.get("model_args"))
    metadata = own_metadata(run.get("metadata"), model_args)
    include_path, limit = run.get("include_path"), run.get("limit")
    if not run.get("model") or not run.get("tasks"):
        raise UsageError("lch plan needs a run to plan: --model and --tasks, as `lch eval` takes them")
    return EvalSettings(
        model=run["model"],
        model_args=model_args,
        tasks=list(run.get("tasks") or []),
        metadata=metadata,
        include_path=include_path if isinstance(include_path, str) else None,
        apply_chat_template=bool(run.get("apply_chat_template")),
        limit=None if limit is None else float(limit),
        gen_kwargs=as_dict(run.get("gen_kwargs")) or None,
        device=run.get("device"),
    )


def estimate_source(run, plan, calibrate: bool):
    """The throughput the time estimate rests on, in words: measured now (``--calibrate``), earlier, or none."""
    from harness.plan import throughput as tp
    from harness.plan.cells import totals

    setting = tp.setting_of(run.model, run.model_args, run.device)
    if calibrate:
        from harness.core.options import parse_options
        from harness.data.prompt_tokens import ModelKeys, model_max_length

        keys = parse_options(ModelKeys, {**run.model_args, **run.metadata})
        lengths = tp.calibration_lengths(int(totals(plan.cells)["longest_prompt"] or 0), model_max_length(keys))
        print(f"calibrating {run.model} at {lengths[0]} and {lengths[1]} prompt tokens ...", file=sys.stderr)
        found, points = tp.calibrate(tp.load_engine(run.model, run.model_args, setting["device"]), lengths)
        tp.store(setting, found, points)
        return found, "measured now"
    stored = tp.stored(setting)
    return stored, ("measured by an earlier `lch plan --calibrate` of this setting" if stored is not None else None)
