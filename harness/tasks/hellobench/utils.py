"""hellobench_htg(_2k/_4k/_8k/_16k): HelloBench heuristic text generation with HelloEval (docs/formulas.md §2)."""

from harness.data.longform import load_hellobench_htg
from harness.metrics.pooling import total
from harness.tasks.longform import HelloBenchTask

__all__ = ["HelloBenchTask", "load_hellobench_htg", "total"]
