"""Benchmark exact HSE (SPEC 2): the popcount route, the BLAS route, a naive reference; the coreset.

    .venv/bin/python benchmarks/bench_hse.py            # every size (the naive 8,500 x 3,600 takes minutes)
    .venv/bin/python benchmarks/bench_hse.py --quick    # small sizes only
    .venv/bin/python benchmarks/bench_hse.py --only 8500x36000 --skip-compile

Random binary behaviour matrices (float32, P(1) = 0.5, seeded) of N actors x L items, timed end to
end as ``routerlab.society.hse(B)`` (input checks, exact Gram, distances, Prim MST, merge walk):

* popcount: with numba (the ``fast`` extra): bit-packed AND + popcount Gram, compiled Prim (N >= 128);
* BLAS: what routerlab does without numba: packed float32 BLAS Gram, NumPy Prim;
* naive: scipy's ``pdist(B, "cosine")`` + ``linkage(d, "single")`` + a plain merge walk.

Timings are wall-clock seconds: best and median of ``--repeat`` runs (one run for the slow naive
cases); the split is one more popcount run. The popcount and BLAS HSE must be equal bit for bit.
Then numba's first-call cost: two fresh processes sharing an empty temporary ``NUMBA_CACHE_DIR``
(cold: compiles and writes the cache; warm: loads it). The greedy coreset is timed given the distances.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def naive_hse(B: np.ndarray) -> float:
    from scipy.cluster.hierarchy import linkage
    from scipy.spatial.distance import pdist

    n = B.shape[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        d = np.nan_to_num(pdist(B, "cosine"), nan=1.0)  # zero-norm rule: d = 1
    Z = linkage(d, "single")
    sizes = {i: 1 for i in range(n)}
    s_log = 0.0  # sum of c log2 c over the clusters
    total, prev = 0.0, 0.0
    for t, (a, b, h, _) in enumerate(Z):
        total += (math.log2(n) - s_log / n) * (h - prev)
        prev = h
        ca, cb = sizes.pop(int(a)), sizes.pop(int(b))
        s_log += (ca + cb) * math.log2(ca + cb) - (ca * math.log2(ca) if ca > 1 else 0.0) - (
            cb * math.log2(cb) if cb > 1 else 0.0)
        sizes[n + t] = ca + cb
    return total


CPU: dict[int, float] = {}  # id(times list) -> CPU seconds (all threads) of its fastest run


def timed(fn: Callable[[], Any], repeat: int) -> tuple[list[float], Any]:
    times, out, cpu = [], None, []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    CPU[id(times)] = cpu[int(np.argmin(times))]
    return times, out


def fmt(times: list[float] | None, cpu: bool = False) -> str:
    if not times:
        return f"{'-':>17s}" + (f" {'-':>6s}" if cpu else "")
    out = f"{min(times):8.3f} {statistics.median(times):8.3f}"
    return out + (f" {CPU[id(times)]:6.2f}" if cpu else "")


_FIRST_CALL = """
import json, sys, time
t0 = time.perf_counter()
import numba
t1 = time.perf_counter()
sys.path.insert(0, {bench!r})
from bench_hse import matrix
from routerlab.society import hse
B = matrix(256, 36_000, 0)
t2 = time.perf_counter()
hse(B)
t3 = time.perf_counter()
hse(B)
t4 = time.perf_counter()
print(json.dumps({{"import_numba": t1 - t0, "first": t3 - t2, "second": t4 - t3}}))
"""


def first_call() -> None:
    """numba's first-call cost in fresh processes: cold (empty cache dir) and warm (the cache it wrote)."""
    print("first call of hse on 256 x 36,000 in a fresh process (popcount route; NUMBA_CACHE_DIR = an "
          "empty temporary directory, then the same one)")
    code = _FIRST_CALL.format(bench=os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        for label in ("cold (compiles, writes cache)", "warm (loads cache)"):
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                 check=True).stdout
            total = time.perf_counter() - t0
            r = json.loads(out.strip().splitlines()[-1])
            print(f"  {label:30s}: import numba {r['import_numba']:.2f} s, first hse {r['first']:.2f} s, "
                  f"second hse {r['second']:.3f} s (process {total:.1f} s)", flush=True)
    print()


