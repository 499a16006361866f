"""Every key of ours in an lm-eval results file, named once: our models and tasks write them, reporting reads them."""

from __future__ import annotations

# in ``config`` (the run, from our models' ``get_model_info``)
RUN = "lch_run"  # the run record (core/run_record.py)
INFERENCE = "lch_inference"  # the PIC settings applied, as model args
VARIANT = "lch_variant"  # the checkpoint's variant file, or null
EVALUATED_AS = "lch_evaluated_as"  # that variant in words
DEVICE_ASKED = "lch_device_asked"  # lm-eval's --device when the model ran elsewhere (config.device: where it ran)
# at the top level, after a run of ours (plugin/finish_results.py)
ABSENT = "lch_absent"  # {task: {metric: why it was not computed}}; also in a task's metadata, its own reasons
CAUTIONS = "lch_cautions"  # {task: [sentence, ...]}
EFFECTIVE_LENGTH = "lch_effective_length"  # {task or group: {"absolute": ..., "relative": ...}} per len_<L> curve
COST = "lch_cost"  # wall time, device, peak memory, per task requests / tokens / seconds, the judge's (core/costs.py)
INVOCATION = "lch_invocation"  # how simple_evaluate was called: what lch rerun calls again (core/invocation.py)
GROUP_WEIGHTING = "lch_group_weighting"  # {group: whether its aggregates weight its tasks by size}, as they were made
SCORED = "lch_scored"  # {task: {"<metric>,<filter>": {"n", "digest"}}}: the documents each score rests on
# in ``configs.<task>.metadata`` (each task of ours: tasks/base.py)
CONFIGURATION = "lch_configuration"  # what the task measured with, compared by every report
METRIC_ROLES = "lch_metric_roles"  # {metric: perplexity | bookkeeping | score} (metrics/catalogue.py)
METRIC_POOLING = "lch_metric_pooling"  # {metric: its aggregation's pooling, metrics/pooling.py: POOLINGS}
SUPPORT = "lch_support"  # what each metric rests on (metrics/support.py)
AGGREGATED = "lch_aggregated"  # while aggregating: {metric: {"n", "stderr"}}, dropped before the results are written
