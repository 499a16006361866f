"""hellobench_htg(_2k/_4k/_8k/_16k): HelloBench heuristic text generation with HelloEval (SPEC.md §2)."""

from harness.data.longform import load_hellobench_htg
from harness.judges.stage import hellobench_quality_agg, hellobench_valid_agg
from harness.metrics.pooling import total
from harness.lmeval.tasks.custom import HelloBenchTask

__all__ = ["HelloBenchTask", "hellobench_quality_agg", "hellobench_valid_agg", "load_hellobench_htg", "total"]
