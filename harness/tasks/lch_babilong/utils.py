"""BABILong tasks (``lch_babilong``): data from :mod:`harness.data.babilong`, scoring in :class:`BabilongTask`."""

from harness.data.babilong import dataset_from_metadata
from harness.tasks.classes.generation import BabilongTask


def babilong_dataset(**metadata):
    return dataset_from_metadata(metadata)


__all__ = ["BabilongTask", "babilong_dataset"]
