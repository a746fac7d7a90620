"""Selection vectors, oracle, mu_o / V_B / V_R, E_p and collapse (SPEC 4-5), on hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from routerlab.metrics.bounds import oracle_score
from routerlab.metrics.selection import (
    best_single_performance,
    collapsed,
    e_p,
    entropy_bits,
    mu_o,
    mu_o_per_query,
    oracle_choice,
    oracle_distribution,
    oracle_p_choice,
    oracle_p_distribution,
    selection_shares,
    selection_vector,
    softmax,
    uniform_distribution,
    v_b,
    v_r,
)


def test_selection_vector_binary_graded_and_none_correct() -> None:
    score = np.array(
        [
            [1.0, 0.0, 1.0],  # binary: the correct actors
            [0.0, 0.0, 0.0],  # no correct actor: all optimal
            [0.8, 0.9, 0.5],  # graded: >= 0.95 * 0.9 = 0.855 -> only 0.9
            [0.86, 0.9, 0.5],  # 0.86 >= 0.855 -> both
            [np.nan, 1.0, 0.0],  # unobserved is never optimal
        ]
    )
    expected = np.array(
        [[1, 0, 1], [1, 1, 1], [0, 1, 0], [1, 1, 0], [0, 1, 0]],
        dtype=bool,
    )
    np.testing.assert_array_equal(selection_vector(score), expected)


def test_selection_vector_rejects_a_query_with_nothing_observed() -> None:
    with pytest.raises(ValueError, match="query 1"):
        selection_vector(np.array([[1.0, 0.0], [np.nan, np.nan]]))


def test_oracle_tie_rule_fastest_then_cheapest_then_first() -> None:
    score = np.array([[1, 1, 0], [1, 1, 1], [0, 0, 0]], dtype=float)
    latency = np.array([[5, 3, 1], [2, 2, 9], [1, 1, 1]], dtype=float)
    cost = np.array([[0, 0, 0], [3, 1, 1], [2, 1, 1]], dtype=float)
    # q0: best {0, 1}, actor 1 is faster (3 < 5).
    # q1: best {0, 1, 2}, fastest {0, 1} (2), cheaper 1 (1 < 3).
    # q2: all 0, all latency 1, cheapest {1, 2} -> first = 1.
    np.testing.assert_array_equal(oracle_choice(score, latency, cost), [1, 1, 1])
    np.testing.assert_array_equal(oracle_choice(score), [0, 0, 0])  # no keys: first best
    np.testing.assert_array_equal(oracle_choice(score, latency), [1, 0, 0])


def test_oracle_skips_unobserved_and_ranks_unknown_latency_last() -> None:
    np.testing.assert_array_equal(oracle_choice(np.array([[np.nan, 0.5, 0.2]])), [1])
    # both correct; actor 0's latency unknown -> actor 1 (known 4 s) wins the tie
    np.testing.assert_array_equal(oracle_choice(np.array([[1.0, 1.0]]), np.array([[np.nan, 4.0]])), [1])
    # per-actor latency vector broadcasts
    np.testing.assert_array_equal(oracle_choice(np.array([[1.0, 1.0]]), np.array([3.0, 2.0])), [1])


SCORE = np.array([[1.0, 0.0], [0.5, 0.2], [0.0, 1.0]])


def test_mu_o_and_oracle_is_mean_of_row_maxima() -> None:
    assert mu_o(SCORE, [0, 0, 0]) == pytest.approx((1 + 0.5 + 0) / 3)
    np.testing.assert_allclose(mu_o_per_query(SCORE, [1, 0, 1]), [0.0, 0.5, 1.0])
    oracle = mu_o(SCORE, oracle_choice(SCORE))
    assert oracle == pytest.approx((1 + 0.5 + 1) / 3)
    assert oracle == pytest.approx(oracle_score(SCORE))  # agrees with bounds.py


def test_v_b_and_v_r() -> None:
    # actor means: (1 + .5 + 0) / 3 = 0.5 and (0 + .2 + 1) / 3 = 0.4 -> best single = actor 0, 0.5
    actor, perf = best_single_performance(SCORE)
    assert actor == 0 and perf == pytest.approx(0.5)
    oracle = oracle_choice(SCORE)  # mu_o = 2.5 / 3
    assert v_b(SCORE, oracle) == pytest.approx((2.5 / 3) / 0.5)  # 5/3
    assert v_b(SCORE, oracle, best_single=1) == pytest.approx((2.5 / 3) / 0.4)
    assert v_r(SCORE, oracle, reference=0.625) == pytest.approx((2.5 / 3) / 0.625)  # 4/3
    assert v_b(SCORE, np.zeros(3, dtype=int)) == pytest.approx(1.0)  # the best single actor itself
    assert math.isnan(v_b(np.zeros((2, 2)), [0, 1]))


def test_oracle_distribution() -> None:
    score = np.array([[1, 0, 1, 0], [0, 0, 0, 0], [0.2, 0.6, 0.2, 0.0], [np.nan, 0, 0, 0]])
    expected = np.array(
        [
            [0.5, 0, 0.5, 0],  # uniform over the correct actors
            [0.25, 0.25, 0.25, 0.25],  # all wrong: uniform
            [0.2, 0.6, 0.2, 0.0],  # graded: normalised scores (sum 1.0 already)
            [0, 1 / 3, 1 / 3, 1 / 3],  # all observed are 0: uniform over the observed
        ]
    )
    np.testing.assert_allclose(oracle_distribution(score), expected)


def test_random_e_p_is_log2_m_exactly() -> None:
    for m in (2, 3, 5, 15):
        assert e_p(uniform_distribution(np.zeros((7, m)))) == pytest.approx(math.log2(m), abs=1e-12)
    assert e_p(uniform_distribution(np.zeros((1, 5)))) == pytest.approx(2.3219, abs=1e-4)  # RouterEval's 2.32


def test_r_o_p_entropy_matches_the_formula() -> None:
    # q0: k = 1 correct of m = 4, p = 0.5: P = 0.5 * 1 + 0.5 / 4 = 0.625 on it, 0.125 on the 3 others:
    #   H = 0.625 * log2(8/5) + 3 * 0.125 * 3 = 0.625 * (3 - log2 5) + 1.125 = 1.548795...
    # q1: k = 2 of 4: P = 0.5 / 2 + 0.125 = 0.375 on each correct, 0.125 on each other:
    #   H = 2 * 0.375 * log2(8/3) + 2 * 0.125 * 3 = 0.75 * (3 - log2 3) + 0.75 = 1.811278...
    score = np.array([[1, 0, 0, 0], [1, 1, 0, 0]], dtype=float)
    h0 = 0.625 * (3 - math.log2(5)) + 1.125
    h1 = 0.75 * (3 - math.log2(3)) + 0.75
    np.testing.assert_allclose(entropy_bits(oracle_p_distribution(score, 0.5)), [h0, h1])
    assert e_p(oracle_p_distribution(score, 0.5)) == pytest.approx((h0 + h1) / 2)
    # the general formula for k correct of m, any p
    for p in (0.0, 0.25, 0.75, 1.0):
        for k, m in ((1, 4), (2, 5), (3, 3)):
            row = np.zeros((1, m))
            row[0, :k] = 1
            a, b = p / k + (1 - p) / m, (1 - p) / m
            h = -k * a * math.log2(a) - ((m - k) * b * math.log2(b) if b > 0 and m > k else 0.0)
            assert e_p(oracle_p_distribution(row, p)) == pytest.approx(h, abs=1e-12)
    assert e_p(oracle_p_distribution(score, 0.0)) == pytest.approx(2.0)  # p = 0 is random, log2 4


def test_softmax_and_entropy_validation() -> None:
    np.testing.assert_allclose(softmax(np.array([[0.0, math.log(3.0)]])), [[0.25, 0.75]])
    np.testing.assert_allclose(softmax(np.array([[1000.0, 1000.0]])), [[0.5, 0.5]])  # no overflow
    np.testing.assert_allclose(softmax(np.array([[0.0, 2.0]]), temperature=2.0), softmax([[0.0, 1.0]]))
    assert e_p(np.eye(3)) == 0.0  # one-hot rows: no entropy
    with pytest.raises(ValueError, match="sum to 1"):
        entropy_bits(np.array([[0.5, 0.2]]))
    with pytest.raises(ValueError, match="non-negative"):
        entropy_bits(np.array([[1.5, -0.5]]))


def test_selection_shares_and_collapse() -> None:
    np.testing.assert_allclose(selection_shares([0, 0, 1, 2], 4), [0.5, 0.25, 0.25, 0.0])
    assert collapsed(np.r_[np.zeros(99, int), 1], 3)  # 99 / 100 = 0.99 >= 0.99
    assert not collapsed(np.r_[np.zeros(98, int), 1, 2], 3)  # 0.98
    assert not collapsed(np.zeros(0, int), 3)
    with pytest.raises(ValueError, match="outside"):
        selection_shares([0, 3], 3)


def test_oracle_p_choice_is_seeded_and_interpolates() -> None:
    rng = np.random.default_rng(1)
    score = (rng.random((4000, 4)) < 0.3).astype(float)
    np.testing.assert_array_equal(oracle_p_choice(score, 1.0), oracle_choice(score))
    a, b = oracle_p_choice(score, 0.5, seed=3), oracle_p_choice(score, 0.5, seed=3)
    np.testing.assert_array_equal(a, b)
    shares = selection_shares(oracle_p_choice(score, 0.0, seed=4), 4)
    # 4,000 uniform draws: sd of a share = sqrt(.25 * .75 / 4000) = 0.0068; 0.03 is > 4 sd
    np.testing.assert_allclose(shares, 0.25, atol=0.03)
    # E[mu_o(r_o(p))] = p * oracle + (1 - p) * random
    expected = 0.5 * mu_o(score, oracle_choice(score)) + 0.5 * score.mean()
    draws = [mu_o(score, oracle_p_choice(score, 0.5, seed=s)) for s in range(5)]
    assert np.mean(draws) == pytest.approx(expected, abs=0.02)
