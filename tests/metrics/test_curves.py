"""Two-model routing: call-rate curve, AUROC, LPM / HCR / MPM, AUC, APGR, recovery (SPEC 6)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from routerlab.metrics.curves import (
    CallRateCurve,
    apgr,
    auc_phi,
    auroc,
    call_rate_curve,
    call_rate_to_recover,
    hcr,
    lpm,
    mpm,
    router_auroc,
    small_good_enough,
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
