"""RULER tasks (``lch_ruler``): data from :mod:`harness.data.ruler`, scoring in :class:`RulerTask`."""

from harness.data.ruler import dataset_from_metadata
from harness.tasks.classes.generation import RulerTask


def ruler_dataset(**metadata):
    return dataset_from_metadata(metadata)


__all__ = ["RulerTask", "ruler_dataset"]
