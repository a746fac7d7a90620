"""One value per router: an exploring router is scored by the expectation of each metric under the distribution it
samples, with its argmax value beside it as ``<metric>_greedy`` (metrics/registry.py, docs/bandits.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from routerlab.metrics.bootstrap import bootstrap_ci
from routerlab.metrics.registry import GREEDY_SUFFIX, evaluate_choices, metric_info, registered_metrics
from routerlab.metrics.selection import entropy_bits, expected_per_query

# 3 queries x 2 actors. Query 2 has two correct actors, actor 1 the faster: its DCG rank 1, actor 0's rank 2.
SCORE = np.array([[1.0, 0.0], [0.0, 1.0], [0.75, 1.0]])
LATENCY = np.array([[1.0, 2.0], [1.0, 2.0], [3.0, 1.0]])
COST = np.array([[0.5, 1.0], [0.5, 1.0], [2.0, 1.0]])
DIST = np.array([[0.8, 0.2], [0.6, 0.4], [0.5, 0.5]])
ARGMAX = np.array([0, 0, 0])  # first on the tie of query 2
INV3 = 1.0 / math.log2(3.0)  # DCG of rank 2


def _run(policy: str, **kw: object) -> dict[str, float]:
    out = evaluate_choices(SCORE, ARGMAX, LATENCY, COST, DIST, n_boot=50, policy=policy, **kw)  # type: ignore[arg-type]
    return {k: v.value for k, v in out.items()}


def test_the_deployed_value_is_the_hand_computed_expectation_and_the_greedy_one_the_argmax() -> None:
    out = _run("distribution")
    # per query sum_a p(a|q) value(q, a), then the mean over the three queries
    hand = {
        "mu_o": (0.8 + 0.4 + (0.5 * 0.75 + 0.5 * 1.0)) / 3,
        "acc_at_1": (0.8 + 0.4 + 1.0) / 3,
        "acc_at_1_l": (0.8 + 0.4 + 0.5) / 3,
        "dcg": (0.8 + 0.4 + (0.5 * INV3 + 0.5)) / 3,
        "l_dcg": (0.8 + 0.4 + (0.5 * INV3 * 1 / 3 + 0.5)) / 3,
        "mean_latency": ((0.8 * 1 + 0.2 * 2) + (0.6 * 1 + 0.4 * 2) + (0.5 * 3 + 0.5 * 1)) / 3,
        "mean_cost": ((0.8 * 0.5 + 0.2 * 1) + (0.6 * 0.5 + 0.4 * 1) + (0.5 * 2 + 0.5 * 1)) / 3,
        "e_p": float(entropy_bits(DIST).mean()),
    }
    # V_B: over the best single actor on this split, actor 1 (mean 2/3 against actor 0's 1.75/3)
    hand["v_b"] = hand["mu_o"] / (2 / 3)
    greedy = {
        "mu_o": 1.75 / 3, "acc_at_1": 2 / 3, "acc_at_1_l": 1 / 3, "dcg": (1 + INV3) / 3,
        "l_dcg": (1 + INV3 / 3) / 3, "mean_latency": 5 / 3, "mean_cost": 3 / 3,
    }
    greedy["v_b"] = greedy["mu_o"] / (2 / 3)
    for name, value in hand.items():
        assert out[name] == pytest.approx(value, abs=1e-12), name
    for name, value in greedy.items():
        assert out[name + GREEDY_SUFFIX] == pytest.approx(value, abs=1e-12), name
    assert "e_p" + GREEDY_SUFFIX not in out  # E_p does not depend on the choice: one value
    # the argmax policy is the greedy value under the plain names, without twins
    plain = _run("argmax")
    assert plain == {k: out[k + GREEDY_SUFFIX] for k in greedy} | {"e_p": out["e_p"]}


def test_deployed_and_greedy_share_the_bootstrap_resamples() -> None:
    assert expected_per_query(SCORE, DIST) == pytest.approx([0.8, 0.4, 0.875])
    # the 3 queries 12 times over: enough queries (MIN_QUERIES) for an interval
    score, dist, argmax = np.tile(SCORE, (12, 1)), np.tile(DIST, (12, 1)), np.tile(ARGMAX, 12)
    out = evaluate_choices(score, argmax, distribution=dist, n_boot=200, seed=4, policy="distribution")
    per_query = expected_per_query(score, dist)
    assert out["mu_o"] == pytest.approx(bootstrap_ci(per_query, n_boot=200, seed=4))
    assert out["mu_o_greedy"] == pytest.approx(bootstrap_ci(score[np.arange(36), argmax], n_boot=200, seed=4))
    assert out["mu_o"].lo < out["mu_o"].hi
    assert evaluate_choices(score, argmax, distribution=dist, n_boot=200, seed=4, policy="distribution") == out


def test_a_one_hot_distribution_gives_the_argmax_value_exactly() -> None:
    score, latency, cost, argmax = (np.tile(x, (12, 1)) for x in (SCORE, LATENCY, COST, ARGMAX[:, None]))
    argmax = argmax[:, 0]  # 36 queries: values and intervals (MIN_QUERIES) both compared
    one_hot = np.eye(2)[argmax]
    out = evaluate_choices(score, argmax, latency, cost, one_hot, n_boot=50, policy="distribution")
    for name in ("mu_o", "v_b", "acc_at_1", "acc_at_1_l", "dcg", "l_dcg", "mean_cost", "mean_latency"):
        assert out[name] == out[name + GREEDY_SUFFIX], name


def test_an_acting_distribution_replaces_the_selection_one_for_the_value_only() -> None:
    acting = np.array([[0.0, 1.0], [0.0, 1.0], [1.0, 0.0]])
    out = evaluate_choices(SCORE, ARGMAX, distribution=DIST, n_boot=50, policy="distribution", acting=acting)
    assert out["mu_o"].value == pytest.approx((0 + 1 + 0.75) / 3)
    assert out["e_p"].value == pytest.approx(float(entropy_bits(DIST).mean()))  # E_p reads the selection one


def test_unknown_cells_raise_only_where_the_policy_can_draw_them() -> None:
    score = np.array([[1.0, np.nan], [0.0, 1.0]])
    names = ["mu_o", "mu_o_greedy"]
    ignored = np.array([[1.0, 0.0], [0.5, 0.5]])  # the NaN cell has probability 0: never drawn
    out = evaluate_choices(score, [0, 1], distribution=ignored, n_boot=20, policy="distribution", names=names)
    assert out["mu_o"].value == pytest.approx((1.0 + 0.5) / 2)
    drawn = np.array([[0.5, 0.5], [0.5, 0.5]])
    with pytest.raises(ValueError, match=r"mu_o: .* probability > 0 is unknown \(NaN\) at query 0"):
        evaluate_choices(score, [0, 1], distribution=drawn, n_boot=20, policy="distribution", names=names)
    zero = evaluate_choices(score, [0, 1], distribution=drawn, n_boot=20, policy="distribution", nan_policy="zero",
                            names=names)
    assert zero["mu_o"].value == pytest.approx((0.5 + 0.5) / 2)  # the unobserved cell counts 0


def test_bad_policies_are_errors() -> None:
    with pytest.raises(ValueError, match="policy must be one of"):
        evaluate_choices(SCORE, ARGMAX, policy="sampled")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="pass distribution"):
        evaluate_choices(SCORE, ARGMAX, policy="distribution")
    with pytest.raises(ValueError, match="rows must sum to 1"):
        evaluate_choices(SCORE, ARGMAX, distribution=DIST * 2, policy="distribution")


def test_the_registry_knows_the_greedy_names() -> None:
    names = registered_metrics()
    assert names.index("mu_o_greedy") == names.index("mu_o") + 1
    info = metric_info("mu_o_greedy")
    assert (info.label, info.unit, info.direction, info.greedy_of) == ("mu_o (greedy)", "score", "higher", "mu_o")
    assert metric_info("mean_latency_greedy").direction == "lower"
    assert "e_p_greedy" not in names and metric_info("e_p").choice_free
    with pytest.raises(ValueError, match="unknown metric"):
        metric_info("nope")
