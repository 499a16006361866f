"""``lch sweep``: a grid of cells (models or checkpoints x model-arg variants, each one ``lch eval`` run over the
sweep's tasks and lengths) planned, placed on a Ray cluster by planned memory, resumable, gathered. `spec` declares
and expands, `placement` sizes a cell's ask (pure), `run` plans and runs on Ray, `worker` runs one cell where Ray put
it, `gather` prints and writes what a sweep made."""

LAYER = "app"  # harness/devtools/layers.py
