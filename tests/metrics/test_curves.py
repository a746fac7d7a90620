"""Two-model routing: call-rate curve, AUROC, LPM / HCR / MPM, AUC, APGR, recovery (SPEC 6)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from routerlab.errors import UsageError
from routerlab.metrics.curves import (
    RESAMPLED,
    TWO_MODEL_METRICS,
    CallRateCurve,
    apgr,
    auc_phi,
    auroc,
    call_rate_curve,
    call_rate_to_recover,
    exact_sum_dtype,
    hcr,
    lpm,
    mpm,
    resample_counts,
    resampled_two_model_metrics,
    router_auroc,
    small_good_enough,
    two_model_metrics,
)


def test_call_rate_curve_by_hand() -> None:
    s = np.array([0.9, 0.1, 0.5, 0.1])  # by score: {1, 3} (a tie group), 2, 0
    small = np.array([1.0, 0.0, 1.0, 1.0])
    large = np.array([1.0, 1.0, 0.0, 1.0])
    curve = call_rate_curve(s, small, large, grid=5)
    # k = 0..4 queries to the large model; large - small: tie group {+1, 0}, then -1, then 0.
    # k = 1 sends half the tie group: expected gain (1 + 0) / 2. Phi = (3 + [0, .5, 1, 0, 0]) / 4
    np.testing.assert_allclose(curve.x, [0, 0.25, 0.5, 0.75, 1])
    np.testing.assert_allclose(curve.phi, [0.75, 0.875, 1.0, 0.75, 0.75])
    assert curve.at(0.125) == pytest.approx(0.8125)  # linear between grid points
    assert curve.convention == "routerlab" and curve.model_means is None


def test_call_rate_grid_uses_exact_floor() -> None:
    n = 100  # Phi(x) = share sent to the large model when small = 0 and large = 1
    curve = call_rate_curve(np.arange(n, dtype=float), np.zeros(n), np.ones(n))
    np.testing.assert_allclose(curve.phi, np.arange(101) / 100)
    assert curve.phi[29] == pytest.approx(0.29)  # floor(29 * 100 / 100) = 29, not float's int(.29 * 100) = 28
    odd = call_rate_curve(np.arange(7, dtype=float), np.zeros(7), np.ones(7))
    np.testing.assert_allclose(odd.phi * 7, (np.arange(101) * 7) // 100)  # floor(x * 7)


def test_endpoints_are_perf_s_and_perf_l() -> None:
    rng = np.random.default_rng(0)
    for n in (1, 2, 37, 500):
        small, large, s = rng.random(n), rng.random(n), rng.random(n)
        curve = call_rate_curve(s, small, large)
        assert curve.perf_s == pytest.approx(small.mean())
        assert curve.perf_l == pytest.approx(large.mean())
    with pytest.raises(ValueError, match="query 1"):
        call_rate_curve([0.1, 0.2], [1.0, np.nan], [1.0, 1.0])


def test_auroc_constant_perfect_and_ties() -> None:
    labels = np.array([False, False, True, True])
    assert auroc(np.zeros(4), labels) == 0.5
    assert auroc([0.1, 0.2, 0.8, 0.9], labels) == 1.0
    assert auroc([0.9, 0.8, 0.2, 0.1], labels) == 0.0
    # positives {.5, .9} vs negatives {.1, .5}: 1 + .5 (tie) + 1 + 1 = 3.5 of 4 pairs
    tied = [0.1, 0.5, 0.5, 0.9]
    tied_labels = [False, True, False, True]
    assert auroc(tied, tied_labels) == pytest.approx(0.875)
    assert auroc(tied, tied_labels) == pytest.approx(roc_auc_score(tied_labels, tied))
    assert math.isnan(auroc([0.1, 0.2], [True, True]))


def test_small_good_enough_labels() -> None:
    # 0/1: the small model is right; large does not matter (both wrong is not "good enough")
    np.testing.assert_array_equal(small_good_enough([1, 0, 1], [0, 0, 1]), [True, False, True])
    np.testing.assert_array_equal(small_good_enough([0.5, 0.7], [0.6, 0.7]), [False, True])  # graded
    with pytest.raises(ValueError, match="large_score"):
        small_good_enough([0.5, 0.7])
    assert router_auroc([0.9, 0.1, 0.8], [1, 0, 1]) == 1.0


LINEAR = CallRateCurve(x=np.arange(101) / 100, phi=0.5 + 0.4 * np.arange(101) / 100)


def test_scenario_metrics_on_a_linear_curve() -> None:
    # Phi(x) = 0.5 + 0.4 x: Perf_S .5, Perf_L .9, tau_1 = .5 + .85 * .4 = .84, tau_2 = .88
    assert LINEAR.perf_s == 0.5 and LINEAR.perf_l == pytest.approx(0.9)
    assert lpm(LINEAR) == pytest.approx(0.5 + 0.4 * 0.275)  # x = .25 ... .30, mean x .275 -> .61
    assert lpm(LINEAR, (0.0, 0.30)) == pytest.approx(0.5 + 0.4 * 0.15)
    assert hcr(LINEAR) == pytest.approx(1 - 0.9)  # Phi in [.84, .88] <=> x in [.85, .95], mean .9
    # MPM: Phi(.30) = .62 < Phi < .84 <=> x in .31 ... .84, mean x .575 -> .73
    assert mpm(LINEAR) == pytest.approx(0.5 + 0.4 * 0.575)
    assert auc_phi(LINEAR) == pytest.approx(0.7)
    assert apgr(LINEAR) == pytest.approx((0.7 - 0.5) / 0.4)
    for f in (0.2, 0.5, 0.8):
        assert call_rate_to_recover(LINEAR, f) == pytest.approx(f)


def test_scenario_metrics_empty_sets_and_interpolation() -> None:
    step = CallRateCurve(x=np.array([0.0, 0.5, 1.0]), phi=np.array([0.0, 0.2, 1.0]))
    # target .5 first reached at x = 1; between (.5, .2) and (1, 1): .5 + (.5 - .2) / .8 * .5 = .6875
    assert call_rate_to_recover(step, 0.5) == pytest.approx(0.6875)
    jump = CallRateCurve(x=np.array([0.0, 0.5, 1.0]), phi=np.array([0.0, 0.0, 1.0]))
    assert hcr(jump) == 0.0  # nothing in [.85, .95]
    assert mpm(jump) == 0.0  # nothing in (Phi(.3) = 0, .85)
    flat = CallRateCurve(x=np.array([0.0, 0.5, 1.0]), phi=np.full(3, 0.4))
    assert math.isnan(apgr(flat))


def test_two_model_metrics_by_hand() -> None:
    # the first test's four queries: Phi on 5 points [.75, .875, 1, .75, .75]; s ranks {1, 3} < 2 < 0
    s, small, large = np.array([0.9, 0.1, 0.5, 0.1]), np.array([1.0, 0.0, 1.0, 1.0]), np.array([1.0, 1.0, 0.0, 1.0])
    curve = call_rate_curve(s, small, large, grid=5)
    got = two_model_metrics(curve, s, small, large, lpm_band=(0.25, 0.5), rp_band=(0.5, 1.0))
    assert list(got) == list(TWO_MODEL_METRICS)
    # small right on 0, 2, 3 (label 1), wrong on 1: s(1) = .1 is below every positive except the tied 3 -> 2.5 / 3
    assert got["auroc"] == pytest.approx(2.5 / 3)
    assert got["lpm"] == pytest.approx((0.875 + 1.0) / 2)
    assert got["perf_small"] == 0.75 and got["perf_large"] == 0.75
    assert math.isnan(got["apgr"])  # Perf_L = Perf_S
    with pytest.raises(UsageError, match="read on the call-rate grid"):
        two_model_metrics(call_rate_curve(s, small, large, convention="routellm"), s, small, large)


def test_resample_counts_and_exact_dtype() -> None:
    idx = np.array([[0, 0, 2], [1, 2, 2]])
    counts = resample_counts(idx, 3)
    np.testing.assert_array_equal(counts, [[2, 0], [0, 1], [1, 2]])  # (queries, resamples)
    assert counts.dtype == np.float64 and counts.flags.c_contiguous
    assert exact_sum_dtype(np.array([0.0, 1.0]), np.array([1.0, 1.0])) is np.float32  # 0/1: exact in float32
    assert exact_sum_dtype(np.array([0.5, 1.0]), np.array([1.0, 1.0])) is np.float64


@pytest.mark.parametrize("convention", ["routerlab", "routerxbench"])
@pytest.mark.parametrize("graded", [False, True])
def test_resampled_metrics_equal_the_metrics_of_each_resample(convention: str, graded: bool) -> None:
    """The vectorised bootstrap (multiplicities over fixed tie groups) gives, for every resample, what the
    metrics of one curve give on the resampled queries."""
    rng = np.random.default_rng(7)
    n = 57
    s = np.round(rng.random(n) * 6)  # many ties
    if graded:
        small, large = np.round(rng.random(n), 1), np.round(rng.random(n), 1)
    else:
        small, large = rng.integers(0, 2, n).astype(float), rng.integers(0, 2, n).astype(float)
    idx = rng.integers(0, n, size=(40, n))
    bands = ((0.25, 0.30), (0.85, 0.95))
    reps = resampled_two_model_metrics(s, small, large, idx, convention, *bands)  # type: ignore[arg-type]
    assert list(reps) == ["auroc", "lpm", "mpm", "hcr", "auc", "apgr"] and set(reps) == set(RESAMPLED)
    for b in range(idx.shape[0]):
        r = idx[b]
        curve = call_rate_curve(s[r], small[r], large[r], convention=convention)  # type: ignore[arg-type]
        want = two_model_metrics(curve, s[r], small[r], large[r], *bands)
        for m in RESAMPLED:
            if math.isnan(want[m]):
                assert math.isnan(reps[m][b]), (m, b)
            else:
                assert reps[m][b] == pytest.approx(want[m], abs=1e-12), (m, b)
    # the identity resample is the point estimate
    ident = resampled_two_model_metrics(s, small, large, np.arange(n)[None, :], convention, *bands)  # type: ignore[arg-type]
    point = two_model_metrics(call_rate_curve(s, small, large, convention=convention), s, small, large, *bands)  # type: ignore[arg-type]
    for m in RESAMPLED:
        assert ident[m][0] == pytest.approx(point[m], abs=1e-12, nan_ok=True)
    # multiplicities shared between routers give the same numbers as computed inside
    if convention == "routerlab":
        shared = resample_counts(idx, n, exact_sum_dtype(small, large))
        again = resampled_two_model_metrics(s, small, large, idx, convention, *bands, counts=shared)
        for m in RESAMPLED:
            np.testing.assert_array_equal(again[m], reps[m])


def test_resampled_metrics_refuse_routellm() -> None:
    with pytest.raises(UsageError, match="convention must be one of"):
        resampled_two_model_metrics(np.zeros(3), np.zeros(3), np.ones(3), np.zeros((1, 3), dtype=np.intp),
                                    "routellm")  # type: ignore[arg-type]
