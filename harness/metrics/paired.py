"""Paired comparisons of two runs scored on the same documents, over the differences ``d_i = b_i - a_i`` (``a``: the
reference): the mean difference with a seeded bootstrap interval, a paired test and the smallest effect the
comparison could detect. Pure: numbers in, numbers out; degenerate data give stated values, never NaN."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

Scores = Sequence[float] | np.ndarray  # one run's per-sample scores
DEFAULT_RESAMPLES = 10_000  # bootstrap resamples of the pairs
DEFAULT_SEED = 0  # of numpy.random.default_rng: the same data give the same interval
DEFAULT_CONFIDENCE = 0.95
DEFAULT_ALPHA = 0.05  # two-sided level of the test and of the minimum detectable effect
DEFAULT_POWER = 0.8
INTERVALS = ("percentile", "bca")
TESTS = ("auto", "wilcoxon", "t")
_CHUNK = 2**22  # index draws per block of resamples (scipy.stats.bootstrap's batch; memory: 8 bytes each)


@dataclass(frozen=True)
class PairedDifference:
    """The paired comparison of ``b`` with ``a``: ``delta = mean_b - mean_a``, its bootstrap interval ``low`` / ``high``
    at ``confidence`` (``interval``: ``percentile``, ``bca``, or ``none`` when resamples cannot differ), the paired
    test's ``p_value``, ``sd_diff`` (sample sd) and the ``mde`` at ``alpha`` / ``power``. None: no such number (n = 0:
    every estimate; n = 1: ``sd_diff`` and ``mde``)."""

    n: int
    mean_a: float | None
    mean_b: float | None
    delta: float | None
    low: float | None
    high: float | None
    confidence: float
    interval: str
    test: str
    p_value: float
    sd_diff: float | None
    mde: float | None
    alpha: float
    power: float


def _as_pairs(a: Scores, b: Scores) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"paired values need two sequences of one length (got {x.shape} and {y.shape})")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("paired values must be finite numbers (a NaN or inf has no difference)")
    return x, y


def _check(confidence: float, resamples: int) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if int(resamples) != resamples or resamples < 1:
        raise ValueError(f"resamples must be a positive integer, got {resamples}")


def bootstrap_interval(
    diffs: Sequence[float],
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    method: str = "percentile",
) -> tuple[float, float, str]:
    """``(low, high, method)``: ``scipy.stats.bootstrap``'s interval of ``mean(diffs)``, percentile or BCa (Efron and
    Tibshirani 1993, 14.3), resample ``k`` being row ``k`` of ``default_rng(seed).integers(0, n, (rows, n))`` drawn a
    block of ``rows = max(1, 2^22 // n)`` at a time. Resamples that cannot differ give ``[mean, mean]``, method
    ``none``; a BCa scipy cannot compute (a bias ``z0`` that is not finite) falls back to ``percentile``."""
    from scipy import stats

    _check(confidence, resamples)
    if method not in INTERVALS:
        raise ValueError(f"interval method {method!r} is not one of {INTERVALS}")
    d = np.asarray(diffs, dtype=float)
    if d.size == 0:
        raise ValueError("no pairs: no interval")
    estimate = float(d.mean())
    if d.size == 1 or np.all(d == d[0]):
        return estimate, estimate, "none"
    settings = {"confidence_level": confidence, "vectorized": True, "batch": max(1, _CHUNK // d.size)}
    # scipy does not guard BCa's 1 - a (z0 + z) <= 0; for a mean |a| < 1/6 and z0 stays near 0, so it does not arise
    with warnings.catch_warnings():  # scipy's DegenerateDataWarning: the NaN interval below
        warnings.simplefilter("ignore")
        found = stats.bootstrap(
            (d,),
            np.mean,
            n_resamples=int(resamples),
            rng=np.random.default_rng(seed),
            method="BCa" if method == "bca" else "percentile",
            **settings,
        )
    if np.isnan(found.confidence_interval.low) or np.isnan(found.confidence_interval.high):
        method = "percentile"  # from the very same resamples
        found = stats.bootstrap((d,), np.mean, n_resamples=0, bootstrap_result=found, method=method, **settings)
    return float(found.confidence_interval.low), float(found.confidence_interval.high), method


def two_valued(a: Scores, b: Scores) -> bool:
    """Whether the scores take at most two values over both runs (0/1, 0/100): then McNemar's test applies."""
    return len(set(map(float, a)) | set(map(float, b))) <= 2


def paired_test(a: Scores, b: Scores, test: str = "auto") -> tuple[str, float]:
    """``(name, two-sided p)`` of the paired test of ``b`` against ``a``: exact McNemar for two-valued scores whatever
    ``test`` (the sign test on the ``u + v`` discordant pairs, ``binomtest(u, u + v, 0.5)``), else Wilcoxon signed-rank
    (zero differences split) or with ``t`` the paired t-test (a constant non-zero difference: the sign test,
    ``2 * 0.5^n``). No pair, or none that differs: p = 1."""
    from scipy import stats

    if test not in TESTS:
        raise ValueError(f"paired test {test!r} is not one of {TESTS}")
    x, y = _as_pairs(a, b)
    if x.size == 0:
        return "none (no pairs)", 1.0
    d = y - x
    if not np.any(d):
        return "none (no pair differs)", 1.0
    if two_valued(x, y):
        high = max(max(x), max(y))
        a_only = int(np.count_nonzero((x == high) & (y != high)))
        b_only = int(np.count_nonzero((y == high) & (x != high)))
        return "McNemar (exact)", float(stats.binomtest(a_only, a_only + b_only, 0.5).pvalue)
    if test == "t" and np.all(d == d[0]):
        return "sign test (constant difference)", float(stats.binomtest(d.size, d.size, 0.5).pvalue)
    with warnings.catch_warnings():  # scipy's notes on switching from the exact to the normal distribution
        warnings.simplefilter("ignore")
        if test == "t":
            return "paired t", float(stats.ttest_rel(y, x).pvalue)
        return "Wilcoxon signed-rank", float(stats.wilcoxon(x, y, zero_method="zsplit").pvalue)


def minimum_detectable_effect(
    sd_diff: float, n: int, alpha: float = DEFAULT_ALPHA, power: float = DEFAULT_POWER
) -> float | None:
    """``MDE = (z_{1-alpha/2} + z_{power}) * sd_diff / sqrt(n)`` (2.80158 sd_diff / sqrt(n) at 0.05 and 0.8), in the
    scores' units; None for n < 2; ``sd_diff = 0`` gives 0."""
    if not 0.0 < alpha < 1.0 or not 0.0 < power < 1.0:
        raise ValueError(f"alpha and power must be in (0, 1), got {alpha} and {power}")
    if n < 2:
        return None
    normal = NormalDist()
    return (normal.inv_cdf(1.0 - alpha / 2.0) + normal.inv_cdf(power)) * float(sd_diff) / math.sqrt(n)


def mcnemar_floor(a: Scores, b: Scores, alpha: float = DEFAULT_ALPHA) -> float | None:
    """The smallest ``|delta|`` the exact McNemar test at level ``alpha`` can call significant on these ``n`` pairs of
    two-valued scores: ``k * spread / n`` for the least ``k`` with ``2 * 0.5^k < alpha`` (6 at 0.05), spread being the
    two values' difference or ``|v|`` when every score is ``v``; None when not two-valued or no pairs."""
    values = set(map(float, a)) | set(map(float, b))
    if not values or len(values) > 2 or len(a) == 0:
        return None
    spread = max(values) - min(values) if len(values) == 2 else abs(next(iter(values)))
    k = 1
    while 2 * 0.5**k >= alpha:
        k += 1
    return k * spread / len(a)


def paired_difference(
    a: Sequence[float],
    b: Sequence[float],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    interval: str = "percentile",
    test: str = "auto",
    alpha: float = DEFAULT_ALPHA,
    power: float = DEFAULT_POWER,
) -> PairedDifference:
    """``b`` compared with ``a``, pair by pair; the MDE of two-valued scores never below :func:`mcnemar_floor`. n = 0:
    every estimate None, test ``none (no pairs)``, p = 1. n = 1: means, delta, interval ``[delta, delta]`` (method
    ``none``), p = 1, ``sd_diff`` and ``mde`` None. Every difference ``c`` (n >= 2): interval ``[c, c]`` (``none``),
    ``sd_diff`` 0, ``mde`` 0 (or McNemar's floor), p = 1 for ``c = 0``, else the test's (``2 * 0.5^n`` for McNemar,
    the sign test and Wilcoxon up to n = 50)."""
    _check(confidence, resamples)
    x, y = _as_pairs(a, b)
    name, p = paired_test(x, y, test)
    n = int(x.size)
    if n == 0:
        return PairedDifference(0, None, None, None, None, None, confidence, "none", name, p, None, None, alpha, power)
    d = y - x
    low, high, method = bootstrap_interval(d, confidence, resamples, seed, interval)
    sd = float(np.std(d, ddof=1)) if n >= 2 else None
    mde = minimum_detectable_effect(sd, n, alpha, power) if sd is not None else None
    floor = mcnemar_floor(x, y, alpha) if mde is not None else None
    if mde is not None and floor is not None:  # a floor is computed only with an mde
        mde = max(mde, floor)
    return PairedDifference(
        n,
        float(x.mean()),
        float(y.mean()),
        float(d.mean()),
        low,
        high,
        confidence,
        method,
        name,
        p,
        sd,
        mde,
        alpha,
        power,
    )
