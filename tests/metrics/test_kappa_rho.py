"""kappa_rho, rho corrected for chance (SPEC 3): hand-computed cases, the collapsed router, the anchors (uniform
random near 0, a fixed choice per query 1) and the range [-1, 1] where the variants' choices are distributed as the
originals'."""

from __future__ import annotations

import math

import numpy as np
import pytest

from routerlab.metrics.robustness import (
    chance_corrected,
    choice_shares,
    kappa_rho,
    kappa_rho_by_level,
    kappa_rho_per_actor,
    rho,
    rho_chance,
)


def test_hand_computed() -> None:
    orig = [0, 0, 1, 1]
    pert = [[0, 0], [1, 0], [1, 1], [1, 1]]
    # rho_i = 1, 1/2, 1, 1 -> rho = 7/8; p = (1/2, 1/2) -> rho_chance = 1/2 -> kappa = (7/8 - 1/2) / (1/2) = 3/4
    assert rho(orig, pert) == pytest.approx(0.875)
    assert choice_shares(orig, 2).tolist() == [0.5, 0.5]
    assert rho_chance(orig, 2) == pytest.approx(0.5)
    assert kappa_rho(orig, pert, 2) == pytest.approx(0.75)
    # per actor: rho^(0) = 3/4, rho^(1) = 1, both with chance p_k = 1/2
    assert kappa_rho_per_actor(orig, pert, 2).tolist() == pytest.approx([0.5, 1.0])
    # per level (one column each): column a keeps q0, q2, q3 -> rho 3/4, kappa 1/2; column b keeps all -> 1
    assert kappa_rho_by_level(orig, pert, ["a", "b"], 2) == pytest.approx({"a": 0.5, "b": 1.0})


def test_three_actors_uneven_shares() -> None:
    orig = [0, 0, 0, 1, 2, 2]
    pert = [[0], [0], [1], [1], [2], [0]]
    # rho = 4/6; p = (1/2, 1/6, 1/3) -> chance = 1/4 + 1/36 + 1/9 = 14/36
    chance = 14 / 36
    assert rho_chance(orig, 3) == pytest.approx(chance)
    assert kappa_rho(orig, pert, 3) == pytest.approx((4 / 6 - chance) / (1 - chance))
    # per actor: rho^(0) = 2/3 (p 1/2), rho^(1) = 1 (p 1/6), rho^(2) = 1/2 (p 1/3)
    assert kappa_rho_per_actor(orig, pert, 3).tolist() == pytest.approx(
        [(2 / 3 - 1 / 2) / (1 / 2), 1.0, (1 / 2 - 1 / 3) / (2 / 3)])


def test_queries_without_variants_do_not_count_in_the_chance() -> None:
    """p is taken over the originals rho averages over: a query without perturbations is in neither."""
    orig = [0, 1, 1, 1]
    pert = [[0], [1], [-1], [-1]]  # q2, q3 have no variant
    assert rho_chance(orig, 2, pert) == pytest.approx(0.5) and rho_chance(orig, 2) == pytest.approx(10 / 16)
    assert kappa_rho(orig, pert, 2) == pytest.approx(1.0)


def test_collapsed_router_is_undefined_never_one() -> None:
    orig = [2, 2, 2]
    pert = [[2, 2], [2, 2], [2, 0]]
    assert rho(orig, pert) == pytest.approx(5 / 6) and rho_chance(orig, 3) == 1.0
    assert math.isnan(kappa_rho(orig, pert, 3))
    per_actor = kappa_rho_per_actor(orig, pert, 3)
    assert np.isnan(per_actor).all()  # actor 2 is the only one (p = 1); 0 and 1 have no query (p = 0)
    # a fixed router (every variant kept) is collapsed too: null, not the 1 rho gives it
    assert math.isnan(kappa_rho([1, 1], [[1], [1]], 2))


def test_chance_corrected_elementwise() -> None:
    out = chance_corrected([0.75, 0.5, 0.9, math.nan], [0.5, 0.5, 1.0, 0.2])
    assert out[:2].tolist() == [0.5, 0.0] and np.isnan(out[2:]).all()


def test_uniform_random_router_is_near_zero() -> None:
    rng = np.random.default_rng(7)
    n, m, p = 4000, 5, 3
    orig = rng.integers(0, m, n)
    pert = rng.integers(0, m, (n, p))
    value = kappa_rho(orig, pert, m)
    # rho and rho_chance both estimate 1/m; kappa's sampling sd is about sqrt(1/m (1-1/m) / (n p)) / (1 - 1/m)
    sd = math.sqrt((1 / m) * (1 - 1 / m) / (n * p)) / (1 - 1 / m)
    assert abs(value) < 4 * sd
    assert np.abs(kappa_rho_per_actor(orig, pert, m)).max() < 0.1


def test_in_minus_one_one_when_variants_are_distributed_as_originals() -> None:
    """With the same marginal on both sides rho >= 2 rho_chance - 1, so kappa_rho >= -1; it is <= 1 always."""
    rng = np.random.default_rng(3)
    for _ in range(300):
        m = int(rng.integers(2, 6))
        n = int(rng.integers(2, 40))
        orig = rng.integers(0, m, n)
        if np.unique(orig).size == 1:
            continue
        # each variant column is a permutation of the originals' choices (same marginal), some moved at random
        pert = np.column_stack([rng.permutation(orig) for _ in range(int(rng.integers(1, 4)))])
        value = kappa_rho(orig, pert, m)
        assert -1.0 - 1e-12 <= value <= 1.0 + 1e-12
        assert all(-1.0 - 1e-12 <= v <= 1.0 + 1e-12 for v in kappa_rho_by_level(
            orig, pert, [f"c{j}" for j in range(pert.shape[1])], m).values())


def test_below_minus_one_only_for_a_systematic_shift() -> None:
    """Variants sent systematically elsewhere (3 of 4 originals on actor 0, every variant on the other actor):
    rho = 0 against a chance of 5/8, so kappa_rho = -5/3, reported as it is."""
    orig = [0, 0, 0, 1]
    pert = [[1], [1], [1], [0]]
    assert kappa_rho(orig, pert, 2) == pytest.approx((0 - 0.625) / 0.375)


def test_bad_input() -> None:
    with pytest.raises(ValueError, match=r"actor indices in 0\.\.1"):
        choice_shares([0, 2], 2)
    with pytest.raises(ValueError, match="shape"):
        kappa_rho([0, 1], [[0], [1], [1]], 2)
