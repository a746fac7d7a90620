"""The oracle's two-model score (SPEC 6): hand-computed dense ranks, AUROC 1 and the optimal curve."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from routerlab.metrics.curves import call_rate_curve, oracle_two_model_score, router_auroc


def test_dense_rank_on_binary_scores_by_hand() -> None:
    # (small, large): (1,0) only small right, (0,1) only large right, (0,0) both wrong, (1,1) both right
    small = [1, 0, 0, 1, 0, 1]
    large = [0, 1, 0, 1, 1, 1]
    # gains small - large: 1, -1, 0, 0, -1, 0; ties at gain 0 broken by small: (0,0) < (1,1)
    assert oracle_two_model_score(small, large).tolist() == [3.0, 0.0, 1.0, 2.0, 0.0, 2.0]


def test_dense_rank_on_graded_scores_by_hand() -> None:
    small = [0.5, 0.2, 0.9, 0.4, 0.7]
    large = [0.5, 0.6, 0.9, 0.1, 0.7]
    # gains 0, -0.4, 0, 0.3, 0 -> gain -0.4 first; gain 0 ties ordered by small 0.5 < 0.7 < 0.9; then 0.3
    assert oracle_two_model_score(small, large).tolist() == [1.0, 0.0, 3.0, 4.0, 2.0]


def test_auroc_one_and_optimal_curve() -> None:
    rng = np.random.default_rng(3)
    small = rng.integers(0, 2, 40).astype(float)
    large = rng.integers(0, 2, 40).astype(float)
    s = oracle_two_model_score(small, large)
    assert router_auroc(s, small, large) == 1.0
    curve = call_rate_curve(s, small, large)
    # at every grid point the best any order can do: send the k queries with the largest gain large - small
    best_gains = np.sort(large - small)[::-1]
    n = small.size
    for i, k in enumerate((np.arange(101) * n) // 100):
        assert curve.phi[i] == pytest.approx((small.sum() + best_gains[:k].sum()) / n, abs=1e-12)


def test_every_permutation_of_a_small_case_is_no_better() -> None:
    small = np.array([1.0, 0.0, 0.0, 1.0, 1.0])
    large = np.array([1.0, 1.0, 0.0, 0.0, 1.0])
    best = call_rate_curve(oracle_two_model_score(small, large), small, large, grid=6).phi
    for perm in itertools.permutations(range(5)):
        phi = call_rate_curve(np.array(perm, dtype=float), small, large, grid=6).phi
        assert (best >= phi - 1e-12).all()


def test_unobserved_score_is_an_error() -> None:
    with pytest.raises(ValueError, match="NaN"):
        oracle_two_model_score([1.0, np.nan], [0.0, 1.0])
