"""Voyager with a development part (issue 23; routerworld.txt 3.3, "checkpoint selection on a held-out development
set"): the development queries leave the stream, and each round deploys the fit of rounds 1..t with the highest
mu_o on them; without a development part nothing changes."""

from __future__ import annotations

import json
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
from routerlab.protocols.base import RunContext, run_protocol
from routerlab.protocols.partial import chunk_positions, voyager
from routerlab.reports.files import dumps
from routerlab.reports.voyager_plot import curve_rows, rounds_text
from routerlab.routers.base import Router

T = demo(400, seed=1)
DEV = 0.25
SPLIT = make_split(T, "given", 0, dev=DEV)
TRAIN, TEST = SPLIT.apply(T)
DEVPART = SPLIT.apply_dev(T)


class Planned(Router):
    """Always picks one actor, a different one at each fit: ``plan[k]`` at the k-th fit (k = 0, 1, ...). What each
    fit is worth on the development and test queries is then a column mean, computable by hand."""

    name = "planned"
    logged_recipe: ClassVar[str | None] = "native"

    def __init__(self, plan: list[int], **params: Any) -> None:
        super().__init__(**params)
        self.plan = plan
        self.fits = 0
        self.seen: list[Feedback] = []

    def __repr__(self) -> str:
        return "Planned()"

    def fit(self, train: RoutingTable | Feedback, features: Features) -> Planned:
        self.seen.append(as_feedback(train))
        self.actor = self.plan[self.fits]
        self.fits += 1
        return super().fit(train, features)

    def _fit(self, train: RoutingTable, features: Features) -> None:
        pass

    def _scores(self, features: Features) -> npt.ArrayLike:
        s = np.zeros((features.n, len(self.actor_names)))
        s[:, self.actor] = 1.0
        return s


def _ranked_actors() -> list[int]:
    """The actors from best to worst mean score on the development queries (distinct means, checked)."""
    means = DEVPART.score.astype(np.float64).mean(axis=0)
    assert len(set(means.round(12).tolist())) == means.size
    return [int(a) for a in np.argsort(-means)]


def test_the_checkpoint_with_the_best_development_mu_o_is_deployed() -> None:
    ranked = _ranked_actors()
    best, mid, worst = ranked[0], ranked[1], ranked[-1]
    router = Planned([mid, worst, best, worst])
    ev = voyager(T, [router, "oracle"], rounds=4, split=SPLIT, seed=0, n_boot=50)
    dev_means = DEVPART.score.astype(np.float64).mean(axis=0)
    test_means = TEST.score.astype(np.float64).mean(axis=0)
    rounds = ev.extra["rounds"]
    picked = [next(r for r in rd["results"] if r["spec"] == "Planned()") for rd in rounds]
    # round 1 deploys its fit (mid); round 2's fit (worst) loses on dev; round 3's (best) wins and stays
    assert [r["checkpoint"]["round"] for r in picked] == [1, 1, 3, 3]
    assert [r["checkpoint"]["dev_mu_o_by_round"] for r in picked][-1] == pytest.approx(
        [dev_means[mid], dev_means[worst], dev_means[best], dev_means[worst]])
    assert picked[-1]["checkpoint"]["dev_mu_o"] == pytest.approx(dev_means[best])
    # what is scored on test is the deployed checkpoint, not the last fit
    names = T.actor_names
    assert [r["selection"] for r in picked] == [{names[mid]: 1.0}, {names[mid]: 1.0}, {names[best]: 1.0},
                                                {names[best]: 1.0}]
    assert picked[-1]["metrics"]["mu_o"] == pytest.approx(test_means[best])
    assert ev.results[0].to_dict() == picked[-1]
    # the deployed checkpoint routes the next chunk: chunk 3 by round 1's fit (mid), chunk 4 by round 3's (best)
    chunks = chunk_positions(TRAIN.n_queries, 4, "given", 0)
    last = router.seen[-1].table.score
    logged = np.argmax(~np.isnan(last), axis=1)
    n12 = chunks[0].size + chunks[1].size
    assert (logged[chunks[0].size:n12] == mid).all()  # chunk 2, routed after round 1 by round 1's fit
    assert (logged[n12:n12 + chunks[2].size] == mid).all()  # chunk 3: round 2 still deploys round 1's fit
    assert (logged[n12 + chunks[2].size:] == best).all()  # chunk 4: round 3's fit
    # the development queries are not in the stream
    assert not set(DEVPART.queries.ids.tolist()) & set(router.seen[-1].table.queries.ids.tolist())
    assert router.seen[-1].table.n_queries == TRAIN.n_queries
    # a bound is never selected: its current fit, no development value
    oracle = [next(r for r in rd["results"] if r["spec"] == "oracle") for rd in rounds]
    assert [r["checkpoint"]["round"] for r in oracle] == [1, 2, 3, 4]
    assert oracle[-1]["checkpoint"]["dev_mu_o"] is None
    assert ev.extra["voyager"]["dev"] == {"n_dev": DEVPART.n_queries, "n_evaluated": DEVPART.n_queries,
                                          "excluded": 0, "metric": "mu_o", "ties": "later round"}
    assert ev.split["dev_fraction"] == DEV and ev.split["n_dev"] == DEVPART.n_queries


