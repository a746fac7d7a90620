"""The NaN rule (SPEC 1: NaN = unobserved): a chosen unobserved cell never passes silently."""

from __future__ import annotations

import numpy as np
import pytest

from routerlab.metrics.latency import acc_at_1, l_dcg
from routerlab.metrics.registry import evaluate_choices
from routerlab.metrics.selection import mu_o, oracle_choice, v_b

SCORE = np.array([[1.0, 0.0], [np.nan, 1.0], [0.5, np.nan]])
LATENCY = np.ones((3, 2))


def test_chosen_unobserved_cell_raises_naming_the_query() -> None:
    with pytest.raises(ValueError, match=r"unobserved \(NaN\) at query 1\b"):
        mu_o(SCORE, [0, 0, 0])
    with pytest.raises(ValueError, match="queries 1, 2"):
        mu_o(SCORE, [0, 0, 1])
    for call in (
        lambda: acc_at_1(SCORE, [0, 0, 0]),
        lambda: l_dcg(SCORE, [0, 0, 0], LATENCY),
        lambda: evaluate_choices(SCORE, [0, 0, 0], n_boot=10),
    ):
        with pytest.raises(ValueError, match="query 1"):
            call()


def test_zero_policy_counts_a_chosen_unobserved_cell_as_wrong() -> None:
    assert mu_o(SCORE, [0, 0, 0], nan_policy="zero") == pytest.approx((1 + 0 + 0.5) / 3)
    assert acc_at_1(SCORE, [0, 0, 0], nan_policy="zero") == pytest.approx(2 / 3)  # 1, NaN -> 0, 0.5 >= 0.5
    out = evaluate_choices(SCORE, [0, 0, 0], n_boot=10, nan_policy="zero")
    assert out["mu_o"].value == pytest.approx(0.5)
    with pytest.raises(ValueError, match="nan_policy"):
        mu_o(SCORE, [0, 0, 0], nan_policy="ignore")  # type: ignore[arg-type]


def test_unchosen_unobserved_cells_are_never_candidates() -> None:
    np.testing.assert_array_equal(oracle_choice(SCORE), [0, 1, 0])
    assert mu_o(SCORE, oracle_choice(SCORE)) == pytest.approx((1 + 1 + 0.5) / 3)
    # best single actor on observed cells: actor 0 mean (1 + .5) / 2 = .75 > actor 1 (0 + 1) / 2 = .5,
    # but its own column has an unobserved cell, so V_B needs a policy for it
    with pytest.raises(ValueError, match="query 1"):
        v_b(SCORE, [0, 1, 0])
    assert v_b(SCORE, [0, 1, 0], nan_policy="zero") == pytest.approx((2.5 / 3) / (1.5 / 3))


def test_cost_omit_policy_in_evaluate_choices() -> None:
    score = np.ones((3, 2))
    cost = np.array([[1.0, 2.0], [np.nan, 2.0], [3.0, 2.0]])
    with pytest.raises(ValueError, match=r"cost is unknown.*query 1"):
        evaluate_choices(score, [0, 0, 0], cost=cost, n_boot=10)
    out = evaluate_choices(score, [0, 0, 0], cost=cost, n_boot=50, value_nan_policy="omit")
    assert out["mean_cost"].value == pytest.approx(2.0)  # (1 + 3) / 2, the unknown query left out
    # 45 queries, 30 of them known: enough (MIN_QUERIES) for an interval
    many = evaluate_choices(np.ones((45, 2)), [0] * 45, cost=np.tile(cost, (15, 1)), n_boot=50,
                            value_nan_policy="omit")
    assert many["mean_cost"].value == pytest.approx(2.0)
    assert 1.0 <= many["mean_cost"].lo <= many["mean_cost"].hi <= 3.0
