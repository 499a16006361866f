"""Position ID Compression (the PIC paper): the settings (`inference`), the method registry (`methods`), the position
math (`positions`, pure), and the method applied to a model: on HF transformers (`hf`), on vLLM (`vllm`)."""

LAYER = "pure"  # harness/devtools/layers.py
