"""lsm_govreport: long-short misalignment on GovReport documents (docs/formulas.md §4). See README.md here."""

from harness.data.govreport import load_govreport
from harness.metrics.pooling import pooled_mean, total
from harness.tasks.logprob import LSMTask

__all__ = ["LSMTask", "load_govreport", "pooled_mean", "total"]
