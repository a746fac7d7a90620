"""The promotion gate's computation: the paired difference by hand for IPS, SNIPS and DR, the decision rule
(promote iff the lower bound exceeds the margin), thin support, a candidate equal to the current router, an
oracle-like candidate on a log of real data, and a small calibration by simulated deployments."""

from __future__ import annotations

import importlib.util
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.metrics import offpolicy as op
from routerlab.protocols.promote import (
    NOMINAL_FALSE_PROMOTION,
    PairedEstimate,
    Support,
    check_margin,
    decide,
    gate,
    paired_estimate,
    paired_terms,
    support_diagnostics,
)

Z = 1.959963984540054
NAMES = ["a", "b"]


def pattern(copies: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Blocks of 4 logged rows over 2 actors, each logged with propensity 1/2: (actor 0, score 1), (actor 1, 1),
    (actor 0, 0), (actor 1, 1). The current router always picks actor 0, the candidate always actor 1."""
    action = np.tile([0, 1, 0, 1], copies)
    reward = np.tile([1.0, 1.0, 0.0, 1.0], copies)
    p = np.full(action.size, 0.5)
    cur = np.tile([1.0, 0.0], (action.size, 1))
    cand = np.tile([0.0, 1.0], (action.size, 1))
    return reward, action, p, cur, cand


def test_paired_normal_by_hand() -> None:
    """n = 80 (20 blocks). IPS: per-row differences (-2, 2, 0, 2) per block, mean 0.5, sum of squared deviations
    20 * (6.25 + 2.25 + 0.25 + 2.25) = 220, se = sqrt(220 / (80 * 79)). SNIPS: V_cand = 1, V_cur = 0.5; leaving
    out a row of actor 0 moves V_cur to 20/39 or 19/39, one of actor 1 changes nothing: jackknife se =
    sqrt(79/80 * 40 * (0.5/39)^2) = 0.0806, below IPS's, so the floor (IPS's se) holds. DR with rhat = 0.5
    everywhere: differences (-1, 1, 1, 1), deviations 20 * (2.25 + 3 * 0.25) = 60."""
    reward, action, p, cur, cand = pattern(20)
    expected = {"ips": math.sqrt(220 / (80 * 79)), "snips": math.sqrt(220 / (80 * 79)),
                "dr": math.sqrt(60 / (80 * 79))}
    for est, se in expected.items():
        rhat = np.full((80, 2), 0.5) if est == "dr" else None
        c, r = paired_terms(est, reward, action, p, cur, cand, rhat)
        e = paired_estimate(c, r)
        assert e.value == pytest.approx(0.5) and e.se == pytest.approx(se)
        assert (e.lo, e.hi) == pytest.approx((0.5 - Z * se, 0.5 + Z * se))
        assert e.candidate - e.current == pytest.approx(e.value)
    assert NOMINAL_FALSE_PROMOTION == 0.025


def test_snips_jackknife_against_a_loop() -> None:
    """SNIPS's se is the jackknife of the difference of the two ratios (each row left out of both), floored at
    IPS's: checked against a leave-one-out loop where the jackknife is the larger (5 actors, each router agrees
    with the logged actor on about a fifth of the rows, so the ratios' denominators are small) and where IPS's
    is (the hand pattern above)."""
    rng = np.random.default_rng(0)
    n, m = 60, 5
    action = rng.integers(0, m, n)
    p = np.full(n, 0.9)
    reward = rng.random(n)
    cur, cand = np.eye(m)[rng.integers(0, m, n)], np.eye(m)[rng.integers(0, m, n)]
    c, r = paired_terms("snips", reward, action, p, cur, cand)
    w_c, w_r = c.denominator, r.denominator
    assert w_c is not None and w_r is not None
    keep = ~np.eye(n, dtype=bool)
    loo = np.array([(reward[k] * w_c[k]).sum() / w_c[k].sum() - (reward[k] * w_r[k]).sum() / w_r[k].sum()
                    for k in keep])
    jack = math.sqrt((n - 1) / n * ((loo - loo.mean()) ** 2).sum())
    ips = float((c.numerator - r.numerator).std(ddof=1)) / math.sqrt(n)
    assert jack > 2 * ips
    assert paired_estimate(c, r).se == pytest.approx(jack)


def test_promote_iff_lower_bound_exceeds_margin() -> None:
    reward, action, p, cur, cand = pattern(20)
    out = gate("ips", reward, action, p, cur, cand, NAMES)  # lo = 0.5 - 1.96 * 0.1866 = 0.1343
    assert out.estimate.lo == pytest.approx(0.5 - Z * math.sqrt(220 / (80 * 79)))
    assert out.decision == "promote" and out.promote and not out.support.thin
    assert gate("ips", reward, action, p, cur, cand, NAMES, margin=0.13).promote
    kept = gate("ips", reward, action, p, cur, cand, NAMES, margin=0.14)
    assert kept.decision == "keep" and "does not exceed the margin 0.14" in kept.reason
    # the rule itself: strictly above the margin
    sup = Support(100, 50.0, 50.0, 10, 10, 10, 0, [], 0.5, 2.0, False)
    assert decide(PairedEstimate(0.1, 0.02, 0.18, 0.04, 0.6, 0.5), sup, 0.02)[0] == "keep"
    assert decide(PairedEstimate(0.1, 0.0201, 0.18, 0.04, 0.6, 0.5), sup, 0.02)[0] == "promote"
    assert decide(PairedEstimate(0.1, 0.0, 0.2, 0.05, 0.6, 0.5), sup, 0.0)[0] == "keep"


def test_current_router_as_candidate_is_never_promoted() -> None:
    """Identical target policies: every per-row difference is exactly 0, so the interval is [0, 0] (normal and
    bootstrap alike) and the lower bound never exceeds a margin >= 0."""
    rng = np.random.default_rng(0)
    n, m = 300, 4
    action = rng.integers(0, m, n)
    p = rng.uniform(0.1, 1.0, n)
    reward = rng.random(n)
    policy = np.eye(m)[rng.integers(0, m, n)]
    rhat = rng.random((n, m))
    for est in ("dr", "ips", "snips"):
        for interval in ("normal", "bootstrap"):
            out = gate(est, reward, action, p, policy, policy.copy(), list("wxyz"),
                       reward_hat=rhat if est == "dr" else None, interval=interval, n_boot=200)
            assert (out.estimate.value, out.estimate.lo, out.estimate.hi) == (0.0, 0.0, 0.0)
            assert not out.promote and out.support.n_disagree == 0


def test_bootstrap_interval_is_paired_and_seeded() -> None:
    reward, action, p, cur, cand = pattern(20)
    c, r = paired_terms("ips", reward, action, p, cur, cand)
    a = paired_estimate(c, r, interval="bootstrap", n_boot=2000, seed=3)
    assert a == paired_estimate(c, r, interval="bootstrap", n_boot=2000, seed=3)
    normal = paired_estimate(c, r)
    assert a.value == normal.value and a.lo < 0.5 < a.hi
    assert a.lo == pytest.approx(normal.lo, abs=0.05) and a.hi == pytest.approx(normal.hi, abs=0.05)


def test_below_thirty_rows_there_is_no_interval() -> None:
    reward, action, p, cur, cand = pattern(7)  # 28 rows
    out = gate("dr", reward, action, p, cur, cand, NAMES, reward_hat=np.full((28, 2), 0.5))
    assert out.decision == "undecided" and "only 28 logged rows" in out.reason
    assert math.isnan(out.estimate.lo) and math.isnan(out.estimate.hi)


def test_thin_support() -> None:
    _, action, p, cur, cand = pattern(20)
    # no exploration: the log says every propensity is 1
    det = support_diagnostics(action, np.ones(80), cur, cand, NAMES)
    assert det.thin and det.deterministic_log and "no exploration" in det.reasons[0]
    # the candidate picks an actor the log never holds
    three = np.tile([0.0, 0.0, 1.0], (80, 1))
    sup = support_diagnostics(action, p, np.pad(cur, ((0, 0), (0, 1))), three, ["a", "b", "c"])
    assert sup.unsupported_actors == ["c"] and sup.unsupported_rows == 80
    assert any("never holds" in r for r in sup.reasons)
    # only 3 of the disagreeing rows logged with the candidate's actor: undecided however large the estimate
    action2 = np.zeros(200, dtype=np.intp)
    action2[:3] = 1
    p2 = np.where(action2 == 1, 0.05, 0.95)
    cur2, cand2 = np.tile([1.0, 0.0], (200, 1)), np.tile([0.0, 1.0], (200, 1))
    reward2 = np.where(action2 == 1, 1.0, 0.2)
    out = gate("snips", reward2, action2, p2, cur2, cand2, NAMES)
    assert out.estimate.value > 0.5 and out.decision == "undecided"
    assert out.support.n_disagree_logged_candidate == 3 and "fewer than 5" in out.reason
    # ESS below 30
    assert any("effective sample size" in r for r in out.support.reasons)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -0.01, 1.0, 5.0])
def test_margin_checked(bad: float) -> None:
    with pytest.raises(UsageError, match="margin"):
        check_margin(bad)


def _eps_log(table: RoutingTable, cur: np.ndarray, eps: float, n: int, seed: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A log of n iid queries of ``table`` drawn by the current router's decisions under eps-greedy."""
    rng = np.random.default_rng(seed)
    m = table.n_actors
    rows = rng.integers(0, table.n_queries, n)
    dist = np.full((n, m), eps / m)
    dist[np.arange(n), cur[rows]] += 1 - eps
    action = (dist.cumsum(axis=1) < rng.random(n)[:, None]).sum(axis=1).clip(0, m - 1)
    return rows, action, dist[np.arange(n), action], table.score[rows, action].astype(np.float64)


