"""Partial-observability protocols: cold-start and Voyager (T = 5) over the whole router zoo.

Run:  .venv/bin/python benchmarks/bench_partial.py [TABLE_DIR] [--rounds 5] [--n-boot 1000]

TABLE_DIR is a saved table (e.g. the llmrouter table made by ``routerlab import routerdc ...``); without it the
embedded demo benchmark (3,000 queries) is used. Every registered router that applies to the table runs (bandits
included); inapplicable ones are listed as skipped. Printed:

1. Encoding once (tf-idf fitted on the training texts), shared by both protocols, as the CLI does per run.
2. Cold-start: wall-clock of the whole protocol, and per router its fit + test scoring seconds.
3. Voyager: wall-clock of the whole protocol, and per router the sum over rounds of fit + test scoring.
4. Reference: Voyager's act step (a fitted router routes the next chunk and the chosen cells are logged) done as the
   protocol does it, one batched scoring pass per chunk, against a per-query loop (route one query, log its cell),
   as a live deployment or a naive simulator steps through a stream. Same router (knn), same chunk; the two must log
   the same actors (knn is greedy: its act is deterministic).
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from pathlib import Path

import numpy as np


def main() -> None:
    import routerlab
    from routerlab.data.feedback import Feedback
    from routerlab.data.splits import make_split
    from routerlab.datasets import demo
    from routerlab.protocols.full import featurize
    from routerlab.protocols.partial import chunk_positions, cold_start, uniform_log, voyager
    from routerlab.routers import routers
    from routerlab.routers.base import get_router

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("table", nargs="?", type=Path, help="a saved table directory (default: the demo)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n-boot", type=int, default=1000)
    args = ap.parse_args()
    table = routerlab.load(args.table) if args.table else demo()
    zoo = list(routers())
    print(f"table {table.name}: {table.n_queries} queries x {table.n_actors} actors; zoo of {len(zoo)} routers; "
          f"n_boot {args.n_boot}")

    sp = make_split(table, "given", 0)
    train, test = sp.apply(table)
    t0 = time.perf_counter()
    features = featurize(train, test, "tfidf")
    print(f"encoding (tf-idf, once, shared): {time.perf_counter() - t0:.1f} s")

    t0 = time.perf_counter()
    cold = cold_start(table, zoo, features=features, skip_inapplicable=True, n_boot=args.n_boot)
    cold_wall = time.perf_counter() - t0
    t0 = time.perf_counter()
    voy = voyager(table, zoo, rounds=args.rounds, features=features, skip_inapplicable=True, n_boot=args.n_boot)
    voy_wall = time.perf_counter() - t0

    per_round: dict[str, float] = defaultdict(float)
    for rd in voy.extra["rounds"]:
        for r in rd["results"]:
            per_round[r["spec"]] += r["fit_seconds"] + r["score_seconds"]
    print(f"\n{'router':14s} {'cold-start s':>12s} {'voyager s':>10s}   (fit + test scoring; voyager: all rounds)")
    for r in cold.results:
        print(f"{r.spec:14s} {r.fit_seconds + r.score_seconds:12.2f} {per_round.get(r.spec, float('nan')):10.2f}")
    for spec, why in {**cold.extra.get("skipped", {}), **voy.extra.get("skipped", {})}.items():
        print(f"{spec:14s} skipped: {why}")
    print(f"\ncold-start over {len(cold.results)} routers: {cold_wall:.1f} s wall "
          f"(fit + scoring {sum(r.fit_seconds + r.score_seconds for r in cold.results):.1f} s, the rest: "
          "bootstrap, Oracle best-of-N, paired comparison)")
    print(f"voyager T={args.rounds} over {len(voy.results)} routers: {voy_wall:.1f} s wall "
          f"(fit + scoring {sum(per_round.values()):.1f} s; the rest: act on the next chunk, bootstrap per round)")

    # reference: the act step batched (as the protocol does) vs one query at a time
    ftrain = features[0]
    chunks = chunk_positions(train.n_queries, args.rounds, "given", 0)
    router = get_router("knn").fit(uniform_log(train.select_queries(chunks[0]), 0),
                                   ftrain.take(chunks[0]))
    nxt = chunks[1]
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    actor, propensity = router.act(ftrain.take(nxt), rng)
    Feedback.logged(train.select_queries(nxt), actor, propensity)
    batched = time.perf_counter() - t0
    t0 = time.perf_counter()
    loop_actor = np.empty(nxt.size, dtype=np.intp)
    cells = np.empty(nxt.size, dtype=np.float32)
    for i, row in enumerate(nxt):
        a, _ = router.act(ftrain.take(np.array([row])), rng)
        loop_actor[i] = a[0]
        cells[i] = train.score[row, a[0]]
    looped = time.perf_counter() - t0
    assert np.array_equal(actor, loop_actor), "batched and per-query routing disagree"
    print(f"\nreference, knn routes Voyager chunk 2 ({nxt.size} queries) and logs its choices: batched "
          f"{batched * 1000:.0f} ms, per-query loop {looped * 1000:.0f} ms ({looped / batched:.0f}x); same actors")


if __name__ == "__main__":
    main()
