"""Soft-prompt context compressors with Enhanced Position Layout (the EPL paper) end to end: position layouts
(`positions`, pure), the compressor model (`model`), training (`train`), the lm-eval model (`lm`) and its tasks (`tasks`)."""

LAYER = "pure"  # harness/devtools/layers.py
