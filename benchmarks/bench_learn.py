"""Learning while serving (``serve --learn N``), measured on a simulated stream: online regret against the same
router trained offline on the whole training side.

Run:  .venv/bin/python benchmarks/bench_learn.py [--quick] [--seeds 5] [--every 25] [--shared ../shared/data]

For each table (the demo, 3,000 queries; llmrouter from ../shared/data, 5,608 train / 500 test, 9 actors) and
each exploring router (linucb, eps-greedy), per seed:

- the **served** router starts from a warm start of ``--warm`` random training queries (full feedback; ``--warm
  0``: the whole training side, as ``serve --learn`` starts), with the tf-idf encoder fitted on every training text
  (texts are free; outcomes are what is scarce);
- the **stream** is the table's test part in a seeded random order: each query is routed by
  :class:`~routerlab.serve.routing.RoutingService` (the serving policy's seeded draw, as ``routerlab serve``
  does), and the table's score of the drawn actor comes back as feedback to a
  :class:`~routerlab.serve.learn.Learner` with ``every = N``, which refits (training side = the warm start,
  plus every served row with feedback) and swaps the router. Here each refit is waited for before the next
  query (a synchronous stream: what an idle server sees; under load, requests keep the previous router a little
  longer);
- **offline**: the same router trained on the whole training side (full feedback), not learning;
  **frozen**: the warm-start router, not learning.

Reward on a query = the expected table score under the router's acting distribution at that moment (the
policy's mean, not the one drawn outcome: less noise, same expectation). Regret per query = offline minus
online, averaged over the stream, and over its second half (after learning has had time). The table gives the
mean over seeds with a 95% t-interval, and the gain of learning: online minus the frozen warm start.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from routerlab.data.served import FeedbackEntry
from routerlab.data.table import RoutingTable
from routerlab.features.base import Features
from routerlab.features.registry import get_encoder
from routerlab.routers import get_router
from routerlab.serve.feedback_store import ServedFeedback, ServedRow
from routerlab.serve.learn import Learner
from routerlab.serve.routing import RoutingService

REPO = Path(__file__).resolve().parents[1]


def load_tables(shared: Path | None, quick: bool) -> dict[str, RoutingTable]:
    from routerlab.datasets import demo

    tables = {"demo": demo(1500 if quick else 3000, seed=11)}
    base = None if shared is None else shared / "llmrouter" / "data"
    if base is not None and base.is_dir():
        from routerlab import read

        paths = [base / "dcrouter_preprocessed" / "train.json", base / "dcrouter_preprocessed" / "test.json",
                 base / "example_data" / "query_data" / "default_query_train.jsonl",
                 base / "example_data" / "query_data" / "default_query_test.jsonl",
                 base / "example_data" / "llm_candidates" / "default_llm.json"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tables["llmrouter"] = read("routerdc", *map(str, paths))
    return tables


def run_once(table: RoutingTable, spec: str, seed: int, warm: int, every: int) -> dict[str, Any]:
    rng = np.random.default_rng([seed, 7])
    split = table.queries.split.astype(str)
    train_rows = np.flatnonzero(split == "train")
    stream = rng.permutation(np.flatnonzero(split != "train"))
    warm_rows = train_rows if warm <= 0 else np.sort(rng.choice(train_rows, size=min(warm, train_rows.size),
                                                                 replace=False))
    train = table.select_queries(np.isin(np.arange(table.n_queries), train_rows))
    warm_table = table.select_queries(np.isin(np.arange(table.n_queries), warm_rows))
    enc = get_encoder("tfidf")
    enc.fit(train.queries.text)

    def fitted(t: RoutingTable, s: int) -> Any:
        r = get_router(spec, seed=s)
        r.fit(t, Features.of(enc.transform(list(t.queries.text.astype(str))), t.queries, t.actors, enc.spec))
        return r

    offline = fitted(train, seed)
    frozen = fitted(warm_table, seed)
    backends: Any = dict.fromkeys(table.actor_names)  # routing only: no backend is ever called
    service = RoutingService(frozen, enc, table.actors, backends, seed=seed)
    learner = Learner(service, spec, warm_table, None, every, seed=seed)
    online = np.empty(stream.size)
    names = table.actor_names
    at = {a: j for j, a in enumerate(names)}
    score = np.nan_to_num(table.score.astype(np.float64))
    t0 = time.perf_counter()
    for t, i in enumerate(stream):
        text = str(table.queries.text[i])
        p = service.policy(text)
        online[t] = float(p @ score[i])
        d = service.route(text)
        qid = str(table.queries.ids[i])
        row = ServedRow(qid, text, str(table.queries.dataset[i]), d.actor, d.propensity, "routed", "answered")
        learner.feedback(ServedFeedback(row, FeedbackEntry(qid, float(score[i, at[d.actor]]), None, "")))
        learner.wait()
    seconds = time.perf_counter() - t0
    off = _rewards(offline, enc, table, stream)
    fro = _rewards(frozen, enc, table, stream)
    half = stream.size // 2
    return {"online": online.mean(), "offline": off.mean(), "frozen": fro.mean(),
            "regret": (off - online).mean(), "regret_2nd_half": (off[half:] - online[half:]).mean(),
            "frozen_regret": (off - fro).mean(), "gain": (online - fro).mean(),
            "gain_2nd_half": (online[half:] - fro[half:]).mean(), "oracle": score[stream].max(axis=1).mean(),
            "refits": learner.refits, "n": stream.size, "seconds": seconds,
            "refit_s": learner.last_refit_s or 0.0}


def _rewards(router: Any, enc: Any, table: RoutingTable, rows: np.ndarray) -> np.ndarray:
    sub = table.select_queries(np.isin(np.arange(table.n_queries), rows))
    order = np.argsort(np.argsort(rows))  # select_queries keeps table order; put back stream order
    feats = Features.of(enc.transform(list(sub.queries.text.astype(str))), sub.queries, sub.actors, enc.spec)
    policy = router.route(feats).policy
    reward = (policy * np.nan_to_num(sub.score.astype(np.float64))).sum(axis=1)
    return np.asarray(reward[order])


def interval(values: list[float]) -> str:
    from scipy import stats

    v = np.asarray(values, dtype=np.float64)
    m = float(v.mean())
    if v.size < 2:
        return f"{m:+.4f}"
    half = float(stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size))
    return f"{m:+.4f} [{m - half:+.4f}, {m + half:+.4f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="demo 1,500 queries, 3 seeds, llmrouter skipped")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--every", type=int, default=25, help="refit after every N feedback events")
    parser.add_argument("--warm", type=int, default=100,
                        help="warm-start training queries of the served router (0: the whole training side, as "
                             "serve --learn starts)")
    parser.add_argument("--routers", default="linucb,eps-greedy")
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "data")
    args = parser.parse_args()
    seeds = 3 if args.quick else args.seeds
    tables = load_tables(None if args.quick else args.shared, args.quick)
    warm = "the whole training side" if args.warm <= 0 else f"{args.warm} training queries"
    print(f"online regret of serve --learn {args.every} vs the same router trained offline on the whole training "
          f"side; warm start {warm}; {seeds} seeds; mean [95% t-interval]")
    for name, table in tables.items():
        n_train = int((table.queries.split.astype(str) == "train").sum())
        print(f"\n{name}: {n_train} training queries, stream = {table.n_queries - n_train} test queries, "
              f"{table.n_actors} actors")
        for spec in args.routers.split(","):
            runs = [run_once(table, spec, s, args.warm, args.every) for s in range(seeds)]

            def col(key: str, runs: list[dict[str, Any]] = runs) -> list[float]:
                return [float(r[key]) for r in runs]

            print(f"  {spec}: online {np.mean(col('online')):.4f}, offline {np.mean(col('offline')):.4f}, "
                  f"frozen warm start {np.mean(col('frozen')):.4f}, oracle {np.mean(col('oracle')):.4f}; "
                  f"{int(np.mean(col('refits')))} refits, last refit {np.mean(col('refit_s')) * 1e3:.0f} ms, "
                  f"{np.mean(col('seconds')):.1f} s a stream")
            print(f"    regret per query (offline - online):      {interval(col('regret'))}")
            print(f"    regret, second half of the stream:        {interval(col('regret_2nd_half'))}")
            print(f"    regret of the frozen warm start (no learn): {interval(col('frozen_regret'))}")
            print(f"    gain of learning (online - frozen):        {interval(col('gain'))}")
            print(f"    gain of learning, second half:             {interval(col('gain_2nd_half'))}")


if __name__ == "__main__":
    main()
