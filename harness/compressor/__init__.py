"""Soft-prompt context compressors with Enhanced Position Layout (paper 003) end to end: position layouts
(`positions`, pure), the compressor model (`model`), training (`train`), the lm-eval model (`lm`) and its tasks (`tasks`)."""
