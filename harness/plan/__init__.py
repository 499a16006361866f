"""What a run will cost before it runs (`lch plan`): its requests counted, and a wall time from measured throughputs."""

LAYER = "pure"  # harness/devtools/layers.py
