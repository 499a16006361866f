"""RULER tasks (``lch_ruler``): data from :mod:`harness.data.ruler`, scoring in :class:`RulerTask`."""

from harness.data.ruler import ruler_dataset
from harness.tasks.classes.generation import RulerTask


__all__ = ["RulerTask", "ruler_dataset"]
