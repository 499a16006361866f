"""Soft-prompt context compressors with Enhanced Position Layout (the EPL paper): position layouts (`positions`,
pure), settings (`config`), the compressor model (`model`) and its training (`train`)."""

LAYER = "pure"  # harness/devtools/layers.py
