"""PIC inside vLLM: the rotary math vLLM runs (`positions`), the checks and overrides made before vLLM loads
(`config`, no vLLM import) and the one module on vLLM's internals (`model`: the `Pic<Arch>` classes)."""

LAYER = "models"  # harness/devtools/layers.py
