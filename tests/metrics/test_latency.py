"""Acc@1, Acc@1-L, DCG, L-DCG, answerable view and Oracle(Best-of-N) (SPEC 5)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routerlab.metrics.latency import (
    acc_at_1,
    acc_at_1_l,
    acc_at_1_l_per_query,
    acc_at_1_per_query,
    answerable,
    correct_mask,
    dcg,
    dcg_per_query,
    fastest_correct,
    l_dcg,
    l_dcg_per_query,
    latency_ranks,
    oracle_best_of_n,
)
from routerlab.metrics.selection import oracle_choice

SCORE = np.array([[1, 1, 1], [1, 0, 1], [0, 0, 0], [0, 1, 1]], dtype=float)
LATENCY = np.array([[1, 2, 4], [3, 1, 2], [1, 1, 1], [5, 4, 2]], dtype=float)
CHOICE = np.array([1, 0, 2, 2])
L3 = 1 / math.log2(3)  # DCG of rank 2
# q0: C = 0 (1 s), 1 (2 s), 2 (4 s); chosen 1 -> rank 2: DCG 1/log2 3, L-DCG * 1/2
# q1: C = 2 (2 s), 0 (3 s);          chosen 0 -> rank 2: DCG 1/log2 3, L-DCG * 2/3
# q2: C empty                        -> 0 everywhere, not answerable
# q3: C = 2 (2 s), 1 (4 s);          chosen 2 -> rank 1: DCG 1, L-DCG 1
EXPECTED: dict[str, list[float]] = {
    "acc_at_1": [1, 1, 0, 1],
    "acc_at_1_l": [0, 0, 0, 1],
    "dcg": [L3, L3, 0, 1],
    "l_dcg": [L3 / 2, L3 * 2 / 3, 0, 1],
}


def test_per_query_terms_by_hand() -> None:
    np.testing.assert_allclose(acc_at_1_per_query(SCORE, CHOICE), EXPECTED["acc_at_1"])
    np.testing.assert_allclose(acc_at_1_l_per_query(SCORE, CHOICE, LATENCY), EXPECTED["acc_at_1_l"])
    np.testing.assert_allclose(dcg_per_query(SCORE, CHOICE, LATENCY), EXPECTED["dcg"])
    np.testing.assert_allclose(l_dcg_per_query(SCORE, CHOICE, LATENCY), EXPECTED["l_dcg"])
    np.testing.assert_array_equal(answerable(SCORE), [True, True, False, True])


def test_means_and_answerable_view() -> None:
    assert acc_at_1(SCORE, CHOICE) == pytest.approx(3 / 4)
    assert acc_at_1(SCORE, CHOICE, answerable_only=True) == pytest.approx(1.0)
    assert acc_at_1_l(SCORE, CHOICE, LATENCY) == pytest.approx(1 / 4)
    assert acc_at_1_l(SCORE, CHOICE, LATENCY, answerable_only=True) == pytest.approx(1 / 3)
    assert dcg(SCORE, CHOICE, LATENCY) == pytest.approx((2 * L3 + 1) / 4)
    assert l_dcg(SCORE, CHOICE, LATENCY) == pytest.approx((L3 * (1 / 2 + 2 / 3) + 1) / 4)
    assert l_dcg(SCORE, CHOICE, LATENCY, answerable_only=True) == pytest.approx((L3 * (7 / 6) + 1) / 3)


def test_oracle_perfect_is_one_on_answerable_queries() -> None:
    oracle = oracle_choice(SCORE, LATENCY)
    for fn in (acc_at_1_l, dcg, l_dcg):
        assert fn(SCORE, oracle, LATENCY, answerable_only=True) == 1.0
        assert fn(SCORE, oracle, LATENCY) == pytest.approx(3 / 4)  # the empty-C_q query scores 0
    assert acc_at_1(SCORE, oracle, answerable_only=True) == 1.0


def test_latency_ties_share_the_best_rank() -> None:
    score, latency = np.array([[1.0, 1.0, 0.0]]), np.array([[2.0, 2.0, 1.0]])
    r = latency_ranks(score, [1], latency)
    assert (r.acc_at_1_l[0], r.dcg[0], r.l_dcg[0]) == (1.0, 1.0, 1.0)


def test_threshold_and_unknown_latency() -> None:
    np.testing.assert_array_equal(correct_mask(np.array([[0.6, 0.4, np.nan]])), [[True, False, False]])
    assert acc_at_1(np.array([[0.6, 0.4]]), [0], threshold=0.7) == 0.0
    # an incorrect actor's latency may be unknown
    assert l_dcg(np.array([[1.0, 0.0]]), [0], np.array([[2.0, np.nan]])) == 1.0
    with pytest.raises(ValueError, match=r"latency is unknown.*query 0"):
        l_dcg(np.array([[1.0, 1.0]]), [0], np.array([[2.0, np.nan]]))
    assert math.isnan(acc_at_1(np.zeros((2, 2)), [0, 1], answerable_only=True))  # mean over no query


def test_oracle_best_of_n_by_hand() -> None:
    routers = np.array([[0, 0, 2, 1], [2, 1, 0, 1]])
    # q0 picked {0, 2}: both correct, 0 is faster (1 s < 4 s)   -> 0
    # q1 picked {0, 1}: only 0 correct                          -> 0
    # q2 picked {0, 2}: none correct, equal latency -> first    -> 0
    # q3 picked {1}                                             -> 1
    best = oracle_best_of_n(SCORE, LATENCY, routers)
    np.testing.assert_array_equal(best, [0, 0, 0, 1])
    np.testing.assert_allclose(acc_at_1_l_per_query(SCORE, best, LATENCY), [1, 0, 0, 0])
    # picking every actor recovers Oracle(Perfect)
    everyone = np.tile(np.arange(3)[:, None], (1, 4))
    np.testing.assert_array_equal(oracle_best_of_n(SCORE, LATENCY, everyone), oracle_choice(SCORE, LATENCY))
    with pytest.raises(ValueError, match="query 0"):
        oracle_best_of_n(np.array([[np.nan, 1.0]]), None, np.array([[0]]))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 12), st.integers(1, 6), st.booleans())
def test_l_dcg_le_dcg_le_acc_and_oracle_perfect(seed: int, n: int, m: int, graded: bool) -> None:
    rng = np.random.default_rng(seed)
    score = rng.random((n, m)) if graded else (rng.random((n, m)) < 0.4).astype(float)
    latency = rng.choice([0.5, 1.0, 2.0, 7.5], size=(n, m))  # a few values, so ties occur
    choice = rng.integers(0, m, n)
    r = latency_ranks(score, choice, latency)
    assert np.all(r.l_dcg <= r.dcg + 1e-12)
    assert np.all(r.dcg <= r.acc_at_1 + 1e-12)
    assert np.all(r.acc_at_1_l <= r.dcg + 1e-12)
    assert np.all((r.l_dcg >= 0) & (r.acc_at_1 <= 1))
    assert np.all(r.acc_at_1[~r.answerable] == 0)
    if not graded:  # on 0/1 scores r_o is Oracle(Perfect)
        oracle = latency_ranks(score, oracle_choice(score, latency), latency)
        for values in (oracle.acc_at_1, oracle.acc_at_1_l, oracle.dcg, oracle.l_dcg):
            np.testing.assert_array_equal(values[oracle.answerable], 1.0)


def test_fastest_correct_labels_agree_with_acc_at_1_l() -> None:
    label = fastest_correct(SCORE, LATENCY)
    np.testing.assert_array_equal(label, [0, 2, 0, 2])  # query 2 has no correct actor: its fastest (tie: first)
    answerable_rows = answerable(SCORE)
    hits = acc_at_1_l_per_query(SCORE[answerable_rows], label[answerable_rows], LATENCY[answerable_rows])
    assert hits.tolist() == [1.0, 1.0, 1.0]
    # ties on latency go to the cheaper actor; without latency it is the oracle's rule
    tied = np.array([[1.0, 1.0]])
    assert fastest_correct(tied, [1.0, 1.0], cost=[2.0, 1.0]).tolist() == [1]
    np.testing.assert_array_equal(fastest_correct(SCORE, None), oracle_choice(SCORE))
