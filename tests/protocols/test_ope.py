"""Off-policy evaluation on real tables: over many seeded uniform logs of the full test split, IPS, SNIPS and DR
are unbiased within sampling error, their 95% intervals cover the truth at about the nominal rate, and DR (with
the cross-fitted ridge reward model the protocol uses) is not worse than IPS; then the protocol end to end.

Coverage bands: over S independent logs the number of intervals covering the truth is Binomial(S, c). At the
nominal c = 0.95 and S = 300 its standard deviation is sqrt(0.95 * 0.05 / 300) = 0.0126, so the band [0.90, 0.99]
is 0.95 - 4.0 sd / + 3.2 sd: a run outside it has probability below 1e-3 when the intervals are right, and is what
intervals about 0.03 off nominal produce. The logs are seeded, so each run draws the same ones.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from routerlab.data.feedback import Feedback
from routerlab.data.logs import Logs
from routerlab.data.splits import make_split
from routerlab.data.table import RoutingTable
from routerlab.datasets import demo
from routerlab.errors import UsageError
from routerlab.features import Features, encode_pair
from routerlab.metrics import offpolicy as op
from routerlab.protocols.full import RouterLike, complete_rows
from routerlab.protocols.ope import OffPolicyWarning, OPEResult, off_policy_evaluate
from routerlab.protocols.policies import simulate_logs
from routerlab.routers.base import Router, get_router

SEEDS = 300
ENCODER = "tfidf:dim=32"  # a small tf-idf: the 300 cross-fitted reward models stay cheap

Bench = tuple[RoutingTable, Features, dict[str, npt.NDArray[np.intp]]]


def _uniform_logs(score: npt.NDArray[np.float64], seeds: int, seed: int
                  ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """``seeds`` uniform logs of every query at once: (seeds, n) logged actors, propensities and rewards."""
    n, m = score.shape
    actor = np.random.default_rng(seed).integers(0, m, size=(seeds, n))
    return actor, np.full((seeds, n), 1.0 / m), score[np.arange(n)[None, :], actor]


def _check_unbiased_and_covering(values: npt.NDArray[np.float64], lo: npt.NDArray[np.float64],
                                 hi: npt.NDArray[np.float64], truth: float, band: tuple[float, float],
                                 what: str) -> float:
    """Mean estimate within 4 standard errors of the truth, coverage within ``band``; returns the RMSE."""
    se = values.std(ddof=1) / math.sqrt(values.size)
    assert abs(values.mean() - truth) <= 4 * se, f"{what}: mean {values.mean():.4f}, truth {truth:.4f}, se {se:.4f}"
    coverage = float(((lo <= truth) & (truth <= hi)).mean())
    assert band[0] <= coverage <= band[1], f"{what}: coverage {coverage:.3f} outside {band}"
    return float(np.sqrt(((values - truth) ** 2).mean()))


@pytest.fixture(scope="module")
def llmrouter(real_table: Callable[[str], RoutingTable]) -> Bench:
    """LLMRouter's test split (500 queries, every score known), its features, and the choices of knn and
    best-single trained on the train split."""
    table = real_table("llmrouter")
    train, test = make_split(table, "given", 0).apply(table)
    ftrain, ftest = encode_pair(train, test, ENCODER)
    choices = {spec: get_router(spec, seed=0).fit(train, ftrain).route(ftest).choice for spec in ("knn", "best-single")}
    return test, ftest, choices


@pytest.fixture(scope="module")
def llmrouter_logs(llmrouter: Bench) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64],
                                             npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """300 uniform logs of the test split and, per log, the cross-fitted ridge reward model (which does not depend
    on the router evaluated)."""
    test, ftest, _ = llmrouter
    score = test.score.astype(np.float64)
    actor, p, r = _uniform_logs(score, SEEDS, seed=11)
    n, m = score.shape
    rhat = np.stack([op.ridge_reward_model(ftest.X, actor[s], r[s], m, op.fold_assignment(n, 5, s))[0]
                     for s in range(SEEDS)])
    return actor, p, r, rhat


@pytest.mark.parametrize("router", ["knn", "best-single"])
def test_uniform_logs_unbiased_covering_and_dr_not_worse_than_ips(
        llmrouter: Bench, llmrouter_logs: tuple[npt.NDArray[np.intp], ...], router: str) -> None:
    test, _, choices = llmrouter
    actor, p, r, rhat = llmrouter_logs
    choice = choices[router]
    n, m = test.score.shape
    truth = float(test.score[np.arange(n), choice].mean())
    target = np.eye(m)[choice][None]  # (1, n, m): the router acts by its argmax
    rmse = {}
    for est in op.ESTIMATORS:
        terms = op.contributions(est, r, actor, p, target, rhat if est == "dr" else None)
        lo, hi = terms.normal_interval()
        rmse[est] = _check_unbiased_and_covering(terms.value(), lo, hi, truth, (0.90, 0.99), f"{router} {est}")
    assert rmse["dr"] <= rmse["ips"], rmse
    # the reward model is some good: DR's error is well below IPS's on this table
    assert rmse["dr"] < 0.8 * rmse["ips"], rmse


def test_bootstrap_intervals_cover_at_about_the_nominal_rate(
        llmrouter: Bench, llmrouter_logs: tuple[npt.NDArray[np.intp], ...]) -> None:
    """The percentile bootstrap the protocol reports by default, on 100 of the logs (200 resamples each): the
    binomial sd at 0.95 is 0.022, so 0.87 is 3.7 sd below nominal (coverage 1.0 happens 0.6% of the time)."""
    test, _, choices = llmrouter
    actor, p, r, rhat = llmrouter_logs
    n, m = test.score.shape
    choice = choices["knn"]
    truth = float(test.score[np.arange(n), choice].mean())
    target = np.eye(m)[choice]
    covered = np.zeros((100, 3), dtype=bool)
    for s in range(100):
        terms = [op.contributions(e, r[s], actor[s], p[s], target, rhat[s]) for e in op.ESTIMATORS]
        for j, (lo, hi) in enumerate(op.bootstrap_intervals(terms, n_boot=200, seed=s)):
            covered[s, j] = lo <= truth <= hi
    rate = covered.mean(axis=0)
    assert (rate >= 0.87).all(), dict(zip(op.ESTIMATORS, rate, strict=True))


def test_routerbench_mean_cost(real_table: Callable[[str], RoutingTable]) -> None:
    """Mean cost on RouterBench's test split (every score and cost known) for two routers that read no query
    vectors, with the cross-fitted per-actor mean as DR's reward model (cost is mostly the actor's)."""
    table = real_table("routerbench")
    train, test = make_split(table, "given", 0).apply(table)
    test = test.select_queries(complete_rows(test))
    assert test.cost_usd is not None and not np.isnan(test.cost_usd).any()
    cost = test.cost_usd.astype(np.float64)
    n, m = cost.shape
    actor, p, r = _uniform_logs(cost, SEEDS, seed=5)
    no_vectors = np.zeros((n, 0))
    rhat = np.stack([op.ridge_reward_model(no_vectors, actor[s], r[s], m, op.fold_assignment(n, 5, s))[0]
                     for s in range(SEEDS)])
    ftrain = Features(np.zeros((train.n_queries, 1)), train, "none")
    ftest = Features(np.zeros((n, 1)), test, "none")
    for spec in ("best-single", "cheapest"):
        choice = get_router(spec).fit(train, ftrain).route(ftest).choice
        truth = float(cost[np.arange(n), choice].mean())
        target = np.eye(m)[choice][None]
        rmse = {}
        for est in op.ESTIMATORS:
            terms = op.contributions(est, r, actor, p, target, rhat if est == "dr" else None)
            lo, hi = terms.normal_interval()
            rmse[est] = _check_unbiased_and_covering(terms.value(), lo, hi, truth, (0.90, 0.99), f"{spec} {est}")
        assert rmse["dr"] <= rmse["ips"], rmse


def test_protocol_on_llmrouter_matches_the_estimators(real_table: Callable[[str], RoutingTable]) -> None:
    table = real_table("llmrouter")
    logs = simulate_logs(table, "uniform", part="test", seed=3)
    result = off_policy_evaluate(table, logs, ["knn", "best-single"], encoder=ENCODER, seed=0, n_boot=200)
    record = result.to_dict()
    assert list(record)[:3] == ["routerlab_version", "data", "split"]
    assert record["n_logged"] == 500 and record["metrics"] == ["mu_o"]
    assert set(record["unavailable"]) == {"acc_at_1_l", "dcg", "l_dcg", "mean_cost", "mean_latency"}
    assert record["interval"]["method"] == "bootstrap" and record["training"]["left_out_logged_queries"] == 0
    _, test = make_split(table, "given", 0).apply(table)
    for res in record["results"]:
        truth = res["truth"]["mu_o"]
        assert set(res["estimates"]) == {"ips", "snips", "dr"}
        for est in ("ips", "snips", "dr"):
            cell = res["estimates"][est]["mu_o"]
            assert cell["ci"][0] <= cell["value"] <= cell["ci"][1]
            assert abs(cell["value"] - truth) < 0.2
        assert res["diagnostics"]["ess"] == pytest.approx(res["diagnostics"]["n_agree"])  # weights all m or 0
    # the same numbers from the pure estimators on the protocol's own inputs: knn's choices on the logged queries
    train, _ = make_split(table, "given", 0).apply(table)
    ftrain, flog = encode_pair(train, logs.table, ENCODER)
    choice = get_router("knn", seed=0).fit(train, ftrain).route(flog).choice
    n, m = 500, table.n_actors
    rows = np.arange(n)
    r = logs.table.score[rows, logs.actor].astype(np.float64)
    target = np.eye(m)[choice]
    rhat, _ = op.ridge_reward_model(flog.X, logs.actor, r, m, op.fold_assignment(n, 5, 0))
    knn = result.results[0].estimates
    pi = target[rows, logs.actor]
    assert knn["ips"]["mu_o"][0] == pytest.approx(float(op.ips(r, pi, logs.propensity)))
    assert knn["snips"]["mu_o"][0] == pytest.approx(float(op.snips(r, pi, logs.propensity)))
    assert knn["dr"]["mu_o"][0] == pytest.approx(float(op.dr(r, logs.actor, logs.propensity, target, rhat)))
    assert result.results[0].truth == {"mu_o": pytest.approx(float(test.score[rows, choice].mean()))}


# ---------------------------------------------------------------------------------------------- on the demo


@pytest.fixture(scope="module")
def demo_table() -> RoutingTable:
    return demo(n_queries=600, seed=0)


def _run(table: RoutingTable, logs: Logs, routers: list[RouterLike], **kw: Any) -> OPEResult:
    """off_policy_evaluate with a small encoder and bootstrap, its warnings silenced (tested on their own)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OffPolicyWarning)
        return off_policy_evaluate(table, logs, routers, encoder=ENCODER, n_boot=100, **kw)