def matrix(n: int, L: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    B = np.empty((n, L), dtype=np.float32)
    for r0 in range(0, n, 500):  # in blocks: no float64 temporary of the whole matrix
        B[r0:r0 + 500] = rng.random((min(500, n - r0), L), dtype=np.float32) < 0.5
    return B


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="runs per routerlab timing (default 3)")
    ap.add_argument("--naive-repeat", type=int, default=1, help="runs per naive timing (default 1)")
    ap.add_argument("--quick", action="store_true", help="only 112 x 36,000 and 1,000 x 36,000")
    ap.add_argument("--skip-naive-large", action="store_true", help="skip the naive 8,500 x 3,600 run")
    ap.add_argument("--only", default=None, help="comma-separated cases to run, e.g. 8500x36000")
    ap.add_argument("--skip-blas", action="store_true", help="time only the popcount route")
    ap.add_argument("--skip-compile", action="store_true", help="skip the cold/warm first-call timing")
    args = ap.parse_args(argv)

    from routerlab.society import Society, _fast, hse, pairwise_distances
    from routerlab.society.behaviour import clean
    from routerlab.society.coresets import greedy_coreset
    from routerlab.society.entropy import hse_from_linkage, linkage_matrix

    fast = _fast.available()
    if not fast:
        print("numba is not installed: only the BLAS route is timed (pip install 'routerlab[fast]')")
    elif not args.skip_compile:
        first_call()
        hse(matrix(256, 36_000, 0))  # this process's own compile / cache load, outside the timings

    cases = [(112, 36_000, True), (1_000, 36_000, True), (8_500, 3_600, not args.skip_naive_large),
             (8_500, 36_000, False)]
    if args.quick:
        cases = cases[:2]
    if args.only:
        wanted = {tuple(int(v) for v in c.lower().split("x")) for c in args.only.split(",")}
        cases = [c for c in cases if (c[0], c[1]) in wanted]
    print(f"exact HSE (cosine, single linkage) on random binary B; seconds, best and median of "
          f"{args.repeat} (naive: {args.naive_repeat}); load average {os.getloadavg()[0]:.1f} at start")
    print("wall-clock seconds, best and median; cpu: CPU seconds of the best run, all threads (the machine "
          "is shared: when the load average is above ~1, wall time includes waiting for a core)")
    print(f"{'N x L':>16s} | {'popcount best med   cpu':>24s} | {'BLAS best    med    cpu':>24s} | "
          f"{'naive best   med':>17s} | {'BLAS/pc':>7s} | {'naive/pc':>8s} | {'same':>4s} | {'|dnaive|':>8s} | "
          f"split (first route): checks + Gram + MST (forms distances) + walk")
    coreset_inputs: dict[int, Any] = {}
    for n, L, do_naive in cases:
        B = matrix(n, L, seed=n + L)
        pc_times, value = timed(lambda B=B: hse(B, gram="popcount"), args.repeat) if fast else (None, None)
        bl_times, blas_value = (None, None)
        if not fast or not args.skip_blas:
            with _fast.disabled():
                bl_times, blas_value = timed(lambda B=B: hse(B), args.repeat)
        t0 = time.perf_counter()
        _, _, binary = clean(Society(B, [""] * n))
        t1 = time.perf_counter()
        dist = pairwise_distances(B, binary=binary, gram="popcount" if fast else "blas")
        t2 = time.perf_counter()
        Z = linkage_matrix(dist)
        t3 = time.perf_counter()
        hse_from_linkage(Z, n)
        t4 = time.perf_counter()
        nv_times, ref = (timed(lambda B=B: naive_hse(B), args.naive_repeat) if do_naive else (None, None))
        first = pc_times or bl_times
        assert first is not None
        mine = value if value is not None else blas_value
        speedup = f"{min(bl_times) / min(pc_times):7.1f}" if pc_times and bl_times else f"{'-':>7s}"
        ratio = f"{min(nv_times) / min(first):8.1f}" if nv_times else f"{'-':>8s}"
        same = "-" if value is None or blas_value is None else ("yes" if value == blas_value else "NO")
        diff = f"{abs(mine - ref):8.1e}" if ref is not None else f"{'-':>8s}"
        print(f"{n:>6,d} x {L:>7,d} | {fmt(pc_times, True):>24s} | {fmt(bl_times, True):>24s} | "
              f"{fmt(nv_times):>17s} | "
              f"{speedup} | {ratio} | {same:>4s} | {diff} | "
              f"{t1 - t0:.2f} + {t2 - t1:.2f} + {t3 - t2:.2f} + {t4 - t3:.3f}", flush=True)
        if n in (1_000, 8_500) and L == 36_000:
            coreset_inputs[n] = dist
        del B
    print()
    print("greedy max-HSE coreset to size 10, given the distances (includes the full society's HSE)")
    for n, dist in sorted(coreset_inputs.items()):
        times, cs = timed(lambda dist=dist: greedy_coreset(dist, 10, max_size=10, stop_fraction=None),
                          args.repeat)
        print(f"{n:>6,d} actors  | {fmt(times):>19s} | HSE of the 10: {cs.curve[-1].hse:.4f} "
              f"(normalised {cs.curve[-1].hse_normalized:.4f})", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end (2 cores: above ~0.5 others share them)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
