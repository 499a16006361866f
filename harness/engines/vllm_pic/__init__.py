"""The `vllm-pic` engine: the lm-eval model (`lm`), its scoring primitives on vLLM (`scoring`), the guarded vLLM
imports (`imports`) and the CPU vLLM environment `lch vllm-env` builds (`env`)."""