def test_simulated_logs_give_every_metric_and_its_truth(demo_table: RoutingTable) -> None:
    logs = simulate_logs(demo_table, "uniform", part="test", seed=1)
    result = _run(demo_table, logs, ["knn", "linucb"])
    assert result.metrics == ["mu_o", "acc_at_1_l", "dcg", "l_dcg", "mean_cost", "mean_latency"]
    assert result.unavailable == {}
    knn, linucb = result.results
    assert knn.policy == "argmax" and linucb.policy == "distribution"  # linucb explores when deployed
    for res in result.results:
        assert res.truth is not None and set(res.truth) == set(result.metrics)
        for est in ("ips", "snips", "dr"):
            assert set(res.estimates[est]) == set(result.metrics)
    # SNIPS of a reward that is 1 on every logged query is exactly 1
    ones = Logs(logs.feedback, {**logs.rewards, "acc_at_1_l": np.ones(logs.n)})
    again = _run(demo_table, ones, ["knn"], estimators="snips")
    assert again.results[0].estimates["snips"]["acc_at_1_l"][0] == pytest.approx(1.0)
    assert again.estimators == ["snips"] and again.reward_model == {"kind": None}


def test_normal_intervals_and_the_mean_reward_model(demo_table: RoutingTable) -> None:
    logs = simulate_logs(demo_table, "uniform", part="test", seed=2)
    result = _run(demo_table, logs, ["best-single"], interval_method="normal", reward_model="mean")
    record = result.to_dict()
    assert record["interval"]["method"] == "normal" and record["reward_model"]["kind"] == "mean"
    v, lo, hi = result.results[0].estimates["ips"]["mu_o"]
    n = logs.n
    assert lo < v < hi and (hi - lo) < 4 / math.sqrt(n) * 8  # w <= 8 on the demo's 8 actors