def test_an_oracle_like_candidate_is_promoted_on_real_data(real_table: Callable[[str], RoutingTable]) -> None:
    """llmrouter: the current router is the best single model (by mean score); the candidate picks the best
    actor of every query (first argmax, as an oracle would). On a 2,000-row eps-greedy log (eps = 0.5) each
    estimator promotes it, and its interval holds the true difference on the logged queries."""
    table = real_table("llmrouter")
    score = table.score.astype(np.float64)
    m = table.n_actors
    cur = np.full(table.n_queries, int(np.nanmean(score, axis=0).argmax()))
    rows, action, p, reward = _eps_log(table, cur, 0.5, 2000, seed=1)
    t_cur, t_cand = np.eye(m)[cur[rows]], np.eye(m)[score[rows].argmax(axis=1)]
    truth = float((score[rows].max(axis=1) - score[rows, cur[rows]]).mean())
    assert truth > 0.15
    rhat, _ = op.ridge_reward_model(np.zeros((2000, 0)), action, reward, m, op.fold_assignment(2000, 5, 0),
                                    min_rows=1)
    for est in ("dr", "ips", "snips"):
        out = gate(est, reward, action, p, t_cur, t_cand, table.actor_names, reward_hat=rhat)
        assert out.decision == "promote", (est, out.reason)
        assert out.estimate.lo < truth < out.estimate.hi


