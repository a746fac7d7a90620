"""One value per router (issue 20 part 6, docs/bandits.md): evaluate, cold-start, Voyager and ope score a router as
deployed. An exploring router's value is the expectation under the distribution it samples, its argmax value beside
it as ``<metric>_greedy``; any other router is scored at its argmax, exactly as before."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from routerlab.data.splits import make_split
from routerlab.data.table import RoutingTable
from routerlab.datasets import demo
from routerlab.protocols.full import evaluate
from routerlab.protocols.ope import OffPolicyWarning, off_policy_evaluate
from routerlab.protocols.partial import cold_start, voyager
from routerlab.protocols.policies import simulate_logs
from routerlab.protocols.scaling import scaling_curve

ENCODER = "tfidf:dim=32"
EXPLORING = ["random", "linucb", "thompson", "eps-greedy"]


@pytest.fixture(scope="module")
def table() -> RoutingTable:
    return demo(n_queries=600, seed=0)


@pytest.fixture(scope="module")
def test_scores(table: RoutingTable) -> np.ndarray:
    return table.select_queries(make_split(table, "given", 0).test).score.astype(np.float64)


def test_random_is_worth_the_mean_actor_score_and_its_greedy_value_is_its_seeded_pick(
        table: RoutingTable, test_scores: np.ndarray) -> None:
    ev = evaluate(table, ["random", "knn"], encoder=ENCODER, n_boot=100)
    rnd, knn = ev.results
    assert rnd.policy == "distribution" and knn.policy == "argmax"
    # the mean over queries of the mean over actors of the query's scores: hand-checkable from the table
    assert rnd.metrics["mu_o"] == pytest.approx(float(test_scores.mean(axis=1).mean()), abs=1e-12)
    rows = np.arange(test_scores.shape[0])
    assert rnd.metrics["mu_o_greedy"] == pytest.approx(float(test_scores[rows, rnd.choice].mean()), abs=1e-12)
    assert rnd.selection == pytest.approx({a: 1 / table.n_actors for a in table.actor_names})  # expected shares
    assert rnd.deployed_score is not None and rnd.deployed_score.mean() == pytest.approx(rnd.metrics["mu_o"])
    assert not any(k.endswith("_greedy") for k in knn.metrics) and knn.deployed_score is None
    assert knn.metrics["mu_o"] == pytest.approx(float(test_scores[rows, knn.choice].mean()), abs=1e-12)


def test_oracle_p_is_worth_p_oracle_plus_1_minus_p_random_as_the_scaling_curve_says(table: RoutingTable) -> None:
    ev = evaluate(table, ["oracle", "random", "oracle-p:p=0.25"], encoder=ENCODER, n_boot=100)
    mu = {r.spec: r.metrics["mu_o"] for r in ev.results}
    assert mu["oracle-p:p=0.25"] == pytest.approx(0.25 * mu["oracle"] + 0.75 * mu["random"], abs=1e-12)
    curve = scaling_curve(table, make_split(table, "given", 0), [table.n_actors], [0.25], samples=2)
    assert curve.oracle_p[0.25]["mean"][0] == pytest.approx(mu["oracle-p:p=0.25"], abs=1e-12)
    # SPEC 5 metrics too: the oracle's own (fastest correct) actor with probability p
    orc, rnd, orp = ev.results
    assert orp.metrics["acc_at_1_l"] == pytest.approx(0.25 * orc.metrics["acc_at_1_l"]
                                                      + 0.75 * rnd.metrics["acc_at_1_l"], abs=1e-12)


def test_exploring_routers_have_greedy_twins_in_every_protocol_and_the_same_seed_gives_the_same_numbers(
        table: RoutingTable) -> None:
    runs = {
        "full": lambda: evaluate(table, ["eps-greedy", "best-single"], encoder=ENCODER, n_boot=60, seed=1),
        "cold-start": lambda: cold_start(table, ["eps-greedy", "best-single"], encoder=ENCODER, n_boot=60, seed=1),
        "voyager": lambda: voyager(table, ["eps-greedy", "best-single"], rounds=2, encoder=ENCODER, n_boot=60,
                                   seed=1),
    }
    for name, run in runs.items():
        one, two = run(), run()
        eps, single = one.results
        assert eps.policy == "distribution" and single.policy == "argmax", name
        # eps-greedy (eps 0.1, m actors): 0.9 + 0.1 / m on its argmax, so deployed and greedy values differ
        assert eps.metrics["mu_o"] != eps.metrics["mu_o_greedy"], name
        assert eps.ci["mu_o"] != eps.ci["mu_o_greedy"], name
        assert set(eps.metrics) == set(single.metrics) | {k + "_greedy" for k in single.metrics if k != "e_p"}, name
        assert [r.to_dict()["metrics"] for r in one.results] == [r.to_dict()["metrics"] for r in two.results], name
        assert [r.to_dict()["ci"] for r in one.results] == [r.to_dict()["ci"] for r in two.results], name
    history = runs["voyager"]().extra["rounds"]
    assert all("mu_o_greedy" in r["metrics"] and r["policy"] == "distribution" for h in history
               for r in h["results"] if r["router"] == "eps-greedy")


def test_ope_truth_is_the_value_evaluate_gives_on_the_same_queries(table: RoutingTable) -> None:
    """The off-policy truth of an exploring router (the mean over the logged queries of sum_a pi(a|x) reward) equals
    the deployed value evaluate reports for it on those queries: every test query logged once."""
    logs = simulate_logs(table, "uniform", part="test", seed=3)
    ev = evaluate(table, EXPLORING, encoder=ENCODER, n_boot=50)
    assert ev.excluded_test_queries == 0 and sorted(map(str, ev.test_ids)) == sorted(map(str, logs.table.queries.ids))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OffPolicyWarning)
        res = off_policy_evaluate(table, logs, EXPLORING, encoder=ENCODER, n_boot=50)
    assert res.metrics == ["mu_o", "acc_at_1_l", "dcg", "l_dcg", "mean_cost", "mean_latency"]
    by_spec = {r.spec: r for r in ev.results}
    for r in res.results:
        assert r.policy == "distribution" and r.truth is not None
        deployed = by_spec[r.spec]
        for metric, truth in r.truth.items():
            assert truth == pytest.approx(deployed.metrics[metric], rel=1e-12, abs=1e-15), (r.spec, metric)
        assert r.deployed_score is not None and r.deployed_score.mean() == pytest.approx(deployed.metrics["mu_o"])
    linucb = next(r for r in res.results if r.spec == "linucb")
    assert linucb.truth is not None and linucb.truth["mu_o"] == pytest.approx(by_spec["linucb"].metrics["mu_o"])
