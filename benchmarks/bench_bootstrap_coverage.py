"""Coverage of routerlab's percentile bootstrap interval of a mean, by number of queries (issue 21).

Run:  .venv/bin/python benchmarks/bench_bootstrap_coverage.py [--quick] [--reps R] [--boot B]

Why: below some number of evaluated queries a nominal 95% interval stops covering the true mean often enough to
mean anything (3 test queries gave intervals of [0, 0] and p = 1.000). This measures where, with the library's
own :func:`routerlab.metrics.bootstrap.bootstrap_ci` (percentile interval, ``B`` resamples), and is what
``MIN_QUERIES`` in ``metrics/bootstrap.py`` was chosen from (docs/metrics.md, "Too few queries").

Distributions, as per-query values of the metrics routerlab reports:

- 0/1 scores (mu_o, Acc@1 of a router on a benchmark of right/wrong answers) with p = 0.1, 0.2, ..., 0.9. Here the
  coverage is exact in the data: the interval depends only on the number k of ones, so it is computed once for
  each k = 0..n and weighted by the binomial probability of k (the bootstrap's own resampling is the only noise);
- continuous scores in [0, 1]: uniform, Beta(2, 5) (skewed, like a partial-credit grade), Beta(0.5, 0.5) (mass
  near both ends, like a judge's confidence); and a log-normal (sigma 1), the shape of per-query cost and
  latency, shown for reference. Monte Carlo: ``R`` samples of n values each.

Printed: the coverage of the nominal 95% interval for each distribution and n, the worst 0/1 case, the worst
[0, 1] case, and the smallest n from which the worst of both stays at or above ``TARGET``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from scipy import stats

from routerlab.metrics.bootstrap import bootstrap_ci

N_VALUES = (3, 5, 10, 20, 30, 50, 100)
P_VALUES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
TARGET = 0.90
"""The coverage a nominal 95% interval must keep for routerlab to compute it at all."""

Sampler = Callable[[np.random.Generator, int], np.ndarray]
CONTINUOUS: dict[str, tuple[Sampler, float]] = {
    "uniform(0,1)": (lambda rng, n: rng.uniform(0.0, 1.0, n), 0.5),
    "beta(2,5)": (lambda rng, n: rng.beta(2.0, 5.0, n), 2.0 / 7.0),
    "beta(.5,.5)": (lambda rng, n: rng.beta(0.5, 0.5, n), 0.5),
}
REFERENCE: dict[str, tuple[Sampler, float]] = {
    "lognormal(1)": (lambda rng, n: rng.lognormal(0.0, 1.0, n), float(np.exp(0.5))),
}


def binary_coverage(p: float, n: int, n_boot: int, seed: int) -> float:
    """Exact-in-the-data coverage for 0/1 scores: sum over k of P(K = k) * [p in interval(k ones of n)]."""
    pmf = stats.binom.pmf(np.arange(n + 1), n, p)
    covered = 0.0
    for k in range(n + 1):
        values = np.zeros(n)
        values[:k] = 1.0
        est = bootstrap_ci(values, n_boot=n_boot, seed=seed + k)
        if est.lo - 1e-12 <= p <= est.hi + 1e-12:
            covered += float(pmf[k])
    return covered


def mc_coverage(sample: Sampler, mean: float, n: int, reps: int, n_boot: int, seed: int) -> float:
    """Monte Carlo coverage: the share of ``reps`` samples of n values whose interval holds the true mean."""
    rng = np.random.default_rng(seed)
    hits = 0
    for r in range(reps):
        est = bootstrap_ci(sample(rng, n), n_boot=n_boot, seed=seed + r)
        hits += int(est.lo <= mean <= est.hi)
    return hits / reps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=2000, help="Monte Carlo samples per continuous cell")
    ap.add_argument("--boot", type=int, default=1000, help="bootstrap resamples per interval (the CLI default)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="200 samples and 400 resamples: a smoke run")
    args = ap.parse_args()
    reps, n_boot = (200, 400) if args.quick else (args.reps, args.boot)
    t0 = time.perf_counter()
    rows: dict[str, list[float]] = {}
    for p in P_VALUES:
        rows[f"0/1 p={p:g}"] = [binary_coverage(p, n, n_boot, args.seed) for n in N_VALUES]
    for name, (sample, mean) in {**CONTINUOUS, **REFERENCE}.items():
        rows[name] = [mc_coverage(sample, mean, n, reps, n_boot, args.seed) for n in N_VALUES]
    binary = [min(rows[f"0/1 p={p:g}"][i] for p in P_VALUES) for i in range(len(N_VALUES))]
    unit = [min(rows[name][i] for name in CONTINUOUS) for i in range(len(N_VALUES))]
    rows["worst 0/1"] = binary
    rows["worst [0,1]"] = unit

    width = max(len(k) for k in rows)
    print(f"coverage of nominal 95% percentile bootstrap intervals of the mean ({n_boot} resamples; 0/1 exact in the "
          f"data, continuous over {reps} samples, Monte Carlo s.e. about {np.sqrt(0.9 * 0.1 / reps):.3f})")
    print("distribution".ljust(width) + "".join(f"{'n=' + str(n):>8}" for n in N_VALUES))
    for name, cov in rows.items():
        print(name.ljust(width) + "".join(f"{c:8.3f}" for c in cov))
    worst = [min(a, b) for a, b in zip(binary, unit, strict=True)]
    ok = [n for i, n in enumerate(N_VALUES) if all(w >= TARGET for w in worst[i:])]
    choice = ok[0] if ok else None
    print(f"smallest n from which the worst score distribution keeps coverage >= {TARGET:.0%}: {choice}")
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