def test_logged_queries_in_the_training_split_are_left_out_of_training(demo_table: RoutingTable) -> None:
    sp = make_split(demo_table, "given", 0)
    rows = np.concatenate([sp.test, sp.train[:25]])
    part = demo_table.select_queries(rows)
    actor = np.random.default_rng(0).integers(0, part.n_actors, size=part.n_queries)
    logs = Logs(Feedback.logged(part, actor, np.full(part.n_queries, 1 / part.n_actors)))
    with pytest.warns(OffPolicyWarning, match="25 logged queries are also in the training split"):
        result = off_policy_evaluate(demo_table, logs, ["best-single"], encoder=ENCODER, n_boot=100)
    assert result.training == {"feedback": "full", "n_train": sp.train.size - 25, "left_out_logged_queries": 25}
    assert any("left out of training" in w for w in result.warnings)
    train_logs = simulate_logs(demo_table, "uniform", part="train", seed=0)
    with pytest.raises(UsageError, match=r"every one of the .* training queries is a logged query"):
        off_policy_evaluate(demo_table, train_logs, ["best-single"], encoder=ENCODER)


def test_training_on_logs(demo_table: RoutingTable) -> None:
    train_logs = simulate_logs(demo_table, "uniform", part="train", seed=0)
    logs = simulate_logs(demo_table, "uniform", part="test", seed=1)
    result = _run(demo_table, logs, ["knn", "linear"], train_logs=train_logs)
    assert result.training["feedback"] == "logged" and result.training["n_train"] == train_logs.n
    assert result.to_dict()["split"]["kind"] == "logs"


