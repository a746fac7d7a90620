"""Calibration of the off-policy promotion gate (``routerlab promote``, docs/promote.md) by simulated deployments.

Run:  .venv/bin/python benchmarks/bench_promote.py [--table llmrouter|routerbench] [--reps 40]
      [--sizes 500,1000,2000,5000,20000] [--epsilon 0.2] [--interval normal|bootstrap] [--json OUT]

From a real table of ../shared/data (llmrouter: 6,108 queries x 9 models; routerbench: 3,178 x 11), the
*population* is every query of the table. The current router is ``knn:k=10`` trained on the table's train split
(its decision on every query of the population, computed once). Candidates are built from it with a controlled
true advantage on the whole population (true value = the mean score over all queries; 1 point = 0.01):

- ``same``: the current router itself (true difference exactly 0);
- ``worse-1``: on queries where the current router's actor scores above the worst actor, it is switched to the
  worst actor, query by query in a seeded random order, until the population's loss reaches 1 point;
- ``equal``: fixes (below) worth 2 points, then switches to the worst actor until the loss cancels the gain
  (true difference at most 0 and within 0.05 points of it: the hardest null, a different router as good);
- ``+1``, ``+2``, ``+5``: on queries where the current router's actor is not the best, it is switched to the best
  actor (the oracle's choice, first argmax) in a seeded random order until the gain reaches 1, 2 or 5 points.

The first three are the nulls (the candidate is truly no better), the last three the alternatives. The exact
true differences are printed. Each deployment draws ``size`` queries from the population (iid, with replacement,
as traffic arrives), logs them with the current router under epsilon-greedy exploration (the current router's
actor with probability 1 - eps + eps/m, every other with eps/m: drawn, with its propensity, the table's score as
the feedback), fits DR's reward model on the log (the gate's own cross-fitted per-actor ridge, on 64-d tf-idf
features of the queries) and runs :func:`routerlab.protocols.promote.gate` for each estimator with margin 0.
Reported per estimator and log size: the false-promotion rate over the null deployments (Wilson 95% interval)
and per null, the power at +1, +2 and +5 points, and how often the gate was undecided.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from routerlab.data.table import RoutingTable
from routerlab.metrics import offpolicy as op
from routerlab.protocols.promote import ESTIMATORS, gate

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
NULLS = ("same", "worse-1", "equal")
ALTERNATIVES = ("+1", "+2", "+5")
SCENARIOS = NULLS + ALTERNATIVES


def load(name: str, data: Path) -> RoutingTable:
    """A real table of ../shared/data, imported with routerlab's own importers."""
    from routerlab import read

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name == "llmrouter":
            base = data / "llmrouter" / "data"
            return read("routerdc", base / "dcrouter_preprocessed" / "train.json",
                        base / "dcrouter_preprocessed" / "test.json",
                        base / "example_data" / "query_data" / "default_query_train.jsonl",
                        base / "example_data" / "query_data" / "default_query_test.jsonl",
                        base / "example_data" / "llm_candidates" / "default_llm.json")
        if name == "routerbench":
            return read("routerbench", data / "routerbench-routerdc" / "datasets" / "routerbench_zs")
    raise SystemExit(f"unknown table {name!r}: llmrouter or routerbench")


def complete(table: RoutingTable) -> RoutingTable:
    """The queries where every actor's score is known (routerbench's arc files leave 28 rows partly empty)."""
    keep = ~np.isnan(table.score).any(axis=1)
    return table if keep.all() else table.select_queries(keep)


def current_and_features(table: RoutingTable, seed: int) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]:
    """knn:k=10 trained on the train split: its actor on every query of the table; and 64-d tf-idf features."""
    from routerlab.data.splits import make_split
    from routerlab.features import encode_pair
    from routerlab.routers.base import get_router

    train, _ = make_split(table, "given", seed).apply(table)
    ftrain, fall = encode_pair(train, table, "tfidf:dim=64")
    router = get_router("knn:k=10", seed=seed)
    router.fit(train, ftrain)
    return np.asarray(router.route(fall).choice, dtype=np.intp), np.asarray(fall.X, dtype=np.float64)


