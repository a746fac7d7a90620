"""Bandit router benchmarks (issue 9): vectorised fit/score against a naive per-query loop, in the same run.

Run:  .venv/bin/python benchmarks/bench_bandits.py [--quick]

Synthetic data at llmrouter scale (5,608 training queries, 9 actors, 0/1 scores drawn from a per-cluster
accuracy, 256-d inputs like the default tf-idf; a second pass with 5,000-d inputs to show the cost of the
``dim`` projection). For each bandit: fit and score seconds under full and under uniform-logged feedback,
scoring 5,600 queries (a Voyager round routes a chunk of the train split). Then the naive references,
each checked to give the same numbers as the router:

1. ``linucb`` (and so ``eps-greedy`` and ``thompson``, which share its ridge): the per-actor statistics and
   their batched inverse against the textbook online algorithm, one Sherman-Morrison update of A_a^-1 and b_a
   per observed cell, query by query, on the same context; scores against a per-query, per-actor loop of
   mu + theta^T z + alpha sqrt(z^T A^-1 z).
2. ``thompson`` distribution: a per-query loop over the same posterior draws (sampled rewards, winner counts).
3. ``barp``: one training epoch with ``batch_size=1`` (one update per query: the per-query REINFORCE loop)
   against ``batch_size=256`` (minibatches, the default).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from routerlab.data.feedback import Feedback
from routerlab.data.table import Actors, Queries, RoutingTable
from routerlab.features.base import Features
from routerlab.routers import get_router
from routerlab.routers.bandits import LinUCB, Thompson, _symmetric_inverse, ridge_statistics

BANDITS = ["linucb", "thompson", "eps-greedy", "barp"]


def synthetic(n: int, d: int, m: int = 9, seed: int = 0) -> tuple[RoutingTable, Features]:
    """n queries in 12 clusters (Gaussian inputs around cluster centres), 0/1 scores with a per-cluster,
    per-actor accuracy."""
    rng = np.random.default_rng(seed)
    cluster = rng.integers(0, 12, n)
    centres = rng.normal(size=(12, d))
    X = (centres[cluster] + rng.normal(size=(n, d))).astype(np.float32)
    acc = rng.uniform(0.1, 0.9, size=(12, m))
    score = (rng.random((n, m)) < acc[cluster]).astype(np.float32)
    table = RoutingTable(queries=Queries.create([f"q{i}" for i in range(n)]),
                         actors=Actors.create([f"a{j}" for j in range(m)]), score=score)
    return table, Features(X, table, "synthetic")


def uniform_logs(table: RoutingTable, seed: int = 0) -> Feedback:
    n, m = table.n_queries, table.n_actors
    return Feedback.logged(table, np.random.default_rng(seed).integers(0, m, n), np.full(n, 1.0 / m))


def timed(fn: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def bench_fit_score(n: int, d: int) -> None:
    table, features = synthetic(n, d)
    logs = uniform_logs(table)
    print(f"fit / score seconds, {n} x {d} inputs, {table.n_actors} actors (scoring the same {n} queries):")
    for name in BANDITS:
        row = []
        for kind, train in (("full", table), ("logged", logs)):
            router = get_router(name)
            _, fit_s = timed(lambda r=router, t=train: r.fit(t, features))
            _, score_s = timed(lambda r=router: r.route(features))
            row.append(f"{kind} fit {fit_s:6.2f} s  score {score_s:5.2f} s")
        print(f"  {name:11s} " + "   ".join(row))


def naive_linucb(Z: np.ndarray, R: np.ndarray, l2: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Textbook disjoint LinUCB fit on the context ``Z``: A_a^-1 by one Sherman-Morrison update per observed
    cell, query by query, and b_a accumulated alongside (rewards offset by their mean, as the router does).
    Returns (A^-1 (m, k, k), theta (m, k), mu)."""
    m, k = R.shape[1], Z.shape[1]
    mu = float(np.nanmean(R))
    inv = np.stack([np.eye(k) / l2 for _ in range(m)])
    b = np.zeros((m, k))
    for i in range(Z.shape[0]):
        z = Z[i]
        for a in range(m):
            if np.isnan(R[i, a]):
                continue
            u = inv[a] @ z
            inv[a] -= np.outer(u, u) / (1.0 + z @ u)
            b[a] += (R[i, a] - mu) * z
    return inv, np.einsum("aij,aj->ai", inv, b), mu


