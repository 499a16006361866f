"""The engines our lm-eval models run on: the request types (`requests`), the engine core that answers them from
each engine's primitives (`core`), the model args resolved once (`model_args`), the registry of our lm-eval models
(`registry`), the response cache, scoring windows, and one module or folder per engine (`hf_pic`, `vllm_pic`)."""
