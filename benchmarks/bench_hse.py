"""Benchmark exact HSE (SPEC 2): the popcount route, the BLAS route, a naive reference; the coreset.

    .venv/bin/python benchmarks/bench_hse.py            # every size (the naive 8,500 x 3,600 takes minutes)
    .venv/bin/python benchmarks/bench_hse.py --quick    # small sizes only
    .venv/bin/python benchmarks/bench_hse.py --only 8500x36000 --skip-compile
    .venv/bin/python benchmarks/bench_hse.py --only-first-call --first-call 8500x36000 --processes 5

Random binary behaviour matrices (float32, P(1) = 0.5, seeded) of N actors x L items, timed end to
end as ``routerlab.society.hse(B)`` (input checks, exact Gram, distances, Prim MST, merge walk):

* popcount: with numba (a core dependency): bit-packed AND + popcount Gram, compiled Prim (N >= 128);
* BLAS: the fallback where numba does not import: packed float32 BLAS Gram, NumPy Prim;
* naive: scipy's ``pdist(B, "cosine")`` + ``linkage(d, "single")`` + a plain merge walk.

Timings are wall-clock seconds: best and median of ``--repeat`` runs (one run for the slow naive
cases); the split is one more popcount run. The popcount and BLAS HSE must be equal bit for bit.
First (``--first-call``), the first ``hse(B)`` of fresh processes against their warm calls: popcount
with an empty temporary ``NUMBA_CACHE_DIR`` (the first process compiles, the next ones load the disk
cache), and at 8,500 x 36,000 the BLAS fallback too (the ratio of the warm times). The greedy coreset is
timed given the distances.
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


_FRESH = """
import contextlib, json, sys, time
t0 = time.perf_counter()
sys.path.insert(0, {bench!r})
from bench_hse import matrix
import numpy as np
import routerlab.society as rs
from routerlab.society import _fast
t1 = time.perf_counter()
B = matrix({n}, {L}, {n} + {L})
if {route!r} == "table":  # a routing table's queries x actors scores, C-contiguous as stored: hse transposes
    from routerlab.data.table import RoutingTable
    B = RoutingTable.from_arrays(np.ascontiguousarray(B.T), actors=[f"a{{i}}" for i in range({n})])
with _fast.disabled() if {route!r} == "blas" else contextlib.nullcontext():
    t2, c2 = time.perf_counter(), time.process_time()
    value = rs.hse(B, split=None)
    t3, c3 = time.perf_counter(), time.process_time()
    warm, cpu = [], []
    for _ in range({repeat}):
        t4, c4 = time.perf_counter(), time.process_time()
        rs.hse(B, split=None)
        warm.append(time.perf_counter() - t4)
        cpu.append(time.process_time() - c4)
print(json.dumps({{"import": t1 - t0, "first": t3 - t2, "first_cpu": c3 - c2, "warm": warm, "warm_cpu": cpu,
                   "hse": value.hex(), "numba": "numba" in sys.modules}}))
