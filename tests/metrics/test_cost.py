"""Cost / latency of choices, utility decisions, the lambda sweep, Pareto frontier and AIQ."""

from __future__ import annotations

import math

import numpy as np
import pytest

from routerlab.metrics.cost import (
    aiq,
    chosen_values,
    cost_quality_sweep,
    mean_cost,
    mean_latency,
    pareto_frontier,
    utility_choice,
)


def test_mean_cost_and_latency() -> None:
    cost = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert mean_cost(cost, [1, 0]) == pytest.approx((2 + 3) / 2)
    assert mean_latency(cost, [0, 1]) == pytest.approx((1 + 4) / 2)
    unknown = np.array([[1.0, np.nan], [3.0, 4.0]])
    with pytest.raises(ValueError, match=r"cost is unknown.*query 0"):
        mean_cost(unknown, [1, 0])
    assert mean_cost(unknown, [1, 0], nan_policy="omit") == 3.0  # mean over the known query only
    assert math.isnan(chosen_values(unknown, [1, 0], nan_policy="omit")[0])


PRED = np.array([[0.9, 0.5], [0.6, 0.55]])
ACTOR_COST = np.array([10.0, 1.0])
TRUE = np.array([[1.0, 0.0], [0.0, 1.0]])


def test_utility_choice_by_hand() -> None:
    np.testing.assert_array_equal(utility_choice(PRED, ACTOR_COST, 0.0), [0, 0])
    # lam 0.01: q0 .9 - .1 = .8 vs .5 - .01 = .49 -> 0; q1 .6 - .1 = .5 vs .55 - .01 = .54 -> 1
    np.testing.assert_array_equal(utility_choice(PRED, ACTOR_COST, 0.01), [0, 1])
    # lam 0.1: q0 -.1 vs .4 -> 1; q1 -.4 vs .45 -> 1
    np.testing.assert_array_equal(utility_choice(PRED, ACTOR_COST, 0.1), [1, 1])


def test_sweep_frontier_and_aiq_by_hand() -> None:
    curve = cost_quality_sweep(TRUE, PRED, ACTOR_COST, [0.0, 0.01, 0.1])
    # choices [0,0], [0,1], [1,1] -> costs 10, 5.5, 1; true quality .5, 1, .5
    np.testing.assert_allclose(curve.cost, [10.0, 5.5, 1.0])
    np.testing.assert_allclose(curve.quality, [0.5, 1.0, 0.5])
    np.testing.assert_array_equal(pareto_frontier(np.column_stack([curve.cost, curve.quality])), [2, 1])
    # normalised cost (c - 1) / 9: points (1, .5), (.5, 1), (0, .5); hull (0,.5)-(.5,1) then flat at 1:
    # 0.5 * (0.5 + 1) / 2 + 0.5 * 1 = 0.875
    assert aiq(curve.cost, curve.quality) == pytest.approx(0.875)


def test_pareto_frontier_duplicates_and_equal_cost() -> None:
    np.testing.assert_array_equal(pareto_frontier(np.array([[1, 1], [1, 1], [2, 0.5]])), [0])
    np.testing.assert_array_equal(pareto_frontier([[1, 0.5], [1, 0.8]]), [1])
    np.testing.assert_array_equal(pareto_frontier(np.array([[3, 0.9], [1, 0.2], [2, 0.6], [2.5, 0.5]])), [1, 2, 0])
    assert pareto_frontier(np.zeros((0, 2))).size == 0


def test_aiq_by_hand() -> None:
    # (0, .5), (.5, .6), (1, .9): (.5, .6) lies under the chord (.7 at .5) -> area (.5 + .9) / 2 = .7
    assert aiq([0, 0.5, 1], [0.5, 0.6, 0.9]) == pytest.approx(0.7)
    # costs 2, 3, 6 -> 0, .25, 1; quality .2, .8, .6: up to (.25, .8), then flat at .8:
    # .25 * (.2 + .8) / 2 + .75 * .8 = .125 + .6 = .725
    assert aiq([2, 3, 6], [0.2, 0.8, 0.6]) == pytest.approx(0.725)
    # a dominated point at equal cost and a collinear point change nothing
    assert aiq([2, 2, 3, 4.5, 6], [0.1, 0.2, 0.8, 0.7, 0.6]) == pytest.approx(0.725)
    assert aiq([0, 0.5, 1], [0.0, 0.5, 1.0]) == pytest.approx(0.5)
    assert aiq([4, 4], [0.3, 0.6]) == 0.6  # one cost: the best quality
