"""longbench_write: LongBench-Write with the official judge prompt (SPEC.md §2). See README.md here."""

from harness.data.longform import load_longbench_write
from harness.judges.stage import longbench_write_quality_agg, longbench_write_total_agg, longbench_write_valid_agg
from harness.metrics.pooling import total
from harness.lmeval.tasks.custom import LongBenchWriteTask

__all__ = ["LongBenchWriteTask", "load_longbench_write", "longbench_write_quality_agg",
           "longbench_write_total_agg", "longbench_write_valid_agg", "total"]
