"""Check ``routerlab power``'s sample size on a real table by simulation (docs/power.md, "Checked on real data").

Run: ``python benchmarks/power_check.py TABLE --routers A,B [--split S] [--seed N] [--trials T]``.

The test split's paired per-query differences A - B are taken as the population (their mean is then the true
difference, and they keep their real shape: mostly 0, some +-1). Samples of ``n_needed_observed`` queries are
drawn from them with replacement, ``--trials`` times; on each, the paired t-test and routerlab's paired bootstrap
interval (evaluate's, 1000 resamples) test "no difference" at level 0.05. Their rejection rates are the empirical
power at the computed n, to be compared with the requested 0.8.
"""

from __future__ import annotations

import argparse
import math
import warnings

import numpy as np
from scipy import stats

from routerlab.data.store import load
from routerlab.metrics.bootstrap import paired_bootstrap
from routerlab.protocols.base import run_protocol


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table")
    parser.add_argument("--routers", default="knn,best-single")
    parser.add_argument("--split", default="given")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trials", type=int, default=1000)
    args = parser.parse_args()
    a, b = args.routers.split(",")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run_protocol("power", load(args.table), {"delta": 0.02, "split": args.split}, args.seed, [a, b])
    analysis = result.native.comparisons[0].analysis
    d = np.asarray(result.artifacts["differences"][a], dtype=np.float64)
    n = analysis.n_needed_observed
    if n is None:
        raise SystemExit(f"no size to check: {analysis.reason}")
    rng = np.random.default_rng(args.seed)
    t_hits = boot_hits = 0
    for i in range(args.trials):
        sample = d[rng.integers(0, d.size, n)]
        t_hits += int(stats.ttest_1samp(sample, 0.0).pvalue < 0.05)
        cmp = paired_bootstrap(sample, np.zeros(n), n_boot=1000, seed=i)
        boot_hits += int(cmp.lo > 0 or cmp.hi < 0)
    se = math.sqrt(0.8 * 0.2 / args.trials)
    print(f"{a} - {b}: {d.size} test queries, mean {d.mean():+.4f}, sd {d.std(ddof=1):.4f}; n_needed_observed {n}")
    print(f"empirical power at n = {n} over {args.trials} trials (standard error {se:.3f}): paired t-test "
          f"{t_hits / args.trials:.3f}, paired bootstrap interval {boot_hits / args.trials:.3f}")


if __name__ == "__main__":
    main()
