"""Position ID Compression (paper 000): the settings (`inference`), the method registry (`methods`), the position
math (`positions`, pure), and the method applied to a model: on HF transformers (`hf`), on vLLM (`vllm`)."""
