"""BABILong tasks (``lch_babilong``): data from :mod:`harness.data.babilong`, scoring in :class:`BabilongTask`."""

from harness.data.babilong import babilong_dataset
from harness.tasks.classes.generation import BabilongTask


__all__ = ["BabilongTask", "babilong_dataset"]
