"""Partial-observability protocols (SPEC 1, 5): cold-start and Voyager."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pytest

from routerlab import RoutingTable
from routerlab.data.feedback import Feedback, as_feedback
from routerlab.data.splits import make_split
from routerlab.datasets import demo
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.metrics.selection import softmax
from routerlab.protocols.full import evaluate
from routerlab.protocols.partial import chunk_positions, cold_start, voyager
from routerlab.reports.files import dumps
from routerlab.routers import routers
from routerlab.routers.base import Router


class Spy(Router):
    """Records the feedback of every fit; scores each actor by its mean observed training score (so it learns)."""

    name = "spy"
    logged_recipe: ClassVar[str | None] = "native"  # sees the logged table as the protocol built it

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.seen: list[Feedback] = []

    def fit(self, train: RoutingTable | Feedback, features: Features) -> Spy:
        fb = as_feedback(train)
        self.seen.append(fb)
        assert features.n == fb.table.n_queries
        assert np.array_equal(features.queries.ids, fb.table.queries.ids)
        return super().fit(train, features)

    def _fit(self, train: RoutingTable, features: Features) -> None:
        s = train.score
        obs = ~np.isnan(s)
        self.means = np.where(obs.any(axis=0), np.nansum(s, axis=0) / np.maximum(obs.sum(axis=0), 1), 0.0)

    def _scores(self, features: Features) -> npt.ArrayLike:
        return np.tile(self.means, (features.n, 1))


class Explorer(Spy):
    """An exploring router whose distribution depends on the query vector only, so the test can recompute it."""

    name = "explorer"
    explores: ClassVar[bool] = True

    def _scores(self, features: Features) -> npt.ArrayLike:
        m = len(self.actor_names)
        return 3.0 * features.X[:, np.arange(m) % features.X.shape[1]]

    def _distribution(self, features: Features, scores: npt.NDArray[np.float64]) -> npt.ArrayLike:
        return softmax(scores)


def _strip(record: dict[str, Any]) -> str:
    """The JSON of a run without its wall-clock timings."""
    def clean(obj: Any) -> Any:
        if isinstance(obj, dict):
            return {k: clean(v) for k, v in obj.items() if k not in {"fit_seconds", "score_seconds"}}
        if isinstance(obj, list):
            return [clean(v) for v in obj]
        return obj
    return json.dumps(clean(json.loads(dumps(record))), sort_keys=True)


T = demo(400, seed=1)
TRAIN, _ = make_split(T, "given", 0).apply(T)


def test_cold_start_trains_every_router_on_one_logged_cell_per_query() -> None:
    a, b = Spy(), Spy()
    ev = cold_start(T, [a, b, "oracle", "best-single"], seed=3, n_boot=50)
    assert ev.extra["protocol"] == "cold-start"
    fa, fb = a.seen[-1], b.seen[-1]
    assert fa.kind == "logged" and fa.propensity is not None
    assert fa.table.n_queries == TRAIN.n_queries
    observed = ~np.isnan(fa.table.score)
    assert (observed.sum(axis=1) == 1).all()  # the demo observes every cell: one logged outcome per query
    np.testing.assert_allclose(fa.propensity, 1.0 / T.n_actors)  # uniform logging
    np.testing.assert_array_equal(fa.table.score[observed], TRAIN.score[observed])  # the hidden outcome, unchanged
    assert np.array_equal(observed, ~np.isnan(fb.table.score))  # the same log for every router (paired)
    lg = ev.extra["logging"]
    assert lg["policy"] == "uniform" and lg["n_logged"] == TRAIN.n_queries
    assert lg["correct_share"] == pytest.approx(float((TRAIN.score[observed] >= 0.5).mean()))
    # best-single learns the best observed mean of that log (masked recipe), and collapses onto it
    logged_means = np.nanmean(fa.table.score, axis=0)
    single = next(r for r in ev.results if r.spec == "best-single")
    assert single.selection == {T.actor_names[int(np.argmax(logged_means))]: 1.0}


def test_oracle_is_the_same_under_full_and_cold_start() -> None:
    full = evaluate(T, ["oracle", "random"], seed=2, n_boot=60)
    cold = cold_start(T, ["oracle", "random"], seed=2, n_boot=60)
    for f, c in zip(full.results, cold.results, strict=True):
        assert f.metrics == c.metrics and f.ci == c.ci and f.selection == c.selection  # bounds read test outcomes
    assert full.oracle_best_of_n == cold.oracle_best_of_n


def test_cold_start_same_seed_same_json_and_the_seed_changes_the_log() -> None:
    specs = ["knn", "naive-bayes", "best-single"]
    one = cold_start(T, specs, seed=5, n_boot=50).to_dict()
    assert _strip(one) == _strip(cold_start(T, specs, seed=5, n_boot=50).to_dict())
    other = cold_start(T, specs, seed=6, n_boot=50).to_dict()
    assert one["logging"]["actor_shares"] != other["logging"]["actor_shares"]
    assert [r["router"] for r in one["results"]] == ["knn", "naive-bayes", "best-single"]
    assert set(one) >= {"routerlab_version", "data", "split", "results", "oracle_best_of_n", "protocol", "logging"}


def _voyager_run(order: str = "given", rounds: int = 4, seed: int = 0) -> tuple[Any, Spy, Explorer]:
    greedy, explorer = Spy(), Explorer()
    ev = voyager(T, [greedy, explorer, "oracle"], rounds=rounds, order=order, seed=seed, n_boot=50)
    return ev, greedy, explorer


def test_voyager_feedback_grows_by_chunk_with_one_cell_per_query() -> None:
    ev, greedy, explorer = _voyager_run()
    chunks = chunk_positions(TRAIN.n_queries, 4, "given", 0)
    assert len(greedy.seen) == len(explorer.seen) == 4
    m = T.n_actors
    first_ids = TRAIN.queries.ids[chunks[0]]
    for router in (greedy, explorer):
        for t, fb in enumerate(router.seen, start=1):
            rows = np.concatenate(chunks[:t])
            assert fb.kind == "logged" and fb.table.n_queries == rows.size
            assert np.array_equal(fb.table.queries.ids, TRAIN.queries.ids[rows])
            assert ((~np.isnan(fb.table.score)).sum(axis=1) == 1).all()
            assert fb.propensity is not None
            np.testing.assert_allclose(fb.propensity[: chunks[0].size], 1.0 / m)  # chunk 1: uniform
        assert np.array_equal(router.seen[0].table.queries.ids, first_ids)
    # chunk 1 is logged identically for every router; later chunks are each router's own
    assert np.array_equal(np.isnan(greedy.seen[0].table.score), np.isnan(explorer.seen[0].table.score))
    last_g, last_e = greedy.seen[-1], explorer.seen[-1]
    assert last_g.propensity is not None and last_e.propensity is not None
    n1 = chunks[0].size
    # a greedy router acts by its argmax: propensity 1, and the actor it logged is the one it scores best
    np.testing.assert_array_equal(last_g.propensity[n1:], 1.0)
    # an exploring router logs the probability its distribution gave the drawn actor
    x = ev_features(T)
    rows = np.concatenate(chunks[1:])
    dist = softmax(3.0 * x[rows][:, np.arange(m) % x.shape[1]])
    actor = np.argmax(~np.isnan(last_e.table.score[n1:]), axis=1)
    np.testing.assert_allclose(last_e.propensity[n1:], dist[np.arange(rows.size), actor], rtol=1e-9)
    assert (last_e.propensity[n1:] < 1).all()
    # the record: every round, every router, the final round = results
    assert [rd["round"] for rd in ev.extra["rounds"]] == [1, 2, 3, 4]
    assert [rd["n_train"] for rd in ev.extra["rounds"]] == [int(sum(c.size for c in chunks[:t])) for t in range(1, 5)]
    last = ev.extra["rounds"][-1]["results"]
    assert [r["metrics"] for r in last] == [r.metrics for r in ev.results]
    fb_record = ev.results[0].feedback
    assert fb_record is not None and fb_record["n_logged"] == TRAIN.n_queries
    assert fb_record["own_mean_propensity"] == 1.0
    assert ev.extra["voyager"]["chunk_sizes"] == [int(c.size) for c in chunks]


def ev_features(table: RoutingTable) -> npt.NDArray[np.float32]:
    """The training vectors the protocol encodes (tf-idf fitted on the training texts)."""
    from routerlab.protocols.full import featurize

    sp = make_split(table, "given", 0)
    train, test = sp.apply(table)
    return featurize(train, test, "tfidf")[0].X


def test_voyager_orders_are_reproducible_and_differ() -> None:
    given = chunk_positions(50, 5, "given", 0)
    assert np.array_equal(np.concatenate(given), np.arange(50)) and [c.size for c in given] == [10] * 5
    shuffled = chunk_positions(50, 5, "shuffle", 0)
    assert sorted(np.concatenate(shuffled).tolist()) == list(range(50))
    assert not np.array_equal(np.concatenate(shuffled), np.arange(50))
    assert all(np.array_equal(a, b) for a, b in zip(shuffled, chunk_positions(50, 5, "shuffle", 0), strict=True))
    a, ga, _ = _voyager_run("shuffle", rounds=3)
    b, gb, _ = _voyager_run("shuffle", rounds=3)
    _, gc, _ = _voyager_run("given", rounds=3)
    assert _strip(a.to_dict()) == _strip(b.to_dict())
    assert np.array_equal(ga.seen[0].table.queries.ids, gb.seen[0].table.queries.ids)
    assert not np.array_equal(ga.seen[0].table.queries.ids, gc.seen[0].table.queries.ids)
    assert a.extra["voyager"]["order"] == "shuffle"


def test_voyager_json_layout() -> None:
    ev = voyager(T, ["knn", "best-single"], rounds=2, n_boot=50)
    d = json.loads(dumps(ev.to_dict()))
    assert d["protocol"] == "voyager" and d["voyager"]["n_rounds"] == 2
    assert [set(rd) for rd in d["rounds"]] == [{"round", "n_train", "results", "oracle_best_of_n"}] * 2
    for rd in d["rounds"]:
        assert [r["spec"] for r in rd["results"]] == ["knn", "best-single"]
        assert {"metrics", "ci", "selection", "collapsed", "feedback"} <= set(rd["results"][0])
    assert d["results"] == d["rounds"][-1]["results"]


def test_partial_errors() -> None:
    with pytest.raises(UsageError, match="at least 2 rounds"):
        voyager(T, ["knn"], rounds=1)
    with pytest.raises(UsageError, match=f"more rounds than the {TRAIN.n_queries} training queries"):
        voyager(T, ["knn"], rounds=TRAIN.n_queries + 1)
    with pytest.raises(UsageError, match="--order 'sideways'"):
        voyager(T, ["knn"], order="sideways")
    with pytest.raises(UsageError, match="unknown logging policy 'nope'"):
        cold_start(T, ["knn"], logging="nope")
    with pytest.raises(UsageError, match="at least one router"):
        cold_start(T, [])
    with pytest.raises(UsageError, match="not a router of this run"):
        voyager(T, ["knn"], compare_to="mlp")


def test_cold_start_runs_the_zoo_on_llmrouter(real_table: Callable[[str], RoutingTable]) -> None:
    table = real_table("llmrouter")
    rng = np.random.default_rng(0)
    split = table.queries.split.astype(str)
    keep = (split != "train") | (rng.random(table.n_queries) < 0.25)  # 25% of train, all 500 test queries
    sub = table.select_queries(keep)
    zoo = [n for n in routers() if n not in {"fastest"}]
    spy = Spy()
    cold = cold_start(sub, [*zoo, spy], n_boot=40, skip_inapplicable=True)
    full = evaluate(sub, zoo, n_boot=40, skip_inapplicable=True)
    ran = {r.spec for r in cold.results}
    assert ran >= {"oracle", "best-single", "knn", "mlp", "linear"}
    assert "l_dcg" not in cold.results[0].metrics  # no latency in this table, as under full observability
    cold_mu = {r.spec: r.metrics["mu_o"] for r in cold.results}
    full_mu = {r.spec: r.metrics["mu_o"] for r in full.results}
    assert cold_mu["oracle"] == full_mu["oracle"]
    assert any(abs(cold_mu[s] - full_mu[s]) > 1e-9 for s in ran & set(full_mu) - {"oracle", "oracle-p", "random"})
    fb = spy.seen[-1]
    assert ((~np.isnan(fb.table.score)).sum(axis=1) <= 1).all()
    means = np.nanmean(fb.table.score, axis=0)
    single = next(r for r in cold.results if r.spec == "best-single")
    assert single.selection == {sub.actor_names[int(np.argmax(means))]: 1.0}