def candidates(score: npt.NDArray[np.float64], cur: npt.NDArray[np.intp], seed: int
               ) -> dict[str, tuple[npt.NDArray[np.intp], float]]:
    """Each scenario's candidate decisions and its exact true difference V(candidate) - V(current) (module
    docstring)."""
    n = score.shape[0]
    rows = np.arange(n)
    best, worst = score.argmax(axis=1), score.argmin(axis=1)
    gain = score[rows, best] - score[rows, cur]
    loss = score[rows, cur] - score[rows, worst]
    order = np.random.default_rng([seed, 7]).permutation(n)

    def switch(base: npt.NDArray[np.intp], to: npt.NDArray[np.intp], amount: npt.NDArray[np.float64],
               target: float, skip: npt.NDArray[np.bool_]) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.bool_]]:
        out = base.copy()
        usable = order[(amount[order] > 0) & ~skip[order]]
        cum = np.cumsum(amount[usable])
        k = int(np.searchsorted(cum, target * n - 1e-9)) + 1  # the first prefix reaching the target
        chosen = usable[:k]
        out[chosen] = to[chosen]
        mask = np.zeros(n, dtype=bool)
        mask[chosen] = True
        return out, mask

    none = np.zeros(n, dtype=bool)
    out: dict[str, tuple[npt.NDArray[np.intp], float]] = {"same": (cur.copy(), 0.0)}
    worse, _ = switch(cur, worst, loss, 0.01, none)
    out["worse-1"] = (worse, 0.0)
    fixed, used = switch(cur, best, gain, 0.02, none)
    g = float(gain[used].sum())
    # then break queries (not the fixed ones) until the loss is at least the gain: the difference is <= 0
    eq, _ = switch(fixed, worst, loss, g / n, used)
    out["equal"] = (eq, 0.0)
    for pts in (1, 2, 5):
        cand, _ = switch(cur, best, gain, pts / 100.0, none)
        out[f"+{pts}"] = (cand, 0.0)
    return {k: (d, float((score[rows, d] - score[rows, cur]).mean())) for k, (d, _) in out.items()}


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval of a proportion k / n."""
    if n == 0:
        return float("nan"), float("nan")
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def run(table: RoutingTable, *, reps: int, sizes: list[int], epsilon: float, interval: str, seed: int,
        estimators: tuple[str, ...] = ESTIMATORS, min_support: int | None = None,
        current: npt.NDArray[np.intp] | None = None, features: npt.NDArray[np.float64] | None = None,
        scenarios: tuple[str, ...] = SCENARIOS) -> dict[str, Any]:
    """Every deployment of every scenario and log size; returns the per-deployment outcomes and the summary.
    ``current`` and ``features`` (for a fast test: a fixed current router and no features, i.e. DR with the
    cross-fitted per-actor mean) replace knn:k=10 and the tf-idf features."""
    t0 = time.perf_counter()
    table = complete(table)
    score = table.score.astype(np.float64)
    n_pop, m = score.shape
    if current is None or features is None:
        cur, x = current_and_features(table, seed)
    else:
        cur, x = np.asarray(current, dtype=np.intp), np.asarray(features, dtype=np.float64)
    cands = candidates(score, cur, seed)
    names = table.actor_names
    eye = np.eye(m)
    records: list[dict[str, Any]] = []
    extra = {} if min_support is None else {"min_support": min_support}
    for size in sizes:
        for scenario in scenarios:
            cand, truth = cands[scenario]
            for r in range(reps):
                rng = np.random.default_rng([seed, size, SCENARIOS.index(scenario), r])
                rows = rng.integers(0, n_pop, size=size)  # iid traffic from the population
                c = cur[rows]
                dist = np.full((size, m), epsilon / m)
                dist[np.arange(size), c] += 1.0 - epsilon
                u = rng.random(size)
                action = np.minimum((dist.cumsum(axis=1) < u[:, None]).sum(axis=1), m - 1).astype(np.intp)
                p = dist[np.arange(size), action]
                reward = score[rows, action]
                t_cur, t_cand = eye[c], eye[cand[rows]]
                rhat = None
                if "dr" in estimators:
                    fold = op.fold_assignment(size, 5, int(rng.integers(2**31)))
                    rhat, _ = op.ridge_reward_model(x[rows], action, reward, m, fold, alpha=1.0, min_rows=10)
                for est in estimators:
                    out = gate(est, reward, action, p, t_cur, t_cand, names, reward_hat=rhat if est == "dr" else None,
                               interval=interval, n_boot=1000, seed=r, **extra)
                    e = out.estimate
                    records.append({"size": size, "scenario": scenario, "truth": truth, "rep": r, "estimator": est,
                                    "decision": out.decision, "value": e.value, "lo": e.lo, "hi": e.hi,
                                    "covered": bool(e.lo <= truth <= e.hi) if math.isfinite(e.lo) else None,
                                    "lo_above_truth": bool(e.lo > truth) if math.isfinite(e.lo) else None,
                                    "n_disagree_logged_candidate": out.support.n_disagree_logged_candidate})
    summary = summarise(records, sizes, estimators)
    return {"table": table.name, "population": n_pop, "actors": m,
            "current": "knn:k=10" if current is None else "given", "epsilon": epsilon,
            "interval": interval, "reps": reps, "sizes": sizes, "seed": seed,
            "deployments": len(records) // len(estimators),
            "truth": {k: v for k, (_, v) in cands.items()},
            "disagree_share": {k: float((d != cur).mean()) for k, (d, _) in cands.items()},
            "summary": summary, "seconds": round(time.perf_counter() - t0, 1), "records": records}


def _share(rs: list[dict[str, Any]]) -> float:
    """The share of deployments that promoted (NaN for none)."""
    return sum(r["decision"] == "promote" for r in rs) / len(rs) if rs else float("nan")


def summarise(records: list[dict[str, Any]], sizes: list[int], estimators: tuple[str, ...]) -> list[dict[str, Any]]:
    """Per estimator and log size (and over all sizes): false promotions among the nulls with a Wilson interval,
    power per alternative, undecided share, and the interval's coverage of the truth where it has one."""
    out = []
    for est in estimators:
        for size in [*sizes, None]:
            rs = [r for r in records if r["estimator"] == est and (size is None or r["size"] == size)]
            nulls = [r for r in rs if r["scenario"] in NULLS]
            k = sum(r["decision"] == "promote" for r in nulls)
            row: dict[str, Any] = {"estimator": est, "size": size if size is not None else "all",
                                   "null_n": len(nulls), "false_promotions": k,
                                   "false_promotion_rate": k / len(nulls) if nulls else float("nan"),
                                   "wilson": list(wilson(k, len(nulls)))}
            for sc in NULLS:
                sub = [r for r in nulls if r["scenario"] == sc]
                row[f"fp_{sc}"] = _share(sub)
            for sc in ALTERNATIVES:
                sub = [r for r in rs if r["scenario"] == sc]
                row[f"power_{sc}"] = _share(sub)
            row["undecided"] = sum(r["decision"] == "undecided" for r in rs) / max(len(rs), 1)
            cov = [r["covered"] for r in rs if r["covered"] is not None]
            row["coverage"] = sum(cov) / len(cov) if cov else float("nan")
            above = [r["lo_above_truth"] for r in rs if r["lo_above_truth"] is not None]
            row["lower_bound_above_truth"] = sum(above) / len(above) if above else float("nan")
            out.append(row)
    return out


