"""What a run will cost before it runs (`lch plan`): per task and length, the samples, the exact prompt tokens, the
generation budget, the tokens scored and the judge calls (`cells`, pure), counted from the very requests lm-eval
would send (`requests`), and an estimated wall time from throughputs measured on this machine (`throughput`)."""

LAYER = "pure"  # harness/devtools/layers.py
