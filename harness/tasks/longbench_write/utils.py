"""longbench_write: LongBench-Write with the official judge prompt (docs/formulas.md §2). See README.md here."""

from harness.data.longform import load_longbench_write
from harness.metrics.pooling import total
from harness.tasks.longform import LongBenchWriteTask

__all__ = ["LongBenchWriteTask", "load_longbench_write", "total"]
