"""Logging policies: spec parsing, the distributions, seeding, observed-only logging, simulate_logs, real tables."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from routerlab.data.logs import Logs
from routerlab.data.table import RoutingTable
from routerlab.datasets import demo
from routerlab.errors import UsageError
from routerlab.features import encode_pair
from routerlab.features.base import Features
from routerlab.metrics.latency import latency_rewards
from routerlab.metrics.selection import softmax
from routerlab.protocols.policies import (
    Deployed,
    EpsGreedy,
    Softmax,
    Uniform,
    parse_policy,
    simulate_logs,
)
from routerlab.routers.base import Routing, get_router, routers

SE = 4.0  # shares must lie within 4 standard errors of their expectation


@pytest.mark.parametrize("spec,cls,router,number", [
    ("uniform", Uniform, None, None),
    (" uniform ", Uniform, None, None),
    ("eps-greedy:best-single:0.1", EpsGreedy, "best-single", 0.1),
    ("eps-greedy:knn:k=10,metric=cosine:0", EpsGreedy, "knn:k=10,metric=cosine", 0.0),
    ("eps-greedy:knn:k=10:1", EpsGreedy, "knn:k=10", 1.0),
    ("softmax:knn:k=3:0.25", Softmax, "knn:k=3", 0.25),
    ("softmax:oracle:1e-3", Softmax, "oracle", 1e-3),
    ("router:oracle", Deployed, "oracle", None),
    ("router:knn:k=10,weighted=true", Deployed, "knn:k=10,weighted=true", None),
])
def test_specs(spec: str, cls: type, router: str | None, number: float | None) -> None:
    pol = parse_policy(spec)
    assert isinstance(pol, cls) and pol.router == router
    assert parse_policy(pol.spec).spec == pol.spec  # the recorded spec parses back to itself
    d = pol.describe()
    assert d["spec"] == pol.spec and d["policy"] == pol.kind
    if isinstance(pol, EpsGreedy):
        assert pol.epsilon == number and d["epsilon"] == number
    if isinstance(pol, Softmax):
        assert pol.temperature == number and d["temperature"] == number


@pytest.mark.parametrize("spec,needle", [
    ("", "empty logging policy"),
    ("greedy", "unknown logging policy 'greedy'"),
    ("uniform:0.1", "uniform takes no arguments"),
    ("eps-greedy:knn", "eps-greedy needs a router and EPS"),
    ("eps-greedy:0.1", "eps-greedy needs a router and EPS"),
    ("eps-greedy:knn:", "EPS '' is not a number"),
    ("eps-greedy:knn:nan", "EPS nan is out of range; EPS must be in [0, 1]"),
    ("eps-greedy:knn:1.5", "EPS 1.5 is out of range"),
    ("eps-greedy:knn:-0.1", "EPS -0.1 is out of range"),
    ("softmax:knn:0", "T 0 is out of range; T must be a finite number > 0"),
    ("softmax:knn:inf", "T inf is out of range"),
    ("softmax:knn:warm", "T 'warm' is not a number"),
    ("softmax:knn", "softmax needs a router and T"),
    ("router:", "names no router"),
    ("router:gpt-router", "unknown router 'gpt-router'"),
    ("eps-greedy:knn:k=0:0.1", "option k=0 is out of range"),
    ("softmax:knn:kk=3:1", "router 'knn' has no option ['kk']"),
])
def test_malformed_specs_are_one_usage_line(spec: str, needle: str) -> None:
    with pytest.raises(UsageError) as err:
        parse_policy(spec)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_distributions_by_hand() -> None:
    routed = Routing(np.array([[1.0, 3.0, 0.0], [2.0, 2.0, 5.0]]), np.array([1, 2]), np.full((2, 3), 1 / 3))
    every = np.ones((2, 3), dtype=bool)
    eps = EpsGreedy("eps-greedy:x:0.3", "x", 0.3)
    np.testing.assert_allclose(eps.distribution(routed, every), [[0.1, 0.8, 0.1], [0.1, 0.1, 0.8]])
    # on a row with an unobserved actor the policy is restricted to the others: greedy = best observed
    some = np.array([[True, False, True], [True, True, True]])
    np.testing.assert_allclose(eps.distribution(routed, some), [[0.85, 0, 0.15], [0.1, 0.1, 0.8]])
    sm = Softmax("softmax:x:0.5", "x", 0.5)
    np.testing.assert_allclose(sm.distribution(routed, every), softmax(routed.scores / 0.5))
    tiny = Softmax("softmax:x:1e-300", "x", 1e-300).distribution(routed, every)  # no overflow, no NaN
    np.testing.assert_array_equal(tiny, [[0, 1, 0], [0, 0, 1]])
    ties = Softmax("softmax:x:1e-300", "x", 1e-300).distribution(
        Routing(np.array([[4.0, 4.0, 1.0]]), np.array([0]), np.full((1, 3), 1 / 3)), np.ones((1, 3), dtype=bool))
    np.testing.assert_array_equal(ties, [[0.5, 0.5, 0]])


def _parts(n: int = 240, seed: int = 0) -> tuple[RoutingTable, RoutingTable, RoutingTable]:
    table = demo(n, seed=seed)
    train, test = table.select_split("train"), table.select_split("test")
    return table, train, test


def test_seeded_and_vectorised_draws() -> None:
    _, train, test = _parts()
    ftrain, ftest = encode_pair(train, test, "tfidf")
    pol = parse_policy("softmax:knn:k=5:0.3")
    a = pol.log(test, ftest, train=train, ftrain=ftrain, seed=4)
    b = pol.log(test, ftest, train=train, ftrain=ftrain, seed=4)
    c = pol.log(test, ftest, train=train, ftrain=ftrain, seed=5)
    np.testing.assert_array_equal(a.table.score, b.table.score)
    assert a.propensity is not None and b.propensity is not None and c.propensity is not None
    np.testing.assert_array_equal(a.propensity, b.propensity)
    assert not np.array_equal(np.isnan(a.table.score), np.isnan(c.table.score))
    # the propensity is the policy's probability of the logged actor
    router = get_router("knn:k=5", seed=4).fit(train, ftrain)
    dist = softmax(router.route(ftest).scores / 0.3)
    actor = np.argmax(~np.isnan(a.table.score), axis=1)
    np.testing.assert_allclose(a.propensity, dist[np.arange(test.n_queries), actor])


def test_uniform_needs_no_router_and_matches_the_cold_start_stream() -> None:
    from routerlab.data.feedback import draw_actions

    _, train, _ = _parts()
    fb = parse_policy("uniform").log(train, seed=7)
    rng = np.random.default_rng([7, 0x434F4C44])
    actor, _ = draw_actions(np.full((train.n_queries, train.n_actors), 1 / train.n_actors), rng)
    np.testing.assert_array_equal(np.argmax(~np.isnan(fb.table.score), axis=1), actor)
    assert fb.propensity is not None and np.all(fb.propensity == 1 / train.n_actors)
    with pytest.raises(UsageError, match="trains router 'knn': pass train, ftrain and fpart"):
        parse_policy("router:knn").log(train, seed=0)


def test_only_observed_cells_are_logged() -> None:
    _, train, _ = _parts()
    score = train.score.copy()
    rng = np.random.default_rng(0)
    score[rng.random(score.shape) < 0.4] = np.nan
    score[np.isnan(score).all(axis=1), 0] = 1.0
    holes = RoutingTable.from_arrays(score, actors=train.actors, query_ids=train.queries.ids.tolist(),
                                     text=train.queries.text.tolist(), split=train.queries.split.tolist())
    ftrain, _ = encode_pair(holes, holes, "tfidf")
    explorers = [f"router:{n}" for n, c in routers().items() if c.explores][:1]  # a bandit's own draws
    for spec in ("uniform", "eps-greedy:best-single:0.5", "softmax:knn:1", "router:knn", "router:oracle",
                 *explorers):
        fb = parse_policy(spec).log(holes, ftrain, train=holes, ftrain=ftrain, seed=1)
        logged = ~np.isnan(fb.table.score)
        assert (logged.sum(axis=1) == 1).all() and not (logged & np.isnan(score)).any(), spec
    fb = parse_policy("uniform").log(holes, seed=1)
    assert fb.propensity is not None
    np.testing.assert_allclose(fb.propensity, 1 / (~np.isnan(score)).sum(axis=1))
    score[5] = np.nan
    empty = RoutingTable.from_arrays(score, actors=train.actors, query_ids=train.queries.ids.tolist())
    with pytest.raises(UsageError, match=f"query {train.queries.ids[5]!r} has no observed outcome"):
        parse_policy("uniform").log(empty, seed=0)


def test_deployed_router_acts_through_router_act() -> None:
    _, train, test = _parts()
    ftrain, ftest = encode_pair(train, test, "tfidf")
    fb = parse_policy("router:knn:k=7").log(test, ftest, train=train, ftrain=ftrain, seed=2)
    router = get_router("knn:k=7", seed=2).fit(train, ftrain)
    np.testing.assert_array_equal(np.argmax(~np.isnan(fb.table.score), axis=1), router.choose(ftest))
    assert fb.propensity is not None and np.all(fb.propensity == 1.0)
    explorers = [n for n, c in routers().items() if c.explores]
    if not explorers:
        pytest.skip("no exploring router registered")
    name = explorers[0]
    fb = parse_policy(f"router:{name}").log(test, ftest, train=train, ftrain=ftrain, seed=2)
    bandit = get_router(name, seed=2).fit(train, ftrain)
    actor, propensity = bandit.act(ftest, np.random.default_rng([2, 0x434F4C44]))
    np.testing.assert_array_equal(np.argmax(~np.isnan(fb.table.score), axis=1), actor)
    assert fb.propensity is not None
    np.testing.assert_allclose(fb.propensity, propensity)


def test_oracle_warm_up_logs_correct_actors() -> None:
    table, _, test = _parts()
    logs = simulate_logs(table, "router:oracle", part="test", seed=0)
    rows = np.arange(test.n_queries)
    answerable = (test.score >= 0.5).any(axis=1)
    assert (test.score[rows, logs.actor][answerable] >= 0.5).all()
    assert np.all(logs.propensity == 1.0) and logs.policy == "router:oracle"


@pytest.mark.parametrize("part", ["train", "test", "all"])
def test_simulate_logs_parts_and_rewards(part: str) -> None:
    table, train, test = _parts(300, seed=3)
    logs = simulate_logs(table, "eps-greedy:best-single:0.3", part=part, seed=1)
    logged = {"train": train, "test": test, "all": table}[part]
    assert logs.table.queries.ids.tolist() == logged.queries.ids.tolist()
    rows = np.arange(logged.n_queries)
    np.testing.assert_array_equal(logs.table.score[rows, logs.actor], logged.score[rows, logs.actor])
    assert logged.latency_s is not None
    full = latency_rewards(logged.score, logged.latency_s)
    assert sorted(logs.rewards) == ["acc_at_1_l", "dcg", "l_dcg"]
    for key, values in logs.rewards.items():
        np.testing.assert_allclose(values, full[key][rows, logs.actor])
    with pytest.raises(UsageError, match="part must be one of train, test, all"):
        simulate_logs(table, "uniform", part="val")


def test_no_rewards_without_latency() -> None:
    _, train, _ = _parts()
    bare = RoutingTable.from_arrays(
        np.vstack([train.score, train.score[:20]]), actors=train.actor_names,
        query_ids=[*train.queries.ids, *[f"t{i}" for i in range(20)]],
        text=[*train.queries.text, *train.queries.text[:20]], split=["train"] * train.n_queries + ["test"] * 20)
    logs = simulate_logs(bare, "uniform", seed=0)
    assert logs.rewards == {} and logs.n == train.n_queries


# ---------------------------------------------------------------------------------------------- real tables
def _shares(actor: np.ndarray, m: int) -> np.ndarray:
    return np.bincount(actor, minlength=m) / actor.size


def test_uniform_logs_of_llmrouter(real_table: Callable[[str], RoutingTable]) -> None:
    table = real_table("llmrouter")
    train = table.select_split("train")
    n, m = train.n_queries, train.n_actors
    logs = simulate_logs(table, "uniform", part="train", seed=11)
    assert logs.n == n == 5608 and logs.table.actor_names == train.actor_names
    se = np.sqrt((1 / m) * (1 - 1 / m) / n)
    assert np.all(np.abs(_shares(logs.actor, m) - 1 / m) < SE * se)
    assert np.all(logs.propensity == 1 / m)
    rows = np.arange(n)
    np.testing.assert_array_equal(logs.table.score[rows, logs.actor], train.score[rows, logs.actor])
    assert (np.isnan(logs.table.score).sum(axis=1) == m - 1).all()


def test_eps_greedy_best_single_on_llmrouter(real_table: Callable[[str], RoutingTable]) -> None:
    from routerlab.metrics.bounds import best_single_actor

    table = real_table("llmrouter")
    train = table.select_split("train")
    n, m, eps = train.n_queries, train.n_actors, 0.3
    # best-single reads no query vector: constant features spare the test a tf-idf fit of 5,608 long texts
    flat = Features(np.zeros((n, 1), dtype=np.float32), train, "none")
    fb = parse_policy(f"eps-greedy:best-single:{eps}").log(train, flat, train=train, ftrain=flat, seed=5)
    logs = Logs(fb)
    best = int(best_single_actor(train.score))
    expected = 1 - eps + eps / m
    share = _shares(logs.actor, m)[best]
    assert abs(share - expected) < SE * np.sqrt(expected * (1 - expected) / n)
    on_best = logs.actor == best
    np.testing.assert_allclose(logs.propensity[on_best], expected)
    np.testing.assert_allclose(logs.propensity[~on_best], eps / m)


def test_oracle_warm_up_on_llmrouter(real_table: Callable[[str], RoutingTable]) -> None:
    table = real_table("llmrouter")
    train = table.select_split("train")
    flat = Features(np.zeros((train.n_queries, 1), dtype=np.float32), train, "none")  # the oracle reads outcomes
    logs = Logs(parse_policy("router:oracle").log(train, flat, train=train, ftrain=flat, seed=0))
    rows = np.arange(train.n_queries)
    answerable = (train.score >= 0.5).any(axis=1)
    assert answerable.mean() > 0.5
    assert (train.score[rows, logs.actor][answerable] >= 0.5).all()


def test_uniform_on_routerbench_logs_observed_cells_only(real_table: Callable[[str], RoutingTable]) -> None:
    table = real_table("routerbench")
    train = table.select_split("train")
    observed = ~np.isnan(train.score)
    keep = observed.any(axis=1)
    logs = parse_policy("uniform").log(train.select_queries(keep), seed=3)
    assert logs.propensity is not None
    np.testing.assert_allclose(logs.propensity, 1 / observed[keep].sum(axis=1))
    assert not (~np.isnan(logs.table.score) & ~observed[keep]).any()
