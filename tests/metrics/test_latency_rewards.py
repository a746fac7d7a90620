"""latency_rewards: the SPEC 5 value of choosing each actor, every actor at once."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from routerlab.metrics.latency import latency_ranks, latency_rewards

L3 = 1 / math.log2(3)  # DCG of rank 2


def test_hand_computed_case() -> None:
    score = np.array([[1, 1, 0, 1], [0, 0, 0, 0], [1, np.nan, 1, 0]])
    latency = np.array([[2.0, 1.0, 0.5, 2.0], [1, 2, 3, 4], [4.0, 1.0, 2.0, 1.0]])
    r = latency_rewards(score, latency)
    # q0: C = 1 (1 s), then 0 and 3 tied at 2 s (both rank 2); actor 2 is wrong although fastest
    np.testing.assert_allclose(r["acc_at_1"][0], [1, 1, 0, 1])
    np.testing.assert_allclose(r["acc_at_1_l"][0], [0, 1, 0, 0])
    np.testing.assert_allclose(r["dcg"][0], [L3, 1, 0, L3])
    np.testing.assert_allclose(r["l_dcg"][0], [L3 / 2, 1, 0, L3 / 2])
    # q1: nobody is correct: 0 for every actor
    for key in ("acc_at_1", "acc_at_1_l", "dcg", "l_dcg"):
        np.testing.assert_array_equal(r[key][1], 0.0)
    # q2: C = 2 (2 s), 0 (4 s); actor 1 is unobserved: its reward is unknown, never 0
    np.testing.assert_allclose(r["dcg"][2], [L3, np.nan, 1, 0])
    np.testing.assert_allclose(r["l_dcg"][2], [L3 / 2, np.nan, 1, 0])
    np.testing.assert_allclose(r["acc_at_1"][2], [1, np.nan, 1, 0])


def test_without_latency_only_acc_at_1() -> None:
    r = latency_rewards(np.array([[0.7, 0.2], [np.nan, 0.5]]))
    assert set(r) == {"acc_at_1"}
    np.testing.assert_array_equal(r["acc_at_1"], [[1, 0], [np.nan, 1]])
    assert latency_rewards(np.array([[0.7, 0.2]]), threshold=0.8)["acc_at_1"].tolist() == [[0, 0]]


def test_per_actor_latency_and_errors() -> None:
    r = latency_rewards(np.array([[1, 1, 1]]), np.array([3.0, 1.0, 2.0]))
    np.testing.assert_allclose(r["l_dcg"], [[1 / 2 / 3, 1, 1 / math.log2(3) / 2]])
    with pytest.raises(ValueError, match="latency is unknown"):
        latency_rewards(np.array([[1, 0]]), np.array([[np.nan, 1.0]]))
    with pytest.raises(ValueError, match="non-negative"):
        latency_rewards(np.array([[1, 0]]), np.array([[-1.0, 1.0]]))
    # an unknown latency of a wrong actor does not matter (as in latency_ranks)
    assert latency_rewards(np.array([[1, 0]]), np.array([[1.0, np.nan]]))["dcg"].tolist() == [[1, 0]]


@settings(max_examples=60)
@given(
    st.integers(1, 12).flatmap(lambda n: st.integers(1, 6).flatmap(lambda m: st.tuples(
        hnp.arrays(np.float64, (n, m), elements=st.sampled_from([0.0, 0.3, 0.5, 0.8, 1.0])),
        hnp.arrays(np.float64, (n, m), elements=st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.5])),
    )))
)
def test_column_a_is_latency_ranks_of_always_a(arrays: tuple[np.ndarray, np.ndarray]) -> None:
    score, latency = arrays
    r = latency_rewards(score, latency)
    n, m = score.shape
    for a in range(m):
        ranks = latency_ranks(score, np.full(n, a), latency)
        for key in ("acc_at_1", "acc_at_1_l", "dcg", "l_dcg"):
            np.testing.assert_allclose(r[key][:, a], getattr(ranks, key), err_msg=f"{key}, actor {a}")


def test_demo_table_agrees_with_latency_ranks() -> None:
    from routerlab.datasets import demo

    t = demo(300, seed=2)
    assert t.latency_s is not None
    r = latency_rewards(t.score, t.latency_s)
    for a in range(t.n_actors):
        ranks = latency_ranks(t.score, np.full(t.n_queries, a), t.latency_s)
        np.testing.assert_allclose(r["l_dcg"][:, a], ranks.l_dcg)
        np.testing.assert_allclose(r["acc_at_1_l"][:, a], ranks.acc_at_1_l)
