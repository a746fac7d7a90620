"""Every registered router honours the contract: shapes, finite scores, a valid distribution,
determinism for a seed, no peeking at test labels, and no crash on unobserved (NaN) training cells."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest

from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.routers import Router, get_router, routers
from tests.routers.conftest import Data, fit_for_test, make

EXPECTED = {
    "random", "oracle", "oracle-p", "best-single", "largest", "smallest", "cheapest", "fastest",
    "knn", "prknn", "linear", "mlp", "mlc", "naive-bayes", "svm", "cluster", "avenger", "mf", "hybrid", "graph",
}
# LLM routers (prompted) and two-model routers (two actors and small-model signals: routerlab.testing.check_router
# covers them) have their own tests
ALL = sorted(n for n, c in routers().items() if not c.needs_backend and not getattr(c, "two_model", False))


def test_registry_has_the_zoo() -> None:
    known = routers()
    assert set(known) >= EXPECTED
    for name, cls in known.items():
        assert cls.name == name and cls.summary, name


def _check_valid(router: Router, data: Data) -> tuple[np.ndarray, np.ndarray]:
    n, m = data.test.n_queries, data.test.n_actors
    s = router.scores(data.ftest)
    p = router.distribution(data.ftest)
    c = router.choose(data.ftest)
    assert s.shape == (n, m) and np.isfinite(s).all()
    assert p.shape == (n, m) and (p >= -1e-12).all() and np.allclose(p.sum(axis=1), 1.0)
    assert c.shape == (n,) and c.min() >= 0 and c.max() < m
    assert np.array_equal(c, s.argmax(axis=1))
    return s, p


@pytest.mark.parametrize("name", ALL)
def test_fit_score_distribution_and_determinism(name: str, data: Data, fitted: Callable[[str], Router]) -> None:
    first = fitted(name)
    s1, p1 = _check_valid(first, data)
    again = fit_for_test(make(name), data)
    s2, p2 = again.scores(data.ftest), again.distribution(data.ftest)
    np.testing.assert_array_equal(s1, s2)
    np.testing.assert_array_equal(p1, p2)
    if not first.uses_test_labels:  # only a bound may be handed the test outcomes
        with pytest.raises(UsageError, match="must not see test outcomes"):
            first.reveal(data.test)


def test_query_features_carry_no_outcomes(data: Data) -> None:
    """A router cannot read the outcomes of the queries it routes: its features hold none."""
    for attr in ("table", "score", "tokens_in", "tokens_out", "latency_s", "cost_usd"):
        assert not hasattr(data.ftest, attr), attr
    assert data.ftest.actor_names == data.test.actor_names
    assert np.array_equal(data.ftest.queries.ids, data.test.queries.ids)


class _ColumnMeans(Router):
    """A cheat: routes every query to the actor with the best mean *test* score, read from its features."""

    name = "column-means-cheat"

    def _fit(self, train: RoutingTable, features: Features) -> None:
        pass

    def _scores(self, features: Features) -> np.ndarray:
        score = features.table.score  # type: ignore[attr-defined]
        return np.tile(np.nanmean(score, axis=0), (features.n, 1))


def test_the_column_means_cheat_cannot_run(data: Data) -> None:
    cheat = _ColumnMeans().fit(data.train, data.ftrain)
    with pytest.raises(AttributeError):
        cheat.scores(data.ftest)
    with pytest.raises(UsageError):
        cheat.reveal(data.test)


def test_a_bound_needs_the_outcomes_of_the_queries_it_routes(data: Data) -> None:
    oracle = get_router("oracle").fit(data.train, data.ftrain)
    with pytest.raises(UsageError, match="reveal"):
        oracle.choose(data.ftest)
    oracle.reveal(data.train)
    with pytest.raises(UsageError, match="other queries"):
        oracle.choose(data.ftest)
    assert oracle.reveal(data.test).choose(data.ftest).shape == (data.test.n_queries,)


def _mask_train(data: Data, kind: str) -> Data:
    rng = np.random.default_rng(7)
    score = data.train.score.copy()
    n, m = score.shape
    if kind == "20%":
        score[rng.random(score.shape) < 0.2] = np.nan
        score[:3] = np.nan  # a few queries with nothing observed at all
    else:  # cold start: one logged outcome per query
        keep = rng.integers(0, m, n)
        one = np.full_like(score, np.nan)
        one[np.arange(n), keep] = score[np.arange(n), keep]
        score = one
    train = replace(data.train, score=score)
    return replace(data, train=train, ftrain=Features(data.ftrain.X, train, data.ftrain.encoder))


@pytest.mark.parametrize("kind", ["20%", "one-per-query"])
def test_nan_training_cells_do_not_break_any_router(kind: str, data: Data) -> None:
    masked = _mask_train(data, kind)
    for name in ALL:
        router = fit_for_test(make(name), masked)
        _check_valid(router, masked)


def test_oracle_skips_unobserved_test_cells(data: Data) -> None:
    score = data.test.score.copy()
    score[np.random.default_rng(0).random(score.shape) < 0.3] = np.nan
    score[0] = np.nan
    test = replace(data.test, score=score)
    f = data.ftest
    for name in ("oracle", "oracle-p"):
        r = get_router(name).fit(data.train, data.ftrain).reveal(test)
        c = r.choose(f)
        assert not np.isnan(score[np.arange(1, test.n_queries), c[1:]]).any()
        p = r.distribution(f)
        assert np.allclose(p.sum(axis=1), 1.0)


def test_bad_options_are_usage_errors(data: Data) -> None:
    with pytest.raises(UsageError):
        get_router("knn:k=0")
    with pytest.raises(UsageError):
        get_router("oracle-p:p=2")
    with pytest.raises(UsageError):
        get_router("knn:nope=1")
    with pytest.raises(UsageError):
        get_router("avenger:rank_by=speed").fit(data.train, data.ftrain)


def test_mlp_hidden_spec_and_routerworld_sizes(data: Data) -> None:
    r = get_router("mlp:hidden=16/8,epochs=2").fit(data.train, data.ftrain)
    assert [w.shape[1] for w in r._net.weights] == [16, 8, data.train.n_actors]  # type: ignore[attr-defined]


def test_svm_sgd_solver(data: Data) -> None:
    r = get_router("svm:solver=sgd").fit(data.train, data.ftrain)
    assert r.solver_used == "sgd"  # type: ignore[attr-defined]
    _check_valid(r, data)
    assert get_router("svm").fit(data.train, data.ftrain).solver_used == "liblinear"  # type: ignore[attr-defined]
