"""Scaling curve and candidate groups (SPEC 4) on the demo and on hand-made tables."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from routerlab import RoutingTable
from routerlab.data.splits import given_split
from routerlab.datasets import demo
from routerlab.errors import UsageError
from routerlab.metrics.bounds import bounds, oracle_score
from routerlab.protocols.groups import candidate_groups
from routerlab.protocols.scaling import scaling_curve


@pytest.fixture(scope="module")
def table() -> RoutingTable:
    return demo(900, seed=5)


def test_full_pool_endpoints_equal_the_bounds(table: RoutingTable) -> None:
    sp = given_split(table)
    curve = scaling_curve(table, sp, [table.n_actors], samples=3, seed=0)
    train, test = sp.apply(table)
    b = bounds(test.score, train.score)
    assert curve.oracle_p[1.0]["mean"][0] == pytest.approx(b.oracle)
    assert curve.oracle_p[0.0]["mean"][0] == pytest.approx(b.random)
    assert curve.oracle_p[0.5]["mean"][0] == pytest.approx((b.oracle + b.random) / 2)
    assert curve.best_single["mean"][0] == pytest.approx(b.best_single)
    assert curve.oracle_p[1.0]["std"][0] == pytest.approx(0.0)


def test_single_actor_pools_make_p_irrelevant(table: RoutingTable) -> None:
    curve = scaling_curve(table, given_split(table), [1], samples=20, seed=1)
    assert curve.oracle_p[0.0]["mean"] == pytest.approx(curve.oracle_p[1.0]["mean"])
    assert curve.best_single["mean"] == pytest.approx(curve.oracle_p[1.0]["mean"])


def test_oracle_grows_with_pool_size_and_is_seeded(table: RoutingTable) -> None:
    sp = given_split(table)
    a = scaling_curve(table, sp, [2, 4, 6], samples=50, seed=2)
    b = scaling_curve(table, sp, [2, 4, 6], samples=50, seed=2)
    assert a.to_dict() == b.to_dict()
    oracle = a.oracle_p[1.0]["mean"]
    assert oracle[0] < oracle[1] < oracle[2]
    # at every m the oracle is above the uniform router, and r_o(p) is linear in p
    for i in range(3):
        assert a.oracle_p[1.0]["mean"][i] > a.oracle_p[0.0]["mean"][i]
        mid = (a.oracle_p[1.0]["mean"][i] + a.oracle_p[0.0]["mean"][i]) / 2
        assert a.oracle_p[0.5]["mean"][i] == pytest.approx(mid)
    with pytest.raises(UsageError, match="outside"):
        scaling_curve(table, sp, [99])


def _pool_table() -> RoutingTable:
    # 10 actors with train means 0.95 (ineligible), 0.85, 0.8, ..., 0.15, 0.05 (ineligible)
    rng = np.random.default_rng(0)
    means = [0.95, 0.85, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.15, 0.05]
    score = (rng.random((400, 10)) < np.array(means)).astype(np.float32)
    return RoutingTable.from_arrays(score, actors=[f"a{j}" for j in range(10)], split=["train"] * 400)


def test_groups_follow_the_spec_rule() -> None:
    t = _pool_table()
    from routerlab.metrics.bounds import actor_means

    means = actor_means(t.score)
    eligible = [j for j in np.argsort(-means) if 0.1 <= means[j] <= 0.9]
    groups = {(g.kind, g.m): g for g in candidate_groups(t, [2], draws=500, seed=0)}
    top = {f"a{j}" for j in eligible[:2]}  # 20% of 8 eligible -> ceil(1.6) = 2
    bottom = {f"a{j}" for j in eligible[-2:]}
    assert set(groups["all-strong", 2].actors) == top
    assert set(groups["all-weak", 2].actors) == bottom
    s2w = groups["strong-to-weak", 2].actors
    first_half = {f"a{j}" for j in eligible[:4]}
    assert s2w[0] in first_half and s2w[1] not in first_half
    # the kept strong-to-weak group is the best train oracle over all slice combinations
    best = max(oracle_score(t.score[:, [i, j]]) for i, j in itertools.product(eligible[:4], eligible[4:]))
    assert groups["strong-to-weak", 2].train_oracle == pytest.approx(best)


def test_groups_deterministic_and_errors() -> None:
    t = _pool_table()
    a = [g.to_dict() for g in candidate_groups(t, [2, 3], draws=50, seed=4)]
    b = [g.to_dict() for g in candidate_groups(t, [2, 3], draws=50, seed=4)]
    assert a == b
    wide = candidate_groups(t, [3], kinds=("all-strong",), draws=50)[0]  # slice of 2 widened to the top 3
    assert set(wide.actors) == {"a1", "a2", "a3"}
    with pytest.raises(UsageError, match="eligible"):
        candidate_groups(t, [9], kinds=("all-strong",))
    with pytest.raises(UsageError, match="unknown group kinds"):
        candidate_groups(t, [2], kinds=("nope",))