def test_without_dev_the_last_fit_is_scored() -> None:
    ranked = _ranked_actors()
    router = Planned([ranked[1], ranked[-1], ranked[0], ranked[-1]])
    ev = voyager(T, [router], rounds=4, split=SPLIT.without_dev(), seed=0, n_boot=50)
    assert ev.results[0].selection == {T.actor_names[ranked[-1]]: 1.0}
    assert all("checkpoint" not in r for rd in ev.extra["rounds"] for r in rd["results"])
    assert "dev" not in ev.extra["voyager"]


def test_records_text_and_curves_carry_the_checkpoint() -> None:
    ranked = _ranked_actors()
    result = run_protocol("voyager", T, {"rounds": 3, "n_boot": 50, "dev": DEV}, seed=0,
                          routers=[Planned([ranked[1], ranked[-1], ranked[-1]]), "best-single"])
    got = {(r.slice, r.metric): r.value for r in result.select(router="Planned()")}
    assert [got[(f"round={t}", "checkpoint_round")] for t in (1, 2, 3)] == [1, 1, 1]
    assert got[("", "checkpoint_round")] == 1
    dev_means = DEVPART.score.astype(np.float64).mean(axis=0)
    assert got[("round=3", "dev_mu_o")] == pytest.approx(dev_means[ranked[1]])
    text = rounds_text(result.native)
    assert "Checkpoint deployed per round" in text
    assert any(line.split() == ["Planned()", "r1", "r1", "r1"] for line in text.splitlines())
    rows = [r for r in curve_rows(result.native) if r["router"] == "Planned()"]
    assert [r["checkpoint_round"] for r in rows] == [1, 1, 1]
    # the run record: the settings and the split's development facts
    d = json.loads(dumps(result.to_dict()))
    assert d["settings"]["dev"] == DEV and d["split"]["n_dev"] == DEVPART.n_queries


def test_without_dev_nothing_changes() -> None:
    plain = voyager(T, ["knn", "best-single"], rounds=3, seed=0, n_boot=50).to_dict()
    via = run_protocol("voyager", T, {"rounds": 3, "n_boot": 50}, seed=0, routers=["knn", "best-single"])
    assert not [r for r in via.records if r.metric in ("checkpoint_round", "dev_mu_o")]
    assert "dev_fraction" not in plain["split"]
    for a, b in zip(plain["results"], via.native.to_dict()["results"], strict=True):
        assert a["metrics"] == b["metrics"] and "checkpoint" not in a


def test_shared_features_give_the_same_run() -> None:
    """A caller sharing features (an experiment, the audit) and a lone run encode the same vectors."""
    settings = {"rounds": 2, "n_boot": 40, "dev": 0.3}
    alone = run_protocol("voyager", T, settings, seed=4, routers=["knn", "best-single"])
    shared = run_protocol("voyager", T, settings, seed=4, routers=["knn", "best-single"], context=RunContext())

    def rounds(result: Any) -> str:
        out = json.loads(dumps(result.native.to_dict()["rounds"]))
        for rd in out:
            for r in rd["results"]:
                r.pop("fit_seconds"), r.pop("score_seconds")
        return json.dumps(out, sort_keys=True)

    assert rounds(alone) == rounds(shared)
    assert alone.native.to_dict()["split"] == shared.native.to_dict()["split"]


def test_dev_settings_are_checked() -> None:
    for bad, needle in ((0, "must be in (0, 1)"), (1, "must be in (0, 1)"), (-1, "must be in (0, 1)"),
                        (float("nan"), "must be in (0, 1)"), ("x", "must be a number")):
        with pytest.raises(UsageError, match=r"^dev: .*" + needle.replace("(", r"\(").replace(")", r"\)")):
            run_protocol("voyager", T, {"dev": bad}, routers=["knn"])
    with pytest.raises(UsageError, match="leaves no development queries"):
        run_protocol("voyager", T, {"dev": 1e-4, "n_boot": 40}, routers=["knn"])
