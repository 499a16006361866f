"""RULER tasks (``lch_ruler``): data from :mod:`harness.tasks.lch_ruler.dataset`, scoring in :class:`RulerTask`."""

from harness.tasks.lch_ruler.dataset import ruler_dataset
from harness.tasks.lch_ruler.task import RulerTask

__all__ = ["RulerTask", "ruler_dataset"]
