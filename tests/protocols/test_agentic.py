"""The ``agentic`` protocol: step counts, planning steps against latency, success by steps and the compression of
the routers' spread, pinned by hand-computed cases; the collapse rule; the protocol's records and settings."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from scipy.stats import spearmanr

from routerlab.data.episodes import Episodes, episode_table
from routerlab.data.table import Actors, Queries, RoutingTable
from routerlab.datasets import demo
from routerlab.errors import UsageError
from routerlab.metrics.bootstrap import Estimate
from routerlab.metrics.catalog import metric_info
from routerlab.protocols.agentic import (
    POOLED,
    AgenticSettings,
    Spread,
    bucket_labels,
    compared_routers,
    compression_ratio,
    planning_latency,
    population_variance_points,
    spread,
)
from routerlab.protocols.base import run_protocol
from routerlab.protocols.full import RouterResult


def _m(q: str, a: str, step: int, lat: float, score: float | None = None) -> dict[str, Any]:
    return {"query_id": q, "actor": a, "step": step, "kind": "model", "tokens_out": 10, "latency_s": lat,
            "score": score}


def _t(q: str, a: str, step: int, env: float) -> dict[str, Any]:
    return {"query_id": q, "actor": a, "step": step, "kind": "tool", "tool": "calculator", "env_s": env}


# Actor A: model calls 1, 2, 3, 4; tool calls 0, 1, 2, 2; steps 1, 3, 5, 6; latency 2, 4, 5, 9 s; right, wrong,
# right, right. Actor B: model calls 1, 1, 2, 2; tool calls 0, 0, 0, 1; latency 3, 1, 2, 2 s; wrong, right, right,
# wrong.
HAND = [
    _m("q0", "A", 0, 2.0, 1),
    _m("q1", "A", 0, 1.0), _t("q1", "A", 1, 1.0), _m("q1", "A", 2, 2.0, 0),
    _m("q2", "A", 0, 1.0), _t("q2", "A", 1, 0.5), _m("q2", "A", 2, 1.0), _t("q2", "A", 3, 0.5),
    _m("q2", "A", 4, 2.0, 1),
    _m("q3", "A", 0, 2.0), _t("q3", "A", 1, 1.0), _m("q3", "A", 2, 2.0), _t("q3", "A", 3, 1.0), _m("q3", "A", 4, 1.0),
    _m("q3", "A", 5, 2.0, 1),
    _m("q0", "B", 0, 3.0, 0),
    _m("q1", "B", 0, 1.0, 1),
    _m("q2", "B", 0, 1.0), _m("q2", "B", 1, 1.0, 1),
    _m("q3", "B", 0, 0.5), _t("q3", "B", 1, 0.5), _m("q3", "B", 2, 1.0, 0),
]


def hand_table(meta: dict[str, Any] | None = None) -> RoutingTable:
    queries = Queries.create(["q0", "q1", "q2", "q3"], text=["add two numbers", "multiply two numbers",
                                                             "add three numbers", "multiply three numbers"],
                             split=["train", "train", "test", "test"])
    return episode_table(Episodes.from_records(HAND), queries=queries, name="hand", meta=meta)


def _run(table: RoutingTable, routers: list[str], **settings: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_protocol("agentic", table, {"n_boot": 40, **settings}, seed=0, routers=routers)


@pytest.fixture(scope="module")
def hand() -> Any:
    return _run(hand_table({"collect": {"agent": "arithmetic", "max_steps": 3}}),
                ["oracle", "best-single", "fixed:actor=A", "fixed:actor=B"], step_bins="1,2,3")


def test_routers_are_scored_on_episode_latency(hand: Any) -> None:
    # test queries q2 and q3. q2: A right in 5 s, B right in 2 s; q3: A right in 9 s, B wrong in 2 s
    m = {r.spec: r.metrics for r in hand.native.evaluation.results}
    assert (m["fixed:actor=A"]["acc_at_1"], m["fixed:actor=A"]["acc_at_1_l"]) == (1.0, 0.5)
    assert (m["fixed:actor=B"]["acc_at_1"], m["fixed:actor=B"]["acc_at_1_l"]) == (0.5, 0.5)
    assert m["fixed:actor=A"]["mean_latency"] == pytest.approx(7.0)
    assert m["fixed:actor=B"]["mean_latency"] == pytest.approx(2.0)
    assert m["oracle"]["acc_at_1_l"] == 1.0 and m["oracle"]["mean_latency"] == pytest.approx(5.5)


# ----------------------------------------------------------------------------------------------- step analyses
def test_step_counts_medians_means_by_hand(hand: Any) -> None:
    steps = {s.actor: s for s in hand.native.steps}
    assert list(steps) == ["A", "B", POOLED]
    a, b, pooled = steps["A"], steps["B"], steps[POOLED]
    assert (a.episodes, b.episodes, pooled.episodes) == (4, 4, 8)
    assert {k: v.value for k, v in a.median.items()} == {"model": 2.5, "tool": 1.5, "all": 4.0}
    assert {k: v.value for k, v in a.mean.items()} == {"model": 2.5, "tool": 1.25, "all": 3.75}
    assert {k: v.value for k, v in b.median.items()} == {"model": 1.5, "tool": 0.0, "all": 1.5}
    assert pooled.median["model"].value == 2.0  # 1, 1, 1, 2, 2, 2, 3, 4
    assert (a.accuracy.value, b.accuracy.value, pooled.accuracy.value) == (0.75, 0.5, 0.625)
    assert a.latency_median.value == pytest.approx(4.5) and b.latency_median.value == pytest.approx(2.0)
    # 4 episodes: below the 30 an interval needs, so none is computed
    assert math.isnan(a.median["model"].lo) and math.isnan(a.accuracy.hi)
    # the step limit from the table's metadata (as collect --agent writes it: 3 model calls): A reaches it twice
    assert hand.native.step_limit == 3 and (a.limit_share, b.limit_share) == (0.5, 0.0)


def test_planning_steps_against_latency_by_hand(hand: Any) -> None:
    plan = {p.actor: p for p in hand.native.planning}
    # A: model calls 1..4 against latency 2, 4, 5, 9: monotone (rho 1); slope = 11 / 5 = 2.2 s, intercept -0.5 s
    assert plan["A"].spearman.value == pytest.approx(1.0)
    assert plan["A"].slope_s.value == pytest.approx(2.2) and plan["A"].intercept_s == pytest.approx(-0.5)
    # B: (1, 3), (1, 1), (2, 2), (2, 2): the ranks' covariance is 0, and so is the slope
    assert plan["B"].spearman.value == pytest.approx(0.0) and plan["B"].slope_s.value == pytest.approx(0.0)
    # pooled: rank covariance 29 over sqrt(38 * 40); slope 17 / 8, intercept mean(y) - slope * mean(x) = 3.5 - 2.125 * 2
    assert plan[POOLED].spearman.value == pytest.approx(29 / math.sqrt(38 * 40))
    x = [1, 2, 3, 4, 1, 1, 2, 2]
    y = [2, 4, 5, 9, 3, 1, 2, 2]
    assert plan[POOLED].spearman.value == pytest.approx(spearmanr(x, y).statistic)
    assert plan[POOLED].slope_s.value == pytest.approx(2.125) and plan[POOLED].intercept_s == pytest.approx(-0.75)


def test_planning_is_undefined_when_every_episode_has_the_same_steps() -> None:
    p = planning_latency("c", [2, 2, 2, 2], [1.0, 2.0, 3.0, 4.0], n_boot=40, seed=0)
    assert math.isnan(p.spearman.value) and "same number of model calls (2)" in p.reason
    # an unknown latency is left out, not counted
    q = planning_latency("c", [1, 2, 3, 4], [1.0, 2.0, float("nan"), 4.0], n_boot=40, seed=0)
    assert q.episodes == 3 and q.slope_s.value == pytest.approx(1.0)


def test_success_by_steps_by_hand(hand: Any) -> None:
    assert bucket_labels((1, 2, 3)) == ["0", "1", "2", "3+"]
    assert bucket_labels((1, 2, 3, 5, 9, 17)) == ["0", "1", "2", "3-4", "5-8", "9-16", "17+"]
    got = {(b.actor, b.bucket): (b.episodes, b.accuracy.value) for b in hand.native.buckets}
    assert got == {("A", "1"): (1, 1.0), ("A", "2"): (1, 0.0), ("A", "3+"): (2, 1.0),
                   ("B", "1"): (2, 0.5), ("B", "2"): (2, 0.5),
                   (POOLED, "1"): (3, 2 / 3), (POOLED, "2"): (3, 1 / 3), (POOLED, "3+"): (2, 1.0)}


def test_intervals_from_thirty_episodes_on(tmp_path: Path) -> None:
    table = routed_table(40)
    result = _run(table, ["oracle"])
    for s in result.native.steps:
        assert s.episodes >= 30
        for est in (s.mean["model"], s.accuracy, s.latency_median):
            assert est.lo <= est.value <= est.hi
    plan = result.native.planning[0]
    assert plan.slope_s.lo <= plan.slope_s.value <= plan.slope_s.hi


# --------------------------------------------------------------------------------------------------- compression
def test_the_variance_is_the_papers_sigma_squared() -> None:
    # RouterWorld's Table 9, Acc@1-L under full observability, the non-collapsed learned routers (KNN, Naive Bayes,
    # MLP, Emb-FT, Hybrid-LLM, BARP, Avenger): the paper's sigma^2 = 4.35 is their population variance in points^2
    values = np.array([38.40, 36.12, 39.16, 36.95, 39.02, 32.73, 36.12]) / 100
    assert round(population_variance_points(values), 2) == 4.35
    assert population_variance_points([0.75, 0.25]) == pytest.approx(625.0)
    assert math.isnan(population_variance_points([0.5]))


def _result(spec: str, selection: dict[str, float], router: str | None = None, policy: str = "argmax",
            choice: list[int] | None = None) -> RouterResult:
    return RouterResult(router or spec, spec, {}, {}, {}, selection, False, np.asarray(choice or [0], dtype=np.intp),
                        0.0, 0.0, policy=policy)


def test_the_collapse_rule() -> None:
    results = [_result("at95", {"A": 0.95, "B": 0.05}, "knn"), _result("at94", {"A": 0.94, "B": 0.06}, "linear"),
               _result("oracle", {"A": 0.5, "B": 0.5}), _result("random", {"A": 0.5, "B": 0.5}),
               _result("eps-greedy", {"A": 0.6, "B": 0.4}, policy="distribution"),
               _result("fixed:actor=B", {"B": 1.0}, "fixed")]
    kept, excluded = compared_routers(results, 0.95)
    assert [r.spec for r in kept] == ["at94"]
    assert excluded["at95"] == "collapsed: A takes 95% of the test queries"
    assert excluded["fixed:actor=B"] == "collapsed: B takes 100% of the test queries"
    assert excluded["oracle"] == excluded["random"] == "a bound, not a routing method"
    assert "samples its selection distribution" in excluded["eps-greedy"]
    kept, _ = compared_routers(results, 0.99)  # a looser rule keeps the 95% router
    assert [r.spec for r in kept] == ["at95", "at94"]


def _scored(copies: int) -> RoutingTable:
    """Four queries (repeated): A right on q0 and q1, B on q1 and q2, nobody on q3; A is faster on q1."""
    score = np.tile(np.array([[1, 0], [1, 1], [0, 1], [0, 0]], dtype=np.float32), (copies, 1))
    latency = np.tile(np.array([[1, 2], [1, 2], [1, 2], [1, 2]], dtype=np.float32), (copies, 1))
    n = 4 * copies
    return RoutingTable(Queries.create([f"q{i}" for i in range(n)]), Actors.create(["A", "B"]), score,
                        latency_s=latency)


def _evaluation(table: RoutingTable, choices: dict[str, list[int]]) -> Any:
    copies = table.n_queries // 4
    results = []
    for name, choice in choices.items():
        c = np.tile(np.asarray(choice, dtype=np.intp), copies)
        share = float(np.mean(c == 0))
        results.append(_result(name, {"A": share, "B": 1 - share}, "knn", choice=c.tolist()))
    return SimpleNamespace(results=results, test_ids=table.queries.ids, actor_names=table.actor_names)


def test_compression_variance_by_hand() -> None:
    table = _scored(1)
    ev = _evaluation(table, {"r1": [0, 0, 1, 1], "r2": [1, 1, 0, 0]})
    side = spread("agentic", table, ev, 0.95, n_boot=40, seed=0)
    # Acc@1: r1 right on q0, q1, q2 (75 points), r2 on q1 only (25): variance ((25)^2 + (25)^2) / 2 = 625
    assert side.values == {"r1": pytest.approx({"acc_at_1": 75.0, "acc_at_1_l": 75.0, "dcg": 75.0, "l_dcg": 75.0}),
                           "r2": pytest.approx({"acc_at_1": 25.0, "acc_at_1_l": 0.0, "dcg": 25 / np.log2(3),
                                                "l_dcg": 100 * (1 / np.log2(3)) * (1 / 2) / 4})}
    assert side.variance["acc_at_1"].value == pytest.approx(625.0)
    # Acc@1-L: r2's one correct pick (B on q1) is not the fastest correct actor (A): 75 and 0 points; its DCG is
    # that of rank 2, 1 / log2(3), and its L-DCG that times fastest / chosen latency, 1 / 2
    assert side.variance["acc_at_1_l"].value == pytest.approx(37.5 ** 2)
    # 4 test queries: below the 30 an interval needs
    assert math.isnan(side.variance["acc_at_1"].lo)
    # the same pattern 10 times: the same values, now with an interval
    big = _scored(10)
    side10 = spread("agentic", big, _evaluation(big, {"r1": [0, 0, 1, 1], "r2": [1, 1, 0, 0]}), 0.95, n_boot=200,
                    seed=0)
    assert side10.variance["acc_at_1"].value == pytest.approx(625.0)
    assert 0 < side10.variance["acc_at_1"].lo < side10.variance["acc_at_1"].hi


def test_compression_ratio() -> None:
    def side(value: float, reps: list[float]) -> Spread:
        return Spread("x", 40, ["r1", "r2"], {}, {}, {"acc_at_1": Estimate(value, min(reps), max(reps))},
                      {"acc_at_1": np.asarray(reps)})

    ratio = compression_ratio(side(1.0, [0.5, 1.0, 1.5] * 20), side(4.0, [2.0, 4.0, 6.0] * 20))
    assert ratio["acc_at_1"].value == pytest.approx(0.25)
    assert ratio["acc_at_1"].lo == pytest.approx(0.25) and ratio["acc_at_1"].hi == pytest.approx(0.25)
    zero = compression_ratio(side(1.0, [1.0] * 60), side(0.0, [0.0] * 60))
    assert math.isnan(zero["acc_at_1"].value)


def routed_table(n: int, *, actors: tuple[str, ...] = ("A", "B"), seed: int = 0, informative: float = 1.0
                 ) -> RoutingTable:
    """An episode table whose best actor depends on the task's words (A on 'add', B on 'multiply'), so learned
    routers do not collapse; A plans in more steps than B. Only the share ``informative`` of the texts names the
    task's kind (the others leave the routers guessing, so they differ)."""
    rng = np.random.default_rng(seed)
    recs: list[dict[str, Any]] = []
    texts = []
    for i in range(n):
        kind = "add" if i % 2 else "multiply"
        texts.append(f"{kind} the numbers {i} and {i + 3}" if rng.random() < informative else f"item {i} {i * 7 % 5}")
        for a in actors:
            good = ((a == "A") == (kind == "add")) != (rng.random() < 0.15)  # mostly the task's actor
            k = int(rng.integers(1, 6)) if a == "A" else int(rng.integers(1, 3))
            for s in range(k):
                last = s == k - 1
                recs.append(_m(f"q{i}", a, 2 * s, 0.2 + rng.random(), float(good) if last else None))
                if not last:
                    recs.append(_t(f"q{i}", a, 2 * s + 1, 0.1))
    queries = Queries.create([f"q{i}" for i in range(n)], text=texts,
                             split=["train" if i < n // 2 else "test" for i in range(n)])
    return episode_table(Episodes.from_records(recs), queries=queries, name="routed")


ROUTED = ["oracle", "random", "best-single", "fixed:actor=A", "knn", "linear", "naive-bayes"]


@pytest.fixture(scope="module")
def routed(tmp_path_factory: pytest.TempPathFactory) -> tuple[RoutingTable, RoutingTable, Any]:
    table = routed_table(80, informative=0.7)
    # another table, its actors in another order, where routers guess on half the tasks
    single = routed_table(80, actors=("B", "A", "C"), seed=5, informative=0.5)
    path = tmp_path_factory.mktemp("single") / "single"
    single.save(path)
    result = _run(table, ROUTED, single_turn=str(path))
    return table, single, result


def test_compression_reuses_the_evaluations_decisions(routed: tuple[RoutingTable, RoutingTable, Any]) -> None:
    _, _, result = routed
    a = result.native
    c = a.compression
    for side, ev in ((c.agentic, a.evaluation), (c.single_turn, a.single_turn)):
        assert side is not None and ev is not None
        assert {"oracle", "random", "best-single", "fixed:actor=A"} <= set(side.excluded)  # bounds, collapsed
        assert len(side.routers) >= 2 and set(side.routers) | set(side.excluded) == set(ROUTED)
        by_spec = {r.spec: r for r in ev.results}
        for spec in side.routers:  # every router's value is the one the full evaluation reports
            for metric, points in side.values[spec].items():
                assert points == pytest.approx(100 * by_spec[spec].metrics[metric])
        values = [by_spec[s].metrics["acc_at_1_l"] for s in side.routers]
        assert side.variance["acc_at_1_l"].value == pytest.approx(np.var(np.array(values) * 100))
    assert c.single_turn is not None and set(c.ratio) == set(c.agentic.variance)
    for metric, ratio in c.ratio.items():
        s, g = c.single_turn.variance[metric].value, c.agentic.variance[metric].value
        assert ratio.value == pytest.approx(g / s) if s > 0 else math.isnan(ratio.value)
    assert any(e.value > 0 for e in c.agentic.variance.values())
    assert any(e.value > 0 for e in c.single_turn.variance.values())
    assert a.single_turn.actor_names == ["A", "B"]  # the single-turn table cut to the same actors, in their order


def test_records_carry_slices_and_catalog_metrics(routed: tuple[RoutingTable, RoutingTable, Any]) -> None:
    _, _, result = routed
    slices = {r.slice for r in result.records}
    assert {"", "actor=A", "actor=B", "actor=all", "actor=A,model_steps=1", "setting=agentic",
            "setting=single-turn"} <= slices
    for r in result.records:
        assert "agentic" in metric_info(r.metric).protocols, r.metric
    assert result.value("A", "n_episodes", "actor=A") == 80
    assert result.value("non-collapsed routers", "acc_at_1_variance", "setting=agentic") == pytest.approx(
        result.native.compression.agentic.variance["acc_at_1"].value)
    assert result.to_dict()["protocol"] == "agentic"


def test_a_table_without_episodes_is_one_error() -> None:
    with pytest.raises(UsageError, match="holds no episodes"):
        _run(demo(60, seed=1), ["oracle"])


def test_a_single_turn_table_must_have_the_same_actors(tmp_path: Path) -> None:
    routed_table(40, actors=("A", "C")).save(tmp_path / "other")
    with pytest.raises(UsageError, match=r"lacks the actor\(s\) B of the episode table"):
        _run(routed_table(40), ["oracle"], single_turn=str(tmp_path / "other"))


@pytest.mark.parametrize(("values", "message"), [
    ({"collapse": 0.4}, "collapse: must be a finite number in (0.5, 1], got 0.4"),
    ({"step_bins": "3,2"}, "step_bins: must be increasing lower edges, e.g. 1,2,3,5,9,17; got 3,2"),
    ({"step_bins": "0,2"}, "step_bins: item 1: must be an integer in [1, 1,000,000], got 0"),
    ({"step_limit": 0}, "step_limit: must be an integer in [1, 1,000,000], got 0"),
    ({"single_turn": "/no/such/table"}, "single_turn: /no/such/table: does not exist"),
])
def test_settings_are_checked(values: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError) as exc:
        AgenticSettings.from_mapping(values)
    assert str(exc.value) == message
    key = next(iter(values))
    with pytest.raises(UsageError) as cli:
        AgenticSettings.from_cli(**values)
    assert str(cli.value) == "--" + key.replace("_", "-") + message[len(key):]


def test_the_step_limit_comes_from_the_setting_or_the_metadata() -> None:
    from routerlab.protocols.agentic import table_step_limit

    assert table_step_limit(hand_table(), None) is None
    assert table_step_limit(hand_table({"max_steps": 5}), None) == 5
    assert table_step_limit(hand_table({"collect": {"agent": "code", "max_steps": 6}}), None) == 6
    assert table_step_limit(hand_table({"collect": {"max_steps": 6}}), 4) == 4  # the setting wins
    assert table_step_limit(hand_table({"max_steps": True}), None) is None  # not a count
