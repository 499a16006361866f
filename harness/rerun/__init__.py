"""``lch rerun RESULTS_FILE``: a result made again from its own file and compared with it sample by sample;
`environment` holds its run record against this machine before anything runs, `reproduce` runs and compares."""

LAYER = "lmeval"  # harness/devtools/layers.py
