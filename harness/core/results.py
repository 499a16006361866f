"""Every key of ours in an lm-eval results file, named once: our models and tasks write them, reporting reads them.

Where each lives in lm-eval's results JSON (``results_<date>.json``):

* ``config`` (the run, from our models' ``get_model_info``): :data:`RUN` (the run record,
  :class:`harness.core.run_record.RunRecord`), :data:`INFERENCE` (the PIC settings applied, as model args),
  :data:`VARIANT` (the checkpoint's variant file, or null), :data:`EVALUATED_AS` (that variant in words), and
  :data:`DEVICE_ASKED` (lm-eval's ``--device`` when the model ran elsewhere: ``config.device`` says where it ran);
* the top level (after a run of ours, :mod:`harness.plugin.finish_results`): :data:`ABSENT` (``{task: {metric: why
  it was not computed}}``), :data:`CAUTIONS` (``{task: [sentence, ...]}``) and :data:`EFFECTIVE_LENGTH` (``{task or
  group: {"absolute": {...}, "relative": {...}}}`` for each curve of ``len_<L>`` scores:
  :mod:`harness.metrics.context_length`), :data:`COST` (what the run cost: wall seconds, the device by name, its peak
  memory, each task's requests, tokens and seconds, the judge's requests and tokens: :mod:`harness.core.costs`,
  :func:`harness.plugin.finish_results.record_cost`), :data:`INVOCATION` (how ``simple_evaluate`` was called:
  :class:`harness.core.invocation.Invocation`, what ``lch rerun`` calls again), :data:`SCORED` (when samples were
  logged: ``{task: {"<metric>,<filter>": {"n": documents, "digest": ...}}}``, which documents each score rests on:
  :mod:`harness.metrics.common_samples`, compared across runs by ``lch leaderboard``);
* ``configs.<task>.metadata`` (each task of ours, :class:`harness.tasks.base.LchTask`): :data:`CONFIGURATION`
  (what it measured with, compared by every report), :data:`METRIC_ROLES` (``{metric: perplexity | bookkeeping |
  score}``, :mod:`harness.metrics.catalogue`), :data:`SUPPORT` (what each metric rests on,
  :mod:`harness.metrics.support`) and :data:`ABSENT` (the task's own reasons for a metric it could not compute); while
  a run aggregates, :data:`AGGREGATED` (``{metric: {"n": documents that had it, "stderr": ...}}``, from
  :class:`harness.tasks.metric_lists.PresentItems`), which the run's results take up and drop before they are written.
"""

from __future__ import annotations

RUN = "lch_run"
INFERENCE = "lch_inference"
VARIANT = "lch_variant"
EVALUATED_AS = "lch_evaluated_as"
DEVICE_ASKED = "lch_device_asked"
ABSENT = "lch_absent"
CAUTIONS = "lch_cautions"
EFFECTIVE_LENGTH = "lch_effective_length"
COST = "lch_cost"
INVOCATION = "lch_invocation"
SCORED = "lch_scored"
CONFIGURATION = "lch_configuration"
METRIC_ROLES = "lch_metric_roles"
SUPPORT = "lch_support"
AGGREGATED = "lch_aggregated"
