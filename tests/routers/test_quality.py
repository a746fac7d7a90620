"""Routers do what they claim on the demo: the oracle bounds everyone, learners beat random, r_o(p)
interpolates, and the query-blind policies pick the right actor."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest

from routerlab.data.table import RoutingTable
from routerlab.features.base import Features
from routerlab.metrics.latency import latency_ranks
from routerlab.metrics.selection import oracle_distribution
from routerlab.routers import Router, get_router, routers
from routerlab.routers._common import ldcg_matrix
from tests.routers.conftest import Data, mean_score

# Routers that aim at the best score, and those whose label is the fastest correct actor (judged by L-DCG).
BY_SCORE = ["knn", "prknn", "linear", "mlp", "mlc", "mf", "graph", "naive-bayes", "cluster"]
BY_LATENCY = ["svm", "hybrid", "avenger"]


def _ldcg(data: Data, choice: np.ndarray) -> float:
    assert data.test.latency_s is not None
    return float(latency_ranks(data.test.score, choice, data.test.latency_s).l_dcg.mean())


def test_oracle_bounds_every_router(data: Data, fitted: Callable[[str], Router]) -> None:
    best = mean_score(data.test, fitted("oracle").choose(data.ftest))
    assert best == pytest.approx(float(np.nanmax(data.test.score, axis=1).mean()))
    for name in (n for n, c in routers().items()  # LLM and two-model routers: own tests
                 if not c.needs_backend and not getattr(c, "two_model", False)):
        assert mean_score(data.test, fitted(name).choose(data.ftest)) <= best + 1e-12, name


def test_learners_beat_random(data: Data, fitted: Callable[[str], Router]) -> None:
    assert data.test.latency_s is not None
    mu_rand = float(data.test.score.mean())  # the expected values of the uniform random router
    ldcg_rand = float(ldcg_matrix(data.test.score, data.test.latency_s).mean())
    for name in BY_SCORE:
        assert mean_score(data.test, fitted(name).choose(data.ftest)) > mu_rand + 0.08, name
    for name in BY_LATENCY:
        assert _ldcg(data, fitted(name).choose(data.ftest)) > ldcg_rand + 0.1, name


def test_random_is_uniform_and_seeded(data: Data) -> None:
    rows = np.repeat(np.arange(data.test.n_queries), 20)
    big = replace(data, ftest=Features(data.ftest.X[rows], data.test.select_queries(rows), "tfidf"))
    r0 = get_router("random", seed=0).fit(data.train, data.ftrain)
    c0 = r0.choose(big.ftest)
    shares = np.bincount(c0, minlength=data.test.n_actors) / c0.size
    assert np.abs(shares - 1 / data.test.n_actors).max() < 0.02
    c1 = get_router("random", seed=1).fit(data.train, data.ftrain).choose(big.ftest)
    assert (c0 != c1).mean() > 0.5
    assert np.allclose(r0.distribution(data.ftest), 1 / data.test.n_actors)


def test_oracle_p_interpolates(data: Data) -> None:
    mus = []
    for p in (0.0, 0.25, 0.5, 0.75, 1.0):
        mus.append(np.mean([mean_score(data.test, get_router(f"oracle-p:p={p}", seed=s)
                                       .fit(data.train, data.ftrain).reveal(data.test).choose(data.ftest))
                            for s in range(3)]))
    oracle = float(np.nanmax(data.test.score, axis=1).mean())
    rand = float(np.nanmean(data.test.score, axis=1).mean())
    assert mus[-1] == pytest.approx(oracle)
    assert mus[0] == pytest.approx(rand, abs=0.04)
    assert all(a < b for a, b in itertools.pairwise(mus))
    for p, mu in zip((0.25, 0.5, 0.75), mus[1:4], strict=True):
        assert mu == pytest.approx(p * oracle + (1 - p) * rand, abs=0.05)
    half = get_router("oracle-p:p=0.5").fit(data.train, data.ftrain).reveal(data.test).distribution(data.ftest)
    expected = 0.5 * oracle_distribution(data.test.score) + 0.5 / data.test.n_actors
    np.testing.assert_allclose(half, expected)


def _expected(train: RoutingTable) -> dict[str, str]:
    names = np.asarray(train.actor_names)
    assert train.cost_usd is not None and train.latency_s is not None
    return {
        "largest": names[np.argmax(train.actors.params_b)],
        "smallest": names[np.argmin(train.actors.params_b)],
        "cheapest": names[np.argmin(np.nanmean(train.cost_usd, axis=0))],
        "fastest": names[np.argmin(np.nanmean(train.latency_s, axis=0))],
        "best-single": names[np.argmax(np.nanmean(train.score, axis=0))],
    }


def test_query_blind_routers_pick_the_right_actor(data: Data, fitted: Callable[[str], Router]) -> None:
    expected = _expected(data.train)
    assert expected["largest"] == "frontier-235b" and expected["smallest"] == "tiny-2b"
    for name, actor in expected.items():
        r = fitted(name)
        c = r.choose(data.ftest)
        assert set(np.asarray(r.actor_names)[c]) == {actor}, name
        p = r.distribution(data.ftest)
        assert np.array_equal(p.argmax(axis=1), c) and np.allclose(p.max(axis=1), 1.0)


def test_cheapest_and_fastest_fall_back_to_actor_attributes(data: Data) -> None:
    t = data.train
    bare = RoutingTable(queries=t.queries, actors=t.actors, score=t.score)  # no tokens -> no cost/latency
    assert bare.cost_usd is None and bare.latency_s is None
    f = Features(data.ftrain.X, bare, data.ftrain.encoder)
    a = t.actors
    names = np.asarray(t.actor_names)
    cheapest = get_router("cheapest").fit(bare, f)
    assert cheapest.actor == names[np.argmin(a.input_price + a.output_price)]  # type: ignore[attr-defined]
    fastest = get_router("fastest").fit(bare, f)
    assert fastest.actor == names[np.argmin(a.ttft_ms + 255 * a.itl_ms)]  # type: ignore[attr-defined]


def test_avenger_ranks_by_ldcg_only_with_latency(data: Data, fitted: Callable[[str], Router]) -> None:
    assert fitted("avenger").ranked_by == "ldcg"  # type: ignore[attr-defined]
    t = data.train
    bare = RoutingTable(queries=t.queries, actors=t.actors, score=t.score)
    r = get_router("avenger:k=8").fit(bare, Features(data.ftrain.X, bare, data.ftrain.encoder))
    assert r.ranked_by == "accuracy"  # type: ignore[attr-defined]