def _bench() -> Any:
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_promote.py"
    spec = importlib.util.spec_from_file_location("bench_promote", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_promote"] = module
    spec.loader.exec_module(module)
    return module


def test_mini_calibration(real_table: Callable[[str], RoutingTable]) -> None:
    """48 simulated deployments on llmrouter (8 per scenario, logs of 20,000 queries, eps = 0.2; the best single
    model as the current router, DR with the per-actor mean): the candidates' true differences are as built, at
    most 1 of the 24 null deployments promotes, and the +5-point candidate is promoted in most."""
    bench = _bench()
    table = bench.complete(real_table("llmrouter"))
    cur = np.full(table.n_queries, int(np.nanmean(table.score, axis=0).argmax()))
    res = bench.run(table, reps=8, sizes=[20000], epsilon=0.2, interval="normal", seed=0, estimators=("dr",),
                    current=cur, features=np.zeros((table.n_queries, 0)))
    truth = res["truth"]
    assert truth["same"] == 0.0 and -0.0005 < truth["equal"] <= 0.0 and truth["worse-1"] == pytest.approx(-0.01,
                                                                                                        abs=2e-4)
    for pts in (1, 2, 5):
        assert truth[f"+{pts}"] == pytest.approx(pts / 100, abs=2e-4)
    row = next(r for r in res["summary"] if r["size"] == 20000)
    assert row["null_n"] == 24 and row["false_promotions"] <= 1
    assert row["power_+5"] >= 0.75