"""


def fresh(n: int, L: int, route: str, repeat: int, env: dict[str, str]) -> dict[str, Any]:
    """``hse(B)`` timed in a new Python process: its first call, then ``repeat`` warm calls."""
    code = _FRESH.format(bench=os.path.dirname(os.path.abspath(__file__)), n=n, L=L, route=route, repeat=repeat)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def first_call(n: int, L: int, processes: int, repeat: int, blas: bool) -> None:
    """The first ``hse(B)`` of a fresh process against its warm calls, at N x L.

    popcount: numba's disk cache in an empty temporary ``NUMBA_CACHE_DIR`` (the first process compiles
    and writes it; the next ones load it); table: ``hse(table)`` on the same scores as a routing table
    (queries x actors), which transposes them first; BLAS:
    ``_fast.disabled()``, the route without numba. The first call's extra cost is its time less the
    median warm call (numba's import, its target set-up and the kernels' load)."""
    print(f"first call of hse(B) in a fresh process, B = {n:,d} x {L:,d} random 0/1 float32 (actors x items, "
          f"as hse(table) builds it); warm = {repeat} more calls in that process; load average "
          f"{os.getloadavg()[0]:.1f}")
    print("wall-clock seconds (cpu: CPU seconds, all threads: steadier than wall time on a shared machine); "
          "first-warm: the first call less the median warm call")
    print(f"{'route / process':>34s} | {'first':>6s} {'cpu':>6s} | {'warm best  med   cpu':>20s} | "
          f"{'first-warm   cpu':>16s} | {'numba':>5s} | HSE")
    warm_best: dict[str, float] = {}
    values: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        runs = [("popcount", "cold cache (compiles)")] + [("popcount", f"disk cache, process {i + 1}")
                                                         for i in range(processes)]
        runs += [("table", f"disk cache, process {i + 1}") for i in range(processes)]
        if blas:
            runs += [("blas", f"process {i + 1}") for i in range(max(1, processes // 2))]
        extra: dict[str, list[tuple[float, float]]] = {}
        for route, label in runs:
            r = fresh(n, L, route, 1 if route == "blas" else repeat, env)
            med, med_cpu = statistics.median(r["warm"]), statistics.median(r["warm_cpu"])
            warm_best[route] = min(warm_best.get(route, math.inf), min(r["warm"]))
            values.setdefault(route, r["hse"])
            assert values[route] == r["hse"], "the HSE differs between processes"
            if "disk" in label:
                extra.setdefault(route, []).append((r["first"] - med, r["first_cpu"] - med_cpu))
            print(f"{route + ': ' + label:>34s} | {r['first']:6.2f} {r['first_cpu']:6.2f} | {min(r['warm']):6.2f} "
                  f"{med:6.2f} {med_cpu:6.2f} | {r['first'] - med:7.2f} {r['first_cpu'] - med_cpu:8.2f} | "
                  f"{'yes' if r['numba'] else 'no':>5s} | {float.fromhex(r['hse']):.6f}", flush=True)
    for route, xs in extra.items():
        wall, cpu = [x[0] for x in xs], [x[1] for x in xs]
        print(f"  {route}, disk cache: the first call's extra cost is {statistics.median(wall):.2f} s wall "
              f"(range {min(wall):.2f}-{max(wall):.2f}), {statistics.median(cpu):.2f} CPU-s (range "
              f"{min(cpu):.2f}-{max(cpu):.2f}), medians over {len(xs)} processes")
    if "blas" in warm_best:
        same = "yes" if values["blas"] == values["popcount"] else "NO"
        print(f"  warm best: popcount {warm_best['popcount']:.2f} s, BLAS {warm_best['blas']:.2f} s: BLAS / popcount "
              f"{warm_best['blas'] / warm_best['popcount']:.1f}x; same HSE bit for bit: {same}")
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
    ap.add_argument("--skip-compile", action="store_true", help="skip the fresh-process first-call timing")
    ap.add_argument("--first-call", default="256x36000,8500x36000",
                    help="N x L sizes of the fresh-process first-call timing (default 256x36000,8500x36000)")
    ap.add_argument("--processes", type=int, default=3, help="fresh processes per first-call size (default 3)")
    ap.add_argument("--only-first-call", action="store_true", help="only the fresh-process first-call timing")
    args = ap.parse_args(argv)

    from routerlab.society import Society, _fast, hse, pairwise_distances
    from routerlab.society.behaviour import clean
    from routerlab.society.coresets import greedy_coreset
    from routerlab.society.entropy import hse_from_linkage, linkage_matrix

    fast = _fast.available()
    if not fast:
        print("numba does not import: only the BLAS route is timed (numba is a dependency of routerlab: reinstall)")
    elif not args.skip_compile:
        for size in args.first_call.split(","):
            n, L = (int(v) for v in size.lower().split("x"))
            first_call(n, L, args.processes, args.repeat, blas=n * L >= 10**8 and not args.skip_blas)
    if args.only_first_call:
        return 0
    if fast:
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
