"""Router benchmarks: the whole zoo on the llmrouter table (cold and warm), and KNN at RouterEval scale.

Run:  .venv/bin/python benchmarks/bench_routers.py [--shared ../shared/data] [--quick]

1. Zoo: ``routerlab evaluate`` with every registered router that applies to the table, in a fresh
   process with an empty feature cache (cold), then again in a fresh process with the cache filled
   (warm). Targets on the 2-core machine: cold < 90 s, warm < 20 s.
2. KNN: 36,000 test queries against 30,000 training queries (d = 384, 11 actors, k = 5), routerlab's
   blocked matrix-product search against a per-query loop as RouterEval's and EmbedLLM's scripts do
   it. The loop runs on a sample of test queries and is extrapolated (it would take minutes); the
   two are checked to give the same neighbour-mean scores on that sample.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def _llmrouter_table(shared: Path, out: Path) -> Path:
    base = shared / "llmrouter" / "data"
    paths = [base / "dcrouter_preprocessed" / "train.json", base / "dcrouter_preprocessed" / "test.json",
             base / "example_data" / "query_data" / "default_query_train.jsonl",
             base / "example_data" / "query_data" / "default_query_test.jsonl",
             base / "example_data" / "llm_candidates" / "default_llm.json"]
    subprocess.run([sys.executable, "-m", "routerlab", "import", "routerdc", *map(str, paths), "-o", str(out)],
                   check=True, capture_output=True)
    return out


def _zoo() -> str:
    from routerlab.routers import routers

    skip = {"fastest"}  # the llmrouter table has no latency, nor TTFT/ITL, for it
    return ",".join(n for n in routers() if n not in skip)


def bench_zoo(shared: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        table = _llmrouter_table(shared, Path(tmp) / "llmrouter")
        env = {**os.environ, "ROUTERLAB_CACHE_DIR": str(Path(tmp) / "cache")}
        cmd = [sys.executable, "-m", "routerlab", "evaluate", str(table), "--routers", _zoo(), "--json"]
        times = {}
        for phase in ("cold", "warm"):
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, env=env)
            times[phase] = time.perf_counter() - t0
        n = len(_zoo().split(","))
        print(f"zoo of {n} routers on llmrouter (5,608 train / 500 test), whole CLI process incl. imports:")
        print(f"  cold {times['cold']:6.1f} s  (target < 90 s)")
        print(f"  warm {times['warm']:6.1f} s  (target < 20 s)   cold/warm {times['cold'] / times['warm']:.1f}x")


def _per_query_knn(train_x: np.ndarray, train_s: np.ndarray, test_x: np.ndarray, k: int) -> np.ndarray:
    """The naive reference: one query at a time, full distance vector, partial sort, mean of neighbours."""
    out = np.empty((test_x.shape[0], train_s.shape[1]))
    for i, q in enumerate(test_x):
        sims = train_x @ q
        nn = np.argpartition(-sims, k)[:k]
        out[i] = train_s[nn].mean(axis=0)
    return out


def bench_knn(n_train: int, n_test: int, d: int, m: int, sample: int) -> None:
    from routerlab.data.table import RoutingTable
    from routerlab.features.base import Features
    from routerlab.routers import get_router

    rng = np.random.default_rng(0)
    centers = rng.normal(size=(20, d))
    def vecs(n: int) -> np.ndarray:
        x = centers[rng.integers(0, 20, n)] + 0.7 * rng.normal(size=(n, d))
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    tx, qx = vecs(n_train), vecs(n_test)
    ts = (rng.random((n_train, m)) < 0.5).astype(np.float32)
    train = RoutingTable.from_arrays(ts, actors=[f"a{j}" for j in range(m)])
    test = RoutingTable.from_arrays(np.zeros((n_test, m), np.float32), actors=train.actor_names)
    router = get_router("knn:k=5").fit(train, Features(tx, train, "bench"))
    t0 = time.perf_counter()
    fast = router.scores(Features(qx, test, "bench"))
    t_fast = time.perf_counter() - t0
    t0 = time.perf_counter()
    slow = _per_query_knn(tx, ts, qx[:sample], 5)
    t_slow = (time.perf_counter() - t0) * n_test / sample
    # knn breaks ties between actors by a tiny train-mean term; compare the neighbour means themselves
    gap = float(np.abs(fast[:sample] - slow).max())
    print(f"knn k=5: {n_test:,} test x {n_train:,} train, d={d}, m={m}:")
    print(f"  routerlab blocked  {t_fast:7.2f} s")
    print(f"  per-query loop     {t_slow:7.2f} s  (extrapolated from {sample:,} queries)")
    print(f"  ratio              {t_slow / t_fast:7.1f}x   max |score difference| on the sample: {gap:.1e}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--quick", action="store_true", help="small KNN size, skip the zoo")
    args = ap.parse_args()
    if args.quick:
        bench_knn(3000, 2000, 128, 11, 500)
        return
    bench_zoo(args.shared)
    bench_knn(30_000, 36_000, 384, 11, 2000)


if __name__ == "__main__":
    main()
