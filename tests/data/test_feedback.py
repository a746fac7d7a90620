"""Feedback (SPEC 1): full feedback is the training table; logged feedback keeps one observed actor per query
with its propensity, and routers learn from either through ``fit``."""

from __future__ import annotations

import numpy as np
import pytest

from routerlab.data.feedback import Feedback, as_feedback
from routerlab.datasets import demo
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.routers import get_router

TABLE = demo(200, seed=2).select_split("train")


def test_full_feedback_is_the_table() -> None:
    fb = as_feedback(TABLE)
    assert fb.kind == "full" and fb.table is TABLE and fb.propensity is None
    assert as_feedback(fb) is fb


def test_logged_feedback_keeps_one_cell_per_query() -> None:
    n, m = TABLE.n_queries, TABLE.n_actors
    actor = np.arange(n) % m
    fb = Feedback.logged(TABLE, actor, np.full(n, 1.0 / m))
    assert fb.kind == "logged"
    observed = ~np.isnan(fb.table.score)
    assert observed.sum(axis=1).tolist() == [1] * n
    assert np.array_equal(observed.argmax(axis=1), actor)
    rows = np.arange(n)
    np.testing.assert_array_equal(fb.table.score[rows, actor], TABLE.score[rows, actor])
    assert TABLE.latency_s is not None and fb.table.latency_s is not None
    np.testing.assert_array_equal(fb.table.latency_s[rows, actor], TABLE.latency_s[rows, actor])
    assert np.isnan(fb.table.latency_s[rows, (actor + 1) % m]).all()  # the others' latencies are hidden too


@pytest.mark.parametrize("propensity", [0.0, -0.1, 1.5, float("nan")])
def test_bad_propensities_are_refused(propensity: float) -> None:
    p = np.full(TABLE.n_queries, 0.5)
    p[3] = propensity
    with pytest.raises(UsageError, match="propensity"):
        Feedback.logged(TABLE, np.zeros(TABLE.n_queries, dtype=int), p)


def test_bad_actors_and_several_cells_are_refused() -> None:
    with pytest.raises(UsageError, match="actor index"):
        Feedback.logged(TABLE, np.full(TABLE.n_queries, TABLE.n_actors), np.ones(TABLE.n_queries))
    with pytest.raises(UsageError, match="at most one actor"):
        Feedback(TABLE, np.ones(TABLE.n_queries))


def test_a_router_fits_on_logged_feedback_and_knows_it() -> None:
    n = TABLE.n_queries
    rng = np.random.default_rng(0)
    fb = Feedback.logged(TABLE, rng.integers(0, TABLE.n_actors, n), np.full(n, 1.0 / TABLE.n_actors))
    X = rng.random((n, 8)).astype(np.float32)
    knn = get_router("knn:k=5").fit(fb, Features(X, fb.table, "random"))
    assert knn.feedback_kind == "logged" and knn.propensity is not None
    assert knn.choose(Features(X, TABLE, "random")).shape == (n,)
    assert get_router("knn:k=5").fit(TABLE, Features(X, TABLE, "random")).feedback_kind == "full"