def test_no_agreement_makes_snips_undefined_and_warns(demo_table: RoutingTable) -> None:
    sp = make_split(demo_table, "given", 0)
    train, test = sp.apply(demo_table)
    best = int(np.nanmean(train.score, axis=0).argmax())
    other = (best + 1) % test.n_actors
    logs = Logs(Feedback.logged(test, np.full(test.n_queries, other), np.full(test.n_queries, 0.5)))
    with pytest.warns(OffPolicyWarning, match="no logged query was logged with an actor this router would choose"):
        result = off_policy_evaluate(demo_table, logs, ["best-single"], encoder=ENCODER, n_boot=100)
    est = result.results[0].estimates
    assert est["ips"]["mu_o"][0] == 0.0
    v, lo, hi = est["snips"]["mu_o"]
    assert math.isnan(v) and math.isnan(lo) and math.isnan(hi)
    assert result.results[0].diagnostics.ess == 0.0


def test_truth_is_absent_when_the_table_lacks_the_logged_queries(demo_table: RoutingTable) -> None:
    logs = simulate_logs(demo_table, "uniform", part="test", seed=1)
    # the table without the test queries: the routers still train, the truth is unknown
    train_only = demo_table.select_queries(demo_table.queries.split == "train")
    result = _run(train_only, logs, ["best-single"])
    assert result.training["n_train"] == train_only.n_queries
    assert result.results[0].truth is None
    assert result.truth_note is not None and "not in the table" in result.truth_note
    assert "truth" not in result.to_dict()["results"][0]


