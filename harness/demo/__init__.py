"""The embedded offline demos behind README's main command: :mod:`harness.demo.real` (``lch demo``,
SmolLM2-135M-Instruct) and :mod:`harness.demo.tiny` (``lch demo --tiny``, tiny models built in code)."""