def naive_ucb(inv: np.ndarray, theta: np.ndarray, mu: float, alpha: float, Zq: np.ndarray) -> np.ndarray:
    """Per-query, per-actor loop: mu + theta_a^T z + alpha sqrt(z^T A_a^-1 z)."""
    out = np.empty((Zq.shape[0], theta.shape[0]))
    for q in range(Zq.shape[0]):
        z = Zq[q]
        for a in range(theta.shape[0]):
            out[q, a] = mu + theta[a] @ z + alpha * np.sqrt(z @ inv[a] @ z)
    return out


def naive_thompson(router: Thompson, Zq: np.ndarray) -> np.ndarray:
    """Per-query loop over the router's own posterior draws."""
    m, S = len(router.actor_names), int(router.params["draws"])
    out = np.empty((Zq.shape[0], m))
    for q in range(Zq.shape[0]):
        winner = (Zq[q] @ router._samples).reshape(S, m).argmax(axis=1)
        out[q] = (np.bincount(winner, minlength=m) + 1.0 / m) / (S + 1.0)
    return out


def bench_naive(n: int, d: int) -> None:
    table, features = synthetic(n, d)
    print(f"vectorised vs naive per-query loop ({n} x {d}, {table.n_actors} actors; same numbers checked):")
    for kind, train in (("full", table), ("logged", uniform_logs(table))):
        router = get_router("linucb").fit(train, features)
        assert isinstance(router, LinUCB)
        Z = router._context.transform(features.X)
        R = np.asarray((train.table if isinstance(train, Feedback) else train).score, dtype=np.float64)
        l2, alpha = float(router.params["l2"]), float(router.params["alpha"])
        (A, _, _), fit_s = timed(lambda z=Z, r=R, c=l2: ridge_statistics(z, r, c))
        inv, inv_s = timed(lambda a=A: _symmetric_inverse(a))
        scores, score_s = timed(lambda r=router: r.scores(features))
        (ninv, ntheta, nmu), nfit = timed(lambda z=Z, r=R, c=l2: naive_linucb(z, r, c))
        ref, nscore = timed(lambda i=ninv, t=ntheta, u=nmu, c=alpha, z=Z: naive_ucb(i, t, u, c, z))
        np.testing.assert_allclose(inv, ninv, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(scores, ref, rtol=1e-6, atol=1e-8)
        vfit = fit_s + inv_s
        print(f"  linucb {kind:6s} statistics + inverse {vfit:7.4f} s vs Sherman-Morrison loop {nfit:7.3f} s "
              f"({nfit / vfit:5.0f}x)   scores {score_s:6.3f} s vs loop {nscore:6.3f} s ({nscore / score_s:4.0f}x)")
    thompson = get_router("thompson").fit(uniform_logs(table), features)
    assert isinstance(thompson, Thompson)
    dist, vec_s = timed(lambda: thompson.distribution(features))
    ref_t, naive_s = timed(lambda: naive_thompson(thompson, thompson._context.transform(features.X)))
    np.testing.assert_allclose(dist, ref_t, rtol=0, atol=1e-12)
    print(f"  thompson distribution ({thompson.params['draws']} draws) {vec_s:6.3f} s vs per-query loop "
          f"{naive_s:6.3f} s ({naive_s / vec_s:4.0f}x)")
    per_epoch = {}
    for batch in (256, 1):
        barp = get_router(f"barp:batch_size={batch},epochs=1,holdout=0")
        _, per_epoch[batch] = timed(lambda r=barp: r.fit(uniform_logs(table), features))
    print(f"  barp one epoch (logged, incl. the context fit): batch 256 {per_epoch[256]:6.3f} s vs batch 1 "
          f"(one update per query) {per_epoch[1]:6.2f} s ({per_epoch[1] / per_epoch[256]:4.0f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    args = parser.parse_args()
    n = 1200 if args.quick else 5608
    table, features = synthetic(200, 64)
    for name in BANDITS:  # warm-up: imports and threadpoolctl's first look at the BLAS libraries
        get_router(name).fit(table, features).route(features)
    bench_fit_score(n, 256)
    bench_fit_score(n, 5000 if not args.quick else 1500)
    with threadpool_limits(limits=1, user_api="blas"):  # as the routers run (bandits.one_blas_thread), both sides
        bench_naive(n, 256)


if __name__ == "__main__":
    main()