def table_text(res: dict[str, Any]) -> str:
    lines = [f"{res['table']}: population {res['population']} queries x {res['actors']} actors; current "
             f"{res['current']}; eps-greedy logging eps={res['epsilon']}; interval {res['interval']}; "
             f"{res['deployments']} deployments ({res['reps']} per scenario and size); {res['seconds']} s",
             "true differences (points): " + ", ".join(f"{k} {100 * v:+.2f}" for k, v in res["truth"].items()),
             "share of queries where the candidate differs: "
             + ", ".join(f"{k} {100 * v:.1f}%" for k, v in res["disagree_share"].items()),
             "",
             "| estimator | log size | false promotions (nulls) | rate [Wilson 95%] | same / worse-1 / equal "
             "| power +1 | power +2 | power +5 | undecided | CI coverage | lower bound > truth |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in res["summary"]:
        lo, hi = r["wilson"]
        lines.append(f"| {r['estimator']} | {r['size']} | {r['false_promotions']}/{r['null_n']} | "
                     f"{100 * r['false_promotion_rate']:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] | "
                     + " / ".join(f"{100 * r['fp_' + sc]:.1f}%" for sc in NULLS) + " | "
                     f"{100 * r['power_+1']:.0f}% | {100 * r['power_+2']:.0f}% | {100 * r['power_+5']:.0f}% | "
                     f"{100 * r['undecided']:.0f}% | {100 * r['coverage']:.0f}% | "
                     f"{100 * r['lower_bound_above_truth']:.1f}% |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--table", default="llmrouter", choices=["llmrouter", "routerbench"])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--sizes", default="500,1000,2000,5000,20000")
    ap.add_argument("--epsilon", type=float, default=0.2)
    ap.add_argument("--interval", default="normal", choices=["normal", "bootstrap"])
    ap.add_argument("--min-support", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--estimators", default=",".join(ESTIMATORS))
    ap.add_argument("--scenarios", default=",".join(SCENARIOS), help="a subset of " + ", ".join(SCENARIOS))
    ap.add_argument("--json", type=Path, default=None, help="write the summary (and every deployment) here")
    args = ap.parse_args(argv)
    if args.reps < 1 or not 0 < args.epsilon <= 1:
        ap.error("--reps must be >= 1 and --epsilon in (0, 1]")
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    scenarios = tuple(s.strip() for s in args.scenarios.split(",") if s.strip())
    if not scenarios or any(s not in SCENARIOS for s in scenarios):
        ap.error(f"--scenarios: a subset of {', '.join(SCENARIOS)}")
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        res = run(load(args.table, args.data), reps=args.reps, sizes=sizes, epsilon=args.epsilon,
                  interval=args.interval, seed=args.seed, min_support=args.min_support, scenarios=scenarios,
                  estimators=tuple(e.strip() for e in args.estimators.split(",")))
    print(table_text(res))
    if args.json is not None:
        args.json.write_text(json.dumps(res, indent=1, default=float) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
