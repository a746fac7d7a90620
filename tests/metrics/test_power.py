"""metrics/power.py: the sample size and power of a paired comparison, pinned against textbook values and
hand-computed cases, and checked by simulation: at the computed n the paired test's empirical power is the target."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from routerlab.metrics.bootstrap import MIN_QUERIES, FewQueriesWarning, paired_bootstrap
from routerlab.metrics.power import paired_power, power_at, sample_size, sample_size_raw, sample_size_t


def test_the_textbook_sample_size() -> None:
    # n = (z_0.975 + z_0.8)^2 (sd / delta)^2 = (1.959964 + 0.841621)^2 / 0.25 = 7.848879 / 0.25 = 31.3955 -> 32
    # (the "7.85 (sd / delta)^2" rule of thumb for alpha 0.05, power 0.8)
    assert sample_size_raw(1.0, 0.5) == pytest.approx(31.3955, abs=1e-4)
    assert sample_size(1.0, 0.5) == 32
    # effect size 0.2: 7.848879 / 0.04 = 196.22 -> 197
    assert sample_size(1.0, 0.2) == 197
    # alpha 0.01, power 0.9: (2.575829 + 1.281552)^2 = 3.857381^2 = 14.879388; / 0.04 = 371.98 -> 372
    assert sample_size_raw(1.0, 0.2, alpha=0.01, power=0.9) == pytest.approx(14.879388 / 0.04, rel=1e-6)
    assert sample_size(1.0, 0.2, alpha=0.01, power=0.9) == 372
    # it scales with (sd / delta)^2 only, and the sign of delta does not matter
    assert sample_size_raw(0.4, 0.02) == pytest.approx(sample_size_raw(1.0, 0.05)) == pytest.approx(7.848879 / 0.0025,
                                                                                                   rel=1e-6)
    assert sample_size(0.4, -0.02) == sample_size(0.4, 0.02) == 3140


def test_the_t_correction_matches_the_paired_t_test_tables() -> None:
    # G*Power / Cohen's tables, paired t-test, alpha 0.05 two-sided, power 0.8: d = 0.5 -> 34, d = 0.2 -> 199
    assert sample_size_t(1.0, 0.5) == 34
    assert sample_size_t(1.0, 0.2) == 199
    # what the correction adds at the sizes a routing table has: about z^2 / 2 = 1.9 queries
    assert sample_size_t(0.4, 0.02) - sample_size(0.4, 0.02) in (1, 2)


def test_power_at_n() -> None:
    # at n = 31.3955 the power is the target, plus the far tail Phi(-x - z) = 1e-6 that the size formula leaves out
    assert power_at(sample_size_raw(1.0, 0.5), 1.0, 0.5) == pytest.approx(0.8 + 9.6e-7, abs=1e-8)
    # n = 100, sd 1, delta 0.25: x = 2.5, Phi(0.540036) + Phi(-4.459964) = 0.705418
    assert power_at(100, 1.0, 0.25) == pytest.approx(0.705418, abs=1e-6)
    assert power_at(100, 1.0, 0.0) == pytest.approx(0.05)  # no difference: the level
    assert power_at(100, 1.0, -0.25) == power_at(100, 1.0, 0.25)


def test_floors_and_overflow() -> None:
    # a large difference needs fewer queries than routerlab computes an interval from: raised to that minimum
    assert sample_size_raw(0.3, 0.5) < 3 and sample_size(0.3, 0.5) == MIN_QUERIES
    # a vanishing delta: no finite size, not an OverflowError
    assert sample_size(1.0, 5e-324) is None
    # exact whole numbers are not rounded up by float noise
    sd = math.sqrt(100 * 0.25 / sample_size_raw(1.0, 1.0))  # raw = 100 up to rounding
    assert sample_size(sd, 0.5) == 100


@pytest.mark.parametrize(("call", "message"), [
    (lambda: sample_size(0.0, 0.1), "sd must be a finite number > 0"),
    (lambda: sample_size(1.0, 0.0), "delta must be a finite number > 0"),
    (lambda: sample_size(1.0, math.nan), "delta must be a finite number > 0"),
    (lambda: sample_size(1.0, math.inf), "delta must be a finite number > 0"),
    (lambda: sample_size(1.0, 0.1, alpha=1.0), "alpha must lie in"),
    (lambda: sample_size(1.0, 0.1, power=0.0), "power must lie in"),
    (lambda: sample_size(1.0, 0.1, alpha=0.1, power=0.05), "power must exceed alpha"),
    (lambda: power_at(0, 1.0, 0.1), "n must be a finite number > 0"),
    (lambda: paired_power([0.0] * 40, [1.0] * 40, -0.1), "delta must be a finite number > 0"),
])
def test_bad_arguments(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


def _three_point(p_up: float, p_down: float, trials: int, n: int, seed: int) -> np.ndarray:
    """``trials`` x ``n`` per-query differences of 0/1 scores: +1 with p_up, -1 with p_down, else 0."""
    u = np.random.default_rng(seed).random((trials, n))
    return np.where(u < p_up, 1.0, np.where(u < p_up + p_down, -1.0, 0.0))


@pytest.mark.parametrize(("p_up", "p_down"), [(0.15, 0.05), (0.08, 0.02)])
def test_simulated_power_of_the_paired_t_test_is_the_target(p_up: float, p_down: float) -> None:
    """Differences of two routers' 0/1 scores (a skewed three-point distribution, not normal) with mean 0.1 or 0.06:
    at the computed n (150, 211) the paired t-test at alpha 0.05 rejects in 80% of 4000 seeded trials, within 0.04.
    Why 0.04: the binomial standard error of 4000 trials at 0.8 is 0.0063 (3 of them: 0.019); rounding n up adds
    at most 0.005; the approximation itself (estimated sd, skewed differences) was off by up to 0.02 at these sizes
    in the cases tried. At half that n the power falls to about 0.5, far outside the tolerance."""
    delta = p_up - p_down
    sd = math.sqrt(p_up + p_down - delta**2)
    n = sample_size(sd, delta)
    assert n is not None
    for size, target in ((n, 0.8), (n // 2, power_at(n // 2, sd, delta))):
        d = _three_point(p_up, p_down, 4000, size, seed=7)
        rejected = float(np.mean(stats.ttest_1samp(d, 0.0, axis=1).pvalue < 0.05))
        assert rejected == pytest.approx(target, abs=0.04), (size, rejected)
    assert power_at(n // 2, sd, delta) < 0.55


def test_simulated_power_of_routerlabs_paired_bootstrap_is_the_target() -> None:
    """The test routerlab runs, the paired bootstrap 95% interval (evaluate --compare-to), excluding 0: at the
    computed n = 150 it detects a mean difference of 0.1 (sd 0.436) in 80% of 1000 seeded trials, within 0.04
    (binomial standard error 0.0126: about 3 of them)."""
    p_up, p_down = 0.15, 0.05
    delta = p_up - p_down
    n = sample_size(math.sqrt(p_up + p_down - delta**2), delta)
    assert n == 150
    d = _three_point(p_up, p_down, 1000, n, seed=11)
    zeros = np.zeros(n)
    rejected = 0
    for i, row in enumerate(d):
        c = paired_bootstrap(row, zeros, n_boot=1000, seed=i)
        rejected += int(c.lo > 0 or c.hi < 0)
    assert rejected / len(d) == pytest.approx(0.8, abs=0.04)


def test_paired_power_by_hand() -> None:
    # 40 queries: A beats B on 10 (+1), loses on 2 (-1), ties on 28: mean 0.2, sd = sqrt((12 - 40 * 0.04) / 39)
    a = np.array([1.0] * 10 + [0.0] * 2 + [1.0] * 14 + [0.0] * 14)
    b = np.array([0.0] * 10 + [1.0] * 2 + [1.0] * 14 + [0.0] * 14)
    out = paired_power(a, b, 0.1, n_boot=200, seed=3)
    sd = math.sqrt((12 - 40 * 0.04) / 39)
    assert out.n == 40 and out.mean_difference == pytest.approx(0.2) and out.sd == pytest.approx(sd)
    assert out.n_needed == math.ceil(7.848879 * sd**2 / 0.01 - 1e-6) == 210
    assert out.power_at_n == pytest.approx(power_at(40, sd, 0.1))
    assert out.n_needed_observed == max(math.ceil(7.848879 * sd**2 / 0.04), MIN_QUERIES) == 53
    assert out.power_observed == pytest.approx(power_at(40, sd, 0.2)) and out.reason is None
    # the interval is evaluate's paired bootstrap, with the same resamples
    cmp = paired_bootstrap(a, b, n_boot=200, seed=3)
    assert out.ci == (cmp.lo, cmp.hi) and out.ci[0] <= 0.2 <= out.ci[1]
    # A - B and B - A: the same sizes
    back = paired_power(b, a, 0.1, n_boot=200, seed=3)
    assert (back.mean_difference, back.n_needed, back.n_needed_observed) == (-0.2, out.n_needed, out.n_needed_observed)


def test_identical_routers_have_no_size() -> None:
    a = np.tile([1.0, 0.0, 0.5], 20)
    out = paired_power(a, a.copy(), 0.02)
    assert out.sd == 0.0 and out.mean_difference == 0.0 and out.ci == (0.0, 0.0)
    assert (out.n_needed, out.power_at_n, out.n_needed_observed, out.power_observed) == (None, None, None, None)
    assert out.reason is not None and "score the same on every test query" in out.reason
    shifted = paired_power(a, a - 0.25, 0.02)  # a constant difference: sd 0 too, said differently
    assert shifted.n_needed is None and shifted.reason is not None and "+0.25 on every test query" in shifted.reason


def test_zero_observed_difference() -> None:
    a = np.array([1.0, 0.0] * 20)
    out = paired_power(a, a[::-1].copy(), 0.1)
    assert out.mean_difference == 0.0 and out.sd == pytest.approx(math.sqrt(40 / 39))
    assert out.n_needed == sample_size(out.sd, 0.1) and out.n_needed_observed is None
    assert out.power_observed == pytest.approx(0.05)
    assert out.reason is not None and "observed difference is 0" in out.reason


def test_too_few_queries_estimate_nothing() -> None:
    a, b = np.array([1.0, 0.0, 1.0, 1.0]), np.array([0.0, 0.0, 1.0, 0.0])
    with pytest.warns(FewQueriesWarning, match="only 4 evaluated test queries, fewer than the 30"):
        out = paired_power(a, b, 0.1)
    assert out.n == 4 and out.mean_difference == 0.5 and all(math.isnan(x) for x in out.ci)
    assert out.n_needed is None and out.power_at_n is None and out.reason is not None
    assert "only 4 evaluated test queries, fewer than the 30" in out.reason
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewQueriesWarning)
        one = paired_power([1.0], [0.0], 0.1)
    assert math.isnan(one.sd) and one.reason is not None and "only 1 evaluated test query," in one.reason
