"""Routing robustness rho and the invariance check (SPEC 3)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from routerlab.metrics.robustness import (
    invariance_by_level,
    invariance_check,
    rho,
    rho_by_level,
    rho_per_actor,
    rho_per_query,
)

ORIG = np.array([0, 1, 2])
PERT = np.array([[0, 0, 1], [1, 2, 2], [0, 2, -1]])  # -1: query 2 has no third perturbation
# rho_i: q0 2/3, q1 1/3, q2 1/2 (one of its two) -> rho = 1/2


def test_rho_by_hand() -> None:
    np.testing.assert_allclose(rho_per_query(ORIG, PERT), [2 / 3, 1 / 3, 1 / 2])
    assert rho(ORIG, PERT) == pytest.approx(0.5)
    np.testing.assert_allclose(rho_per_actor(ORIG, PERT, 4), [2 / 3, 1 / 3, 1 / 2, 0.0])  # none on 3 -> 0
    # char = columns 0, 2: q0 1/2, q1 1/2, q2 0/1 -> 1/3; word = column 1: 1, 0, 1 -> 2/3
    by_level = rho_by_level(ORIG, PERT, ["char", "word", "char"])
    assert by_level == {"char": pytest.approx(1 / 3), "word": pytest.approx(2 / 3)}


def test_fixed_router_gives_one_and_uniform_random_one_over_n() -> None:
    assert rho(np.full(50, 2), np.full((50, 5), 2)) == 1.0
    rng = np.random.default_rng(7)
    n_actors, n, p = 4, 2000, 5
    value = rho(rng.integers(0, n_actors, n), rng.integers(0, n_actors, (n, p)))
    # 10,000 independent Bernoulli(1/4) indicators: sd = sqrt(.25 * .75 / 10,000) = 0.0043; 0.02 > 4.5 sd
    assert value == pytest.approx(1 / n_actors, abs=0.02)


def test_query_without_perturbations_is_left_out() -> None:
    assert rho([0, 1], [[0, 0], [-1, -1]]) == 1.0
    assert math.isnan(rho_per_query([0, 1], [[0, 0], [-1, -1]])[1])


def test_invariance_check_by_hand() -> None:
    opt = np.array([0, 1, 2])
    pert_opt = np.array([[0, 1, 0], [1, 1, -1], [2, 2, 2]])  # -1: outcome unknown
    check = invariance_check(opt, pert_opt, ORIG, PERT)
    # existing perturbations 3 + 3 + 2 = 8; known 3 + 2 + 2 = 7; q0's column 1 changes optimum: 1/7
    assert (check.n_perturbations, check.n_known) == (8, 7)
    assert check.changed_share == pytest.approx(1 / 7)
    assert check.rho_all == pytest.approx(0.5)
    # invariant: q0 cols 0, 2 -> [0, 1] vs 0: 1/2; q1 cols 0, 1 -> [1, 2] vs 1: 1/2; q2 cols 0, 1 -> 1/2
    assert check.rho_invariant == pytest.approx(0.5)
    unknown = invariance_check(opt, np.full((3, 3), -1), ORIG, PERT)
    assert unknown.n_known == 0 and math.isnan(unknown.changed_share) and math.isnan(unknown.rho_invariant)
    levels = invariance_by_level(opt, pert_opt, ORIG, PERT, ["char", "word", "char"])
    assert levels["word"].changed_share == pytest.approx(1 / 3)  # q0 changes; q1, q2 keep
    assert levels["char"].changed_share == 0.0
