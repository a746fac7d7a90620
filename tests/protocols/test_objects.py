"""Protocols take objects: Router and Encoder instances (registered or not) next to spec strings."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pytest

from routerlab import RoutingTable
from routerlab.datasets import demo
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.features.registry import get_encoder
from routerlab.protocols.full import evaluate
from routerlab.protocols.groups_eval import evaluate_groups
from routerlab.routers import routers
from routerlab.routers.base import Router


class MeanRouter(Router):
    """A user router, never registered: scores every actor by its training mean plus seeded noise
    (so the seed it runs with shows in its choices)."""

    name = "mean-test"
    defaults: ClassVar[dict[str, Any]] = {"noise": 0.0}
    fits = 0

    def _fit(self, train: RoutingTable, features: Features) -> None:
        type(self).fits += 1
        self.means = np.nanmean(train.score, axis=0)

    def _scores(self, features: Features) -> npt.ArrayLike:
        rng = np.random.default_rng(self.seed)
        return self.means + self.params["noise"] * rng.random((features.n, len(self.means)))


@pytest.fixture(scope="module")
def table() -> RoutingTable:
    return demo(400, seed=1)


def test_unregistered_router_runs_next_to_specs(table: RoutingTable) -> None:
    assert "mean-test" not in routers()
    mine = MeanRouter()
    ev = evaluate(table, [mine, "knn", "best-single"], n_boot=50)
    out = {r.spec: r for r in ev.results}
    assert set(out) == {"MeanRouter(noise=0.0)", "knn", "best-single"}
    r = out["MeanRouter(noise=0.0)"]
    assert (r.router, r.params) == ("mean-test", {"noise": 0.0, "seed": 0})  # the seed it ran with
    assert r.to_dict()["class"] == f"{__name__}.MeanRouter"
    assert "class" not in out["knn"].to_dict()  # a spec string's record is unchanged
    # the training-mean router always picks the best single actor
    assert r.metrics["mu_o"] == pytest.approx(out["best-single"].metrics["mu_o"])
    assert mine.actor_names == table.actor_names  # fitted in place, usable after the run
    json.dumps(ev.to_dict())  # provenance stays JSON
    # compared with by its label
    ev2 = evaluate(table, ["knn", mine], n_boot=50, compare_to="MeanRouter(noise=0.0)")
    assert next(x for x in ev2.results if x.spec == "knn").paired["versus"] == "MeanRouter(noise=0.0)"  # type: ignore[index]


def test_instance_gets_the_run_seed_only_without_its_own(table: RoutingTable) -> None:
    unseeded, seeded = MeanRouter(noise=1.0), MeanRouter(noise=1.0, seed=5)
    evaluate(table, [unseeded, seeded], seed=7, n_boot=20)
    assert (unseeded.seed, seeded.seed) == (7, 5)
    assert "seed" not in unseeded.params and seeded.params["seed"] == 5
    evaluate(table, [unseeded], seed=8, n_boot=20)
    assert unseeded.seed == 8  # still "not given": each run gives its own
    # an instance without a seed routes exactly like the same router made from the run's seed
    a = evaluate(table, [MeanRouter(noise=1.0)], seed=3, n_boot=20).results[0].choice
    b = evaluate(table, [MeanRouter(noise=1.0, seed=3)], seed=0, n_boot=20).results[0].choice
    assert np.array_equal(a, b)


def test_instances_match_their_specs(table: RoutingTable) -> None:
    by_spec = evaluate(table, ["knn:k=7"], encoder="tfidf", seed=2, n_boot=50).results[0]
    knn = routers()["knn"](k=7)
    by_obj = evaluate(table, [knn], encoder=get_encoder("tfidf"), seed=2, n_boot=50)
    assert by_obj.encoder == "tfidf"
    assert by_obj.results[0].metrics == by_spec.metrics
    assert by_obj.results[0].spec == repr(knn) and by_obj.results[0].params == by_spec.params


def test_bad_router_objects(table: RoutingTable) -> None:
    with pytest.raises(UsageError, match="spec string or a Router"):
        evaluate(table, [object()], n_boot=20)  # type: ignore[list-item]
    with pytest.raises(UsageError, match="not a router of this run"):
        evaluate(table, [MeanRouter()], compare_to="mean-test", n_boot=20)


def test_groups_copy_instances_per_group() -> None:
    rng = np.random.default_rng(0)
    means = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2]
    score = (rng.random((300, 8)) < np.array(means)).astype(np.float32)
    split = ["train"] * 240 + ["test"] * 60
    t = RoutingTable.from_arrays(score, actors=[f"a{j}" for j in range(8)], split=split,
                                 text=[f"query {i} about topic {i % 7}" for i in range(300)])
    mine = MeanRouter()
    before = MeanRouter.fits
    out = evaluate_groups(t, [2], [mine, "best-single"], draws=20, kinds=("all-strong", "all-weak"), n_boot=20)
    assert out["routers"] == ["MeanRouter(noise=0.0)", "best-single"]
    assert MeanRouter.fits - before == len(out["groups"]) == 2  # a fresh copy fitted per group
    assert not mine.actor_names  # the caller's instance is never fitted
    for g in out["groups"]:
        res = {r["spec"]: r for r in g["evaluation"]["results"]}
        assert res["MeanRouter(noise=0.0)"]["metrics"]["mu_o"] == pytest.approx(res["best-single"]["metrics"]["mu_o"])
    json.dumps(out)
