"""`lch rerun RESULTS_FILE`: a result made again from its own file and compared with it sample by sample. The run's
invocation (`harness.core.invocation`) says what to call; its run record (`harness.core.run_record`) what it was run
with, which `environment` holds against this machine before anything runs; `reproduce` (app layer: a run, then a
report of it) runs it and compares."""

LAYER = "lmeval"  # harness/devtools/layers.py
