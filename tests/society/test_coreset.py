"""Greedy max-HSE coreset (SPEC 2 rule), the joint criterion and the diminishing-returns curve."""

from __future__ import annotations

import math

import numpy as np
import pytest

from routerlab.errors import UsageError
from routerlab.society import (
    coreset,
    diversity,
    greedy_coreset,
    hse,
    orthogonal_society,
    pairwise_distances,
    random_subsets_curve,
    subset_hse,
)


def brute_greedy(B: np.ndarray, k: int, linkage: str = "single") -> list[int]:
    """The SPEC rule, read literally: farthest pair, then the actor raising HSE most (lowest index)."""
    dist = pairwise_distances(B)
    D = dist.matrix
    n = D.shape[0]
    best = max((D[j, i], -j, -i) for j in range(n) for i in range(j + 1, n))
    order = [-best[1], -best[2]]
    while len(order) < k:
        vals = {c: subset_hse(dist, [*order, c], linkage) for c in range(n) if c not in order}
        top = max(vals.values())
        order.append(min(c for c, v in vals.items() if v >= top - 1e-10))
    return order


@pytest.mark.parametrize("linkage", ["single", "complete", "average"])
def test_greedy_matches_the_literal_rule(linkage: str) -> None:
    rng = np.random.default_rng(1)
    for _ in range(4):
        B = (rng.random((12, 40)) < rng.random((12, 1))).astype(float)
        cs = coreset(B, 8, linkage=linkage)
        assert cs.order[:8] == brute_greedy(B, 8, linkage)


def test_orthogonal_society_ties_go_to_the_lower_index() -> None:
    cs = coreset(orthogonal_society(7), 7)
    assert cs.order == list(range(7))
    assert [p.hse for p in cs.curve] == [0.0] + [math.log2(k) for k in range(2, 8)]
    assert all(p.hse_normalized == (0.0 if p.size == 1 else 1.0) for p in cs.curve)


def test_farthest_pair_starts_and_duplicates_come_last() -> None:
    B = np.array([[1, 1, 0, 0], [1, 1, 0, 0], [1, 0, 0, 0], [0, 0, 1, 1], [0, 0, 0, 1]], dtype=float)
    cs = coreset(B, 5)
    assert cs.order[:2] == [0, 3]  # d = 1; (0, 3) is the first such pair
    assert cs.order[-1] == 1  # an exact copy of actor 0 adds nothing
    assert cs.curve[-1].hse == pytest.approx(hse(B))


def test_thresholds_90_and_95() -> None:
    cs = coreset(orthogonal_society(6))
    full = math.log2(6)
    assert cs.full_hse == full
    # log2(5) = 2.32 < 0.9 * log2(6) = 2.33, so 90% needs all six
    assert cs.size_90 == 6 and cs.size_95 == 6
    B = np.vstack([np.eye(4), np.eye(4)[[0, 1, 2]]])  # four distinct actors and three copies
    cs = coreset(B, 2)
    assert cs.size_90 == 4 and cs.size_95 == 4  # the four distinct actors beat the whole pool
    assert cs.curve[3].hse == 2.0 > cs.full_hse


def test_curve_stops_at_95_percent_unless_asked() -> None:
    rng = np.random.default_rng(3)
    B = (rng.random((30, 200)) < 0.3).astype(float)
    cs = coreset(B, 3)
    assert cs.size_95 is not None and len(cs.order) == max(3, cs.size_95)
    assert cs.selected == cs.order[:3] and len(cs.to_dict()["order"]) == 3
    dist = pairwise_distances(B)
    full = greedy_coreset(dist, 3, stop_fraction=None)
    assert len(full.order) == 30 and full.order[: len(cs.order)] == cs.order
    capped = greedy_coreset(dist, 3, max_size=3, stop_fraction=None)
    assert capped.order == cs.order[:3]


def test_joint_criterion() -> None:
    # actor 0 is accurate; 1 and 2 are orthogonal but weak
    B = np.array([[1, 1, 1, 1, 1, 1, 1, 0], [0, 0, 0, 0, 0, 0, 0, 1], [1, 0, 0, 0, 0, 0, 0, 0],
                  [0, 1, 0, 0, 0, 0, 0, 0]], dtype=float)
    pure = coreset(B, 2)
    assert pure.order[:2] == [0, 1]  # d(0, 1) = 1 = d(1, 2) = d(1, 3) = d(2, 3): first pair
    acc = coreset(B, 2, alpha=0.0)
    assert acc.order[:2] == [0, 1]  # oracle accuracy 1.0
    assert acc.curve[1].oracle_accuracy == 1.0
    mixed = coreset(B, 3, alpha=0.5)
    for p in mixed.curve:
        assert p.objective == pytest.approx(0.5 * p.hse_normalized + 0.5 * (p.oracle_accuracy or 0.0))
    with pytest.raises(UsageError, match="alpha"):
        coreset(B, 2, alpha=1.5)
    with pytest.raises(UsageError, match="behaviour matrix"):
        greedy_coreset(pairwise_distances(B), 2, alpha=0.5)


def test_joint_pair_uses_graded_oracle() -> None:
    B = np.array([[0.9, 0.9, 0.1], [0.1, 0.2, 0.9], [0.5, 0.5, 0.5]])
    cs = coreset(B, 2, alpha=0.0)
    best = max((np.maximum(B[j], B[i]).mean(), -j, -i) for j in range(3) for i in range(j + 1, 3))
    assert cs.order[:2] == [-best[1], -best[2]]


def test_random_subsets_baseline_is_below_greedy() -> None:
    rng = np.random.default_rng(9)
    B = (rng.random((25, 300)) < rng.random((25, 1))).astype(float)
    dist = pairwise_distances(B)
    cs = greedy_coreset(dist, 2, stop_fraction=None)
    rnd = random_subsets_curve(dist, range(1, 26), n_draws=10, seed=1)
    greedy = np.array([p.hse for p in cs.curve])
    assert np.all(rnd.mean <= greedy + 1e-12)
    assert np.all(rnd.low <= rnd.mean + 1e-12) and np.all(rnd.mean <= rnd.high + 1e-12)
    assert rnd.mean[-1] == pytest.approx(diversity(B).hse)
    again = random_subsets_curve(dist, range(1, 26), n_draws=10, seed=1)
    assert np.array_equal(again.mean, rnd.mean)


def test_bad_sizes() -> None:
    with pytest.raises(UsageError, match="coreset size"):
        coreset(np.eye(3), 4)
    cs = coreset(np.eye(1), 1)
    assert cs.order == [0] and cs.curve[0].hse == 0.0