def test_refusals(demo_table: RoutingTable) -> None:
    logs = simulate_logs(demo_table, "uniform", part="test", seed=1)
    with pytest.raises(UsageError, match=r"'oracle' is a bound .* cannot be evaluated off-policy"):
        off_policy_evaluate(demo_table, logs, ["knn", "oracle"])
    with pytest.raises(UsageError, match="unknown estimator 'ipw'"):
        off_policy_evaluate(demo_table, logs, ["knn"], estimators="ips,ipw")
    with pytest.raises(UsageError, match="names an estimator twice"):
        off_policy_evaluate(demo_table, logs, ["knn"], estimators=["dr", "dr"])
    with pytest.raises(UsageError, match="interval must be one of bootstrap, normal"):
        off_policy_evaluate(demo_table, logs, ["knn"], interval_method="bca")
    fewer = demo_table.select_actors(demo_table.actor_names[:4])
    with pytest.raises(UsageError, match="the log has actors"):
        off_policy_evaluate(fewer, logs, ["knn"])


class _Flat(Router):
    """An exploring router whose distribution is uniform: under a uniform log every weight is 1."""

    name = "flat"
    explores = True

    def _fit(self, train: RoutingTable, features: Features) -> None:
        return None

    def _scores(self, features: Features) -> npt.NDArray[np.float64]:
        return np.zeros((features.n, len(self.actor_names)))


def test_an_exploring_router_is_evaluated_as_its_distribution(demo_table: RoutingTable) -> None:
    logs = simulate_logs(demo_table, "uniform", part="test", seed=4)
    result = _run(demo_table, logs, [_Flat()])
    res = result.results[0]
    rows = np.arange(logs.n)
    logged = logs.table.score[rows, logs.actor].astype(np.float64)
    assert res.policy == "distribution" and res.diagnostics.ess == pytest.approx(logs.n)
    assert res.estimates["ips"]["mu_o"][0] == pytest.approx(logged.mean())
    assert res.estimates["snips"]["mu_o"][0] == pytest.approx(logged.mean())
    _, test = make_split(demo_table, "given", 0).apply(demo_table)
    assert np.array_equal(test.queries.ids, logs.table.queries.ids)
    assert res.truth is not None and res.truth["mu_o"] == pytest.approx(float(test.score.mean(axis=1).mean()))
    assert result.to_dict()["results"][0]["class"].endswith("_Flat")


def test_truth_needs_only_the_cells_the_router_can_pick(demo_table: RoutingTable) -> None:
    from dataclasses import replace

    logs = simulate_logs(demo_table, "uniform", part="test", seed=5)
    sp = make_split(demo_table, "given", 0)
    best = int(np.nanmean(sp.apply(demo_table)[0].score, axis=0).argmax())  # best-single's constant choice
    q = int(np.flatnonzero(logs.actor != best)[0])  # a logged query whose logged actor is not best-single's
    row = int(sp.test[q])
    assert demo_table.queries.ids[row] == logs.table.queries.ids[q]
    other = next(a for a in range(demo_table.n_actors) if a not in (best, int(logs.actor[q])))
    holes = demo_table.score.copy()
    holes[row, other] = np.nan  # a cell best-single never picks: its truth stays known
    result = _run(replace(demo_table, score=holes), logs, ["best-single"], estimators="ips")
    full = _run(demo_table, logs, ["best-single"], estimators="ips")
    assert result.results[0].truth is not None and full.results[0].truth is not None
    assert result.results[0].truth["mu_o"] == full.results[0].truth["mu_o"]
    holes[row, best] = np.nan  # the cell it picks: no truth for mu_o, the estimate is unchanged
    result = _run(replace(demo_table, score=holes), logs, ["best-single"], estimators="ips")
    assert result.results[0].truth is not None and "mu_o" not in result.results[0].truth
    assert result.results[0].estimates == full.results[0].estimates
