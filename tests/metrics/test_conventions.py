"""Peer conventions of the two-model metrics (SPEC 6): routerlab's tie-free curve vs RouterXBench's,
RouteLLM's APGR / CPT, RouterBench's AIQ. Every expected value is computed by hand in the comments."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score

from routerlab.errors import UsageError
from routerlab.metrics.cost import aiq, routerbench_hull
from routerlab.metrics.curves import (
    CallRateCurve,
    apgr,
    auc_phi,
    auroc,
    call_rate_curve,
    cpt,
    hcr,
    lpm,
    mpm,
    router_auroc,
)

LINSPACE = np.linspace(0, 1, 101)


def _float_floor_sizes(limit: int) -> list[int]:
    return [n for n in range(1, limit + 1) if any(int(LINSPACE[i] * n) != (i * n) // 100 for i in range(101))]


def test_float_flooring_differs_for_56_sizes() -> None:
    sizes = _float_floor_sizes(10_000)
    assert len(sizes) == 56
    assert sizes[:4] == [50, 100, 200, 400]
    # n = 50 at x = 0.58: int(0.58 * 50) = int(28.999999999999996) = 28, exact (58 * 50) // 100 = 29
    assert int(LINSPACE[58] * 50) == 28 and (58 * 50) // 100 == 29
    n = 50  # small = 0, large = 1, distinct scores: Phi(x) = share of queries sent to the large model
    args = (np.arange(n, dtype=float), np.zeros(n), np.ones(n))
    ours, theirs = call_rate_curve(*args), call_rate_curve(*args, convention="routerxbench")
    assert ours.phi[58] == 29 / 50 and theirs.phi[58] == 28 / 50
    differ = np.flatnonzero(ours.phi != theirs.phi)
    np.testing.assert_array_equal(differ, [58])


def test_conventions_agree_without_ties_where_flooring_is_equal() -> None:
    rng = np.random.default_rng(3)
    n = 37  # not among the 56 sizes
    assert n not in _float_floor_sizes(100)
    s, small, large = rng.random(n), rng.integers(0, 2, n).astype(float), rng.integers(0, 2, n).astype(float)
    ours, theirs = call_rate_curve(s, small, large), call_rate_curve(s, small, large, convention="routerxbench")
    np.testing.assert_allclose(theirs.phi, ours.phi, rtol=0, atol=1e-12)
    np.testing.assert_allclose(theirs.x, ours.x, rtol=0, atol=1e-15)
    for metric in (lpm, hcr, mpm, auc_phi, apgr):
        assert metric(theirs) == pytest.approx(metric(ours), abs=1e-12)
    assert router_auroc(s, small, large, convention="routerxbench") == pytest.approx(router_auroc(s, small, large))


def test_ties_expectation_vs_routerxbench_row_order() -> None:
    s = np.array([0.5, 0.5])  # one tie group of two; x = 0.5 sends one query
    small, large = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    ours = call_rate_curve(s, small, large, grid=3)
    np.testing.assert_array_equal(ours.phi, [0.5, 0.5, 0.5])  # (1 + 0) / 2 - half of (-1 + 1) = .5
    swapped = call_rate_curve(s, small[::-1], large[::-1], grid=3)
    np.testing.assert_array_equal(swapped.phi, ours.phi)
    # RouterXBench sends whichever row numpy's default argsort puts first: row 0 -> (0 + 0) / 2 = 0;
    # with the rows swapped the same position holds (small 0, large 1) -> (1 + 1) / 2 = 1
    first = int(np.argsort(s)[0])
    theirs = call_rate_curve(s, small, large, convention="routerxbench")
    assert theirs.phi[50] == (large[first] + small[1 - first]) / 2
    theirs_swapped = call_rate_curve(s, small[::-1], large[::-1], convention="routerxbench")
    assert {theirs.phi[50], theirs_swapped.phi[50]} == {0.0, 1.0}


def test_one_tie_group_is_the_straight_line() -> None:
    # every score equal: k of n sent gives k / n of the total gain; small mean .25, large mean .75
    small, large = np.array([0.0, 0.0, 1.0, 0.0]), np.array([1.0, 1.0, 0.0, 1.0])
    curve = call_rate_curve(np.full(4, 0.3), small, large)
    np.testing.assert_allclose(curve.phi, 0.25 + 0.5 * ((np.arange(101) * 4) // 100) / 4)


@settings(max_examples=40, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from([0.0, 0.25, 0.5, 1.0]),
            st.floats(0, 1, allow_nan=False),
            st.floats(0, 1, allow_nan=False),
        ),
        min_size=1,
        max_size=25,
    ),
    data=st.data(),
)
def test_default_curve_never_depends_on_row_order(rows: list[tuple[float, float, float]], data: st.DataObject) -> None:
    permuted = data.draw(st.permutations(rows))
    a, b = np.array(rows), np.array(permuted)
    curve = call_rate_curve(a[:, 0], a[:, 1], a[:, 2], grid=21)
    other = call_rate_curve(b[:, 0], b[:, 1], b[:, 2], grid=21)
    np.testing.assert_array_equal(curve.phi, other.phi)  # to the bit
    assert curve.perf_s == pytest.approx(a[:, 1].mean()) and curve.perf_l == pytest.approx(a[:, 2].mean())


XB_LINEAR = CallRateCurve(x=LINSPACE, phi=np.arange(101) / 100, convention="routerxbench", model_means=(0.0, 1.0))
OURS_LINEAR = CallRateCurve(x=np.arange(101) / 100, phi=np.arange(101) / 100)


def test_band_edges_routerxbench_vs_routerlab() -> None:
    assert LINSPACE[35] == 0.35000000000000003  # the float grid point sits just above 0.35
    # LPM over [.30, .35]: RouterXBench's searchsorted stops before x[35] -> phi .30 ... .34, mean .32;
    # routerlab includes x = .35 -> mean .325
    assert lpm(XB_LINEAR, (0.30, 0.35)) == pytest.approx(0.32)
    assert lpm(OURS_LINEAR, (0.30, 0.35)) == pytest.approx(0.325)
    # the paper's band [.25, .30] has exact float edges: both .25 ... .30, mean .275
    assert lpm(XB_LINEAR) == pytest.approx(0.275) and lpm(OURS_LINEAR) == pytest.approx(0.275)
    # no grid point in the band: RouterXBench takes the first point above it (x = .26), routerlab NaN
    assert lpm(XB_LINEAR, (0.255, 0.256)) == 0.26
    assert math.isnan(lpm(OURS_LINEAR, (0.255, 0.256)))
    # MPM with band [.25, .35]: RouterXBench's floor is phi at its last LPM point (.34) -> .35 ... .84,
    # mean .595; routerlab's floor Phi(.35) = .35 -> .36 ... .84, mean .60
    assert mpm(XB_LINEAR, (0.25, 0.35)) == pytest.approx(0.595)
    assert mpm(OURS_LINEAR, (0.25, 0.35)) == pytest.approx(0.60)


def test_hcr_exact_comparison_under_routerxbench() -> None:
    phi = np.arange(101) / 100
    phi[85] = 0.85 - 1e-13  # a hair under tau_1 = .85
    xb = CallRateCurve(x=LINSPACE, phi=phi, convention="routerxbench", model_means=(0.0, 1.0))
    ours = CallRateCurve(x=np.arange(101) / 100, phi=phi)
    assert hcr(xb) == pytest.approx(1 - 0.905)  # exact: x = .86 ... .95
    assert hcr(ours) == pytest.approx(1 - 0.90)  # 1e-12 of rounding: x = .85 ... .95


def test_routerxbench_tau_uses_row_order_means() -> None:
    small, large = np.array([0.0, 1.0, 1.0]), np.array([1.0, 1.0, 1.0])
    curve = call_rate_curve([0.2, 0.1, 0.3], small, large, convention="routerxbench")
    assert curve.model_means is not None
    assert curve.model_means[0] == pytest.approx(2 / 3) and curve.model_means[1] == 1.0
    assert curve.perf_s == np.mean(small) and curve.tau(0.5) == np.mean(small) + 0.5 * (1 - np.mean(small))


def test_auroc_one_label_and_routerxbench_labels() -> None:
    assert math.isnan(auroc([0.1, 0.2], [True, True]))  # routerlab: undefined
    assert auroc([0.1, 0.2], [True, True], convention="routerxbench") == 0.5
    tied, labels = [0.1, 0.5, 0.5, 0.9], [False, True, False, True]
    assert auroc(tied, labels, convention="routerxbench") == roc_auc_score(labels, tied) == 0.875
    # graded scores in [0, 1]: routerlab labels small >= large -> both True (one label, NaN);
    # RouterXBench (no score above 1) labels small >= 1 -> [False, True] -> perfectly ranked
    small, large = [0.5, 1.0], [0.2, 0.3]
    assert math.isnan(router_auroc([0.1, 0.9], small, large))
    assert router_auroc([0.1, 0.9], small, large, convention="routerxbench") == 1.0
    # a score above 1: both use small >= large -> [False, True]
    assert router_auroc([0.1, 0.9], [2.0, 5.0], [3.0, 4.0], convention="routerxbench") == 1.0
    with pytest.raises(UsageError, match="convention"):
        auroc([0.1, 0.2], [True, False], convention="routellm")  # type: ignore[arg-type]


def test_routellm_thresholds_route_tie_groups_together() -> None:
    # strong-win rate -s = [0, 0, 0, -1]; deciles of it: -1, -.7, -.4, -.1, then 0 from 40% on.
    # >= -1: all 4 strong (x 1); >= -.7 ... >= 0: the tie group of three (x .75); last > 0: none (x 0)
    s = np.array([0.0, 0.0, 0.0, 1.0])
    small, large = np.array([1.0, 0.0, 0.0, 1.0]), np.ones(4)
    curve = call_rate_curve(s, small, large, convention="routellm")
    np.testing.assert_allclose(curve.x, [0.0] + [0.75] * 9 + [1.0])
    np.testing.assert_allclose(curve.phi, [0.5] + [1.0] * 9 + [1.0])
    # AUC = .75 (.5 + 1) / 2 + .25 * 1 = .8125; APGR = (.8125 - .5) / (1 - .5) = .625
    assert auc_phi(curve) == pytest.approx(0.8125)
    assert apgr(curve) == pytest.approx(0.625)
    # CPT(50%): level .75, halfway from (.5, 0%) to (1, 75%) -> 37.5%; CPT(20%): level .6 -> 15%
    assert cpt(curve, 0.5) == pytest.approx(37.5)
    assert cpt(curve, 0.2) == pytest.approx(15.0)
    with pytest.raises(UsageError, match="grid"):
        lpm(curve)


def test_routellm_constant_router_and_grid_cpt() -> None:
    curve = call_rate_curve(np.zeros(5), np.zeros(5), np.ones(5), convention="routellm")
    assert {float(v) for v in curve.x} == {0.0, 1.0}  # one tie group: everything or nothing
    assert apgr(curve) == pytest.approx(0.5)
    assert cpt(OURS_LINEAR, 0.5) == pytest.approx(50.0)  # grid curves: 100 * call_rate_to_recover
    with pytest.raises(UsageError, match="101"):
        call_rate_curve([0.1], [1.0], [0.0], grid=11, convention="routerxbench")
    with pytest.raises(UsageError, match="convention"):
        call_rate_curve([0.1], [1.0], [0.0], convention="bogus")  # type: ignore[arg-type]


def test_aiq_routerbench_divides_by_the_largest_cost() -> None:
    # costs 99 and 100, quality 1: routerlab normalises to [0, 1] -> 1; RouterBench: area 1 * 1 over
    # [99, 100], divided by 100 -> .01 (the gap of .99)
    assert aiq([99, 100], [1, 1]) == 1.0
    assert aiq([99, 100], [1, 1], convention="routerbench") == pytest.approx(0.01)


def test_aiq_routerbench_flat_extension_and_dropped_points() -> None:
    # (1, .2), (2, .6), (4, .7): all on the hull; area .4 + 1.3 = 1.7 over [1, 4]
    assert aiq([1, 2, 4], [0.2, 0.6, 0.7], convention="routerbench") == pytest.approx(1.7 / 4)
    # max_cost 10: flat at .7 over [4, 10] adds 4.2 -> 5.9 / 10
    assert aiq([1, 2, 4], [0.2, 0.6, 0.7], convention="routerbench", max_cost=10) == pytest.approx(0.59)
    # (0, .5), (1, .9), (2, .6), (3, .3): the hull falls after cost 1, so it ends at (1, .9): .7 / 1;
    # stretched to cost 3: (.7 + 2 * .9) / 3 = .8333, which is routerlab's value (cheapest cost 0)
    cost, quality = [0, 1, 2, 3], [0.5, 0.9, 0.6, 0.3]
    np.testing.assert_allclose(routerbench_hull(cost, quality), [[0, 0.5], [1, 0.9]])
    assert aiq(cost, quality, convention="routerbench") == pytest.approx(0.7)
    assert aiq(cost, quality, convention="routerbench", max_cost=3) == pytest.approx(2.5 / 3)
    assert aiq(cost, quality) == pytest.approx(2.5 / 3)
    # routerlab's max_cost widens the normalised range: (0, .5) .. (1/6, .9), flat to 1 -> .8833
    assert aiq(cost, quality, max_cost=6) == pytest.approx(0.5 * (0.5 + 0.9) / 6 + 0.9 * 5 / 6)
    with pytest.raises(UsageError, match="below"):
        aiq(cost, quality, convention="routerbench", max_cost=0.5)
    # the cheapest point is the best: the hull is (0, .9) alone and RouterBench divides 0 by 0
    np.testing.assert_array_equal(routerbench_hull([0, 1], [0.9, 0.5]), [[0, 0.9]])
    with pytest.raises(UsageError, match="max_cost > 0"):
        aiq([0, 1], [0.9, 0.5], convention="routerbench")
    assert aiq([0, 1], [0.9, 0.5], convention="routerbench", max_cost=2) == pytest.approx(0.9)
    with pytest.raises(UsageError, match="convention"):
        aiq(cost, quality, convention="routellm")  # type: ignore[arg-type]


def test_aiq_routerbench_ties_at_the_cheapest_cost() -> None:
    # (0, .2), (0, .8), (2, 1): RouterBench starts from the first cheapest point of numpy's argsort
    # (.2 here) -> (.2 + 1) / 2 * 2 / 2 = .6; routerlab starts from the best cheapest point -> .9
    assert aiq([0, 0, 2], [0.2, 0.8, 1.0], convention="routerbench") == pytest.approx(0.6)
    assert aiq([0, 0, 2], [0.2, 0.8, 1.0]) == pytest.approx(0.9)
    # every cost equal: RouterBench's code fails; here the hull is the best point (2, .6), no area up to
    # its own cost (0), and .6 * (4 - 2) / 4 = .3 up to max_cost 4
    np.testing.assert_array_equal(routerbench_hull([2, 2], [0.3, 0.6]), [[2, 0.6]])
    assert aiq([2, 2], [0.3, 0.6], convention="routerbench") == 0.0
    assert aiq([2, 2], [0.3, 0.6], convention="routerbench", max_cost=4) == pytest.approx(0.3)
