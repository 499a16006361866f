"""BABILong tasks (``lch_babilong``): data from :mod:`harness.tasks.lch_babilong.dataset`, scoring in
:class:`BabilongTask`."""

from harness.tasks.lch_babilong.dataset import babilong_dataset
from harness.tasks.lch_babilong.task import BabilongTask

__all__ = ["BabilongTask", "babilong_dataset"]
