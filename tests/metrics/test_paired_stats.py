"""harness.metrics.paired against hand computation and scipy: exact McNemar on a known discordant count, the
bootstrap intervals against the textbook ones written out here on the very same resamples, the MDE formula, and the
degenerate cases (n = 0, n = 1, every difference equal), none of which gives NaN."""

from __future__ import annotations

import math
from math import comb

import numpy as np
import pytest
from scipy import stats

from harness.metrics.paired import (
    DEFAULT_RESAMPLES,
    bootstrap_interval,
    minimum_detectable_effect,
    paired_difference,
    paired_test,
)


def _scores(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    a = rng.normal(50.0, 10.0, n)
    return a, a + rng.normal(-2.0, 4.0, n) + rng.exponential(1.0, n)  # skewed differences: BCa moves off percentile


def test_exact_mcnemar_on_a_known_discordant_count():
    # 0/100 scores: 7 documents right only in A, 2 right only in B, 11 concordant (6 both right, 5 both wrong)
    a = [100.0] * 7 + [0.0] * 2 + [100.0] * 6 + [0.0] * 5
    b = [0.0] * 7 + [100.0] * 2 + [100.0] * 6 + [0.0] * 5
    # two-sided exact binomial on the 9 discordant pairs: 2 * P(X <= 2), X ~ Bin(9, 1/2)
    by_hand = 2 * sum(comb(9, k) for k in range(3)) / 2**9
    assert by_hand == pytest.approx(92 / 512)
    assert paired_test(a, b) == ("McNemar (exact)", pytest.approx(by_hand, rel=1e-12))
    # 0/1 scores are the same test; the direction does not matter
    assert paired_test([x / 100 for x in b], [x / 100 for x in a])[1] == pytest.approx(by_hand, rel=1e-12)
    d = paired_difference(a, b)
    assert (d.n, d.mean_a, d.mean_b, d.delta) == (20, 65.0, 40.0, -25.0)
    assert d.p_value == pytest.approx(by_hand, rel=1e-12) and d.test == "McNemar (exact)"


def _textbook_interval(d: np.ndarray, confidence: float, resamples: int, seed: int, method: str) -> tuple[float, float]:
    """The interval written out from Efron and Tibshirani (1993), 13.3 and 14.3, on resamples drawn as rows of
    ``default_rng(seed).integers(0, n, (resamples, n))``: percentile, or BCa with the bias ``z0`` from the share of
    resampled means below the estimate (ties counted half) and the acceleration from the leave-one-out means."""
    means = d[np.random.default_rng(seed).integers(0, d.size, (resamples, d.size))].mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    levels = [alpha, 1.0 - alpha]
    if method == "bca":
        share = (np.count_nonzero(means < d.mean()) + np.count_nonzero(means <= d.mean())) / (2.0 * resamples)
        z0 = stats.norm.ppf(share)
        leave_one_out = (d.sum() - d) / (d.size - 1)
        u = leave_one_out.mean() - leave_one_out
        accel = np.sum(u**3) / (6.0 * np.sum(u**2) ** 1.5)
        levels = [stats.norm.cdf(z0 + (z0 + z) / (1.0 - accel * (z0 + z))) for z in stats.norm.ppf(levels)]
    low, high = np.quantile(means, levels)
    return float(low), float(high)


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_bootstrap_interval_is_the_textbook_interval_on_the_same_resamples(method):
    """scipy.stats.bootstrap draws its resamples as rows of rng.integers(0, n, (B, n)) from the generator it is given:
    the interval is the one written out above from the same resamples, to rounding."""
    a, b = _scores(np.random.default_rng(7), 60)
    low, high, used = bootstrap_interval(b - a, 0.95, DEFAULT_RESAMPLES, seed=123, method=method)
    assert used == method
    assert (low, high) == pytest.approx(_textbook_interval(b - a, 0.95, DEFAULT_RESAMPLES, 123, method), abs=1e-9)
    assert low < float(np.mean(b - a)) < high
    # the same seed gives the same interval; another seed a close one
    assert bootstrap_interval(b - a, seed=123, method=method)[:2] == (low, high)
    other = bootstrap_interval(b - a, seed=124, method=method)
    assert other[:2] != (low, high) and other[0] == pytest.approx(low, abs=0.5)
    if method == "bca":  # skewed differences: the bias correction moves the interval
        percentile = bootstrap_interval(b - a, seed=123)
        assert (low, high) != percentile[:2]


def test_bootstrap_draws_blocks_of_rows_when_the_pairs_are_many():
    """Past 2^22 index draws the resamples come a block of 2^22 // n rows at a time, from one generator."""
    d = np.random.default_rng(5).exponential(1.0, 5000) - 1.0  # 838 rows a block: 3 blocks for 2,000 resamples
    rng = np.random.default_rng(9)
    means = np.concatenate([d[rng.integers(0, d.size, (rows, d.size))].mean(axis=1) for rows in (838, 838, 324)])
    low, high, _ = bootstrap_interval(d, 0.9, 2000, seed=9)
    assert (low, high) == pytest.approx(tuple(np.quantile(means, [0.05, 0.95])), abs=1e-12)


def test_a_bca_that_cannot_be_computed_falls_back_to_percentile():
    """Three zeros and 1e-300: the acceleration's sums underflow to 0, so BCa has no value; the interval is the
    percentile one, [0, 0.75e-300] (the resampled means are multiples of 0.25e-300)."""
    low, high, used = bootstrap_interval([0.0, 0.0, 0.0, 1e-300], method="bca")
    assert used == "percentile"
    assert (low, high) == bootstrap_interval([0.0, 0.0, 0.0, 1e-300], method="percentile")[:2] == (0.0, 7.5e-301)


def test_minimum_detectable_effect_is_the_formula():
    d = np.array([1.0, -2.0, 0.5, 3.0, -1.5, 2.5, 0.0, 1.0])
    sd = math.sqrt(sum((x - d.mean()) ** 2 for x in d) / (len(d) - 1))  # sample sd, n - 1
    z = 1.959963984540054 + 0.8416212335729143  # z_{0.975} + z_{0.8}
    assert minimum_detectable_effect(sd, len(d)) == pytest.approx(z * sd / math.sqrt(8), rel=1e-12)
    result = paired_difference(np.zeros(8), d)
    assert result.sd_diff == pytest.approx(sd, rel=1e-12)
    assert result.mde == pytest.approx(z * sd / math.sqrt(8), rel=1e-12)
    z_90 = stats.norm.ppf(0.995) + stats.norm.ppf(0.9)  # alpha 0.01, power 0.9
    assert minimum_detectable_effect(sd, 8, alpha=0.01, power=0.9) == pytest.approx(z_90 * sd / math.sqrt(8), rel=1e-9)


def test_other_tests_are_scipys():
    a, b = _scores(np.random.default_rng(3), 30)
    assert paired_test(a, b, "t") == ("paired t", pytest.approx(stats.ttest_rel(b, a).pvalue, rel=1e-12))
    assert paired_test(a, b) == (
        "Wilcoxon signed-rank",
        pytest.approx(stats.wilcoxon(a, b, zero_method="zsplit").pvalue, rel=1e-12),
    )


def _no_nan(result) -> None:
    for value in (
        result.mean_a,
        result.mean_b,
        result.delta,
        result.low,
        result.high,
        result.p_value,
        result.sd_diff,
        result.mde,
    ):
        assert value is None or math.isfinite(value)


def test_degenerate_cases_are_stated_values_never_nan():
    empty = paired_difference([], [])
    _no_nan(empty)
    assert (empty.n, empty.delta, empty.low, empty.high, empty.mde, empty.p_value, empty.test) == (
        0,
        None,
        None,
        None,
        None,
        1.0,
        "none (no pairs)",
    )
    one = paired_difference([0.0], [100.0])
    _no_nan(one)
    assert (one.n, one.delta, one.low, one.high, one.interval, one.sd_diff, one.mde, one.p_value) == (
        1,
        100.0,
        100.0,
        100.0,
        "none",
        None,
        None,
        1.0,
    )
    same = paired_difference([3.0, 1.0, 2.0], [3.0, 1.0, 2.0])
    _no_nan(same)
    assert (same.delta, same.low, same.high, same.sd_diff, same.mde, same.p_value, same.test) == (
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        1.0,
        "none (no pair differs)",
    )
    shifted = paired_difference([1.0, 2.0, 3.5, 4.0], [1.5, 2.5, 4.0, 4.5], test="t")  # every difference 0.5
    _no_nan(shifted)
    assert (shifted.low, shifted.high, shifted.sd_diff, shifted.mde) == (0.5, 0.5, 0.0, 0.0)
    assert (shifted.test, shifted.p_value) == ("sign test (constant difference)", pytest.approx(2 * 0.5**4))
    assert paired_difference([1.0, 2.0, 3.5, 4.0], [1.5, 2.5, 4.0, 4.5]).p_value == pytest.approx(2 * 0.5**4)
    flipped = paired_difference([100.0] * 5, [0.0] * 5)  # all five flipped: McNemar 2 * 0.5^5
    assert (flipped.delta, flipped.low, flipped.high, flipped.p_value) == (
        -100.0,
        -100.0,
        -100.0,
        pytest.approx(2 * 0.5**5),
    )


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="one length"):
        paired_difference([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="finite"):
        paired_difference([1.0, float("nan")], [1.0, 2.0])
    with pytest.raises(ValueError, match="resamples"):
        paired_difference([1.0, 2.0], [2.0, 1.0], resamples=0)
    with pytest.raises(ValueError, match="interval method"):
        bootstrap_interval([1.0, 2.0], method="basic")


def test_two_valued_scores_have_mcnemars_floor_as_their_smallest_detectable_effect():
    """40 samples scored 0 / 100 that all agree: no spread, but a drop is significant only from 6 discordant pairs
    (2 * 0.5^5 = 0.0625 >= 0.05 > 2 * 0.5^6): MDE 6 x 100 / 40 = 15 points, not 0."""
    from harness.metrics.paired import mcnemar_floor

    same = paired_difference([100.0] * 40, [100.0] * 40)
    assert (same.sd_diff, same.mde) == (0.0, 15.0)
    assert mcnemar_floor([0.0, 1.0] * 10, [0.0, 1.0] * 10) == 6 * 1.0 / 20
    assert mcnemar_floor([100.0] * 40, [100.0] * 40, alpha=0.01) == 8 * 100.0 / 40  # 2 * 0.5^8 < 0.01 <= 2 * 0.5^7
    assert mcnemar_floor([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) is None  # not two-valued: the formula's value stands
    # with spread, the formula's MDE where it is larger: 6 of 40 pairs discordant (100 -> 0), the rest alike
    a, b = [100.0] * 40, [100.0] * 34 + [0.0] * 6
    b[:6] = [0.0] * 6
    a[34:] = [0.0] * 6
    found = paired_difference(a, b)
    z = 1.959963984540054 + 0.8416212335729143
    assert found.mde == pytest.approx(max(z * found.sd_diff / math.sqrt(40), 15.0), rel=1e-12)
