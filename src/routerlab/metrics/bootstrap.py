"""Bootstrap intervals over test queries (SPEC 7: every metric carries a 95% bootstrap interval).

Queries are resampled with replacement, n out of n, ``n_boot`` times; the interval is the percentile
interval [alpha/2, 1 - alpha/2] of the replicates (SPEC is silent on the kind; percentile is the plain
one and needs no extra assumptions). Resamples are drawn as (chunk, n) index matrices from
``numpy.random.default_rng(seed)``, so the same seed and n give the same resamples: same inputs and
seed, same numbers, and metrics evaluated with one seed share their resamples.

Below ``MIN_QUERIES`` queries no interval (and no p-value) is computed: the functions here return NaN for them,
and warn once (:class:`FewQueriesWarning`). ``benchmarks/bench_bootstrap_coverage.py`` measured why: under 30
queries the percentile interval of a mean of 0/1 scores covers the true mean far less often than the nominal 95%
(65% at n = 10 for p = 0.1), from 30 on at least 93% for every 0/1 and [0, 1] distribution tried
(docs/metrics.md, "Too few queries").
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from routerlab.metrics._arrays import FloatArray, IntArray

_CHUNK_ELEMENTS = 1 << 21  # index cells per chunk: bounds memory at ~16 MiB of indices

MIN_QUERIES = 30
"""The fewest evaluated queries a 95% bootstrap interval (or a bootstrap p-value) is computed from. Chosen with
benchmarks/bench_bootstrap_coverage.py: the smallest n of 3, 5, 10, 20, 30, 50, 100 from which the percentile
interval's coverage of a mean stays above 90% for 0/1 scores (p = 0.1..0.9) and continuous scores in [0, 1]."""


class FewQueriesWarning(UserWarning):
    """Intervals were not computed: they would rest on fewer than :data:`MIN_QUERIES` queries."""


def enough_queries(n: int, what: str = "evaluated test queries", *, warn: bool = True) -> bool:
    """Whether ``n`` queries are enough for a bootstrap interval (``n >= MIN_QUERIES``). When they are not, warn
    (unless ``warn`` is False: :func:`warn_few_queries` with ``only {n} {what}``) and return False: the caller
    reports its intervals as unavailable (NaN)."""
    if n >= MIN_QUERIES:
        return True
    if warn:
        warn_few_queries(f"only {n} {what.replace('queries', 'query', 1) if n == 1 else what}")
    return False


def warn_few_queries(count: str) -> None:
    """The one warning of intervals left out, ``count`` saying how many queries there are (``only 3 evaluated test
    queries``): a :class:`FewQueriesWarning` whose text is the same for every interval of a run, so the command line
    prints it once however many intervals are left out."""
    warnings.warn(f"{count}, fewer than the {MIN_QUERIES} a 95% interval needs: intervals and p-values are "
                  "reported as unavailable (docs/metrics.md, 'Too few queries')", FewQueriesWarning, stacklevel=3)


def unavailable(n: int) -> str:
    """How a report shows an interval left out for too few queries: ``n/a (n=3 < 30)``."""
    return f"n/a (n={n} < {MIN_QUERIES})"


class Estimate(NamedTuple):
    """A point value with its bootstrap interval."""

    value: float
    lo: float
    hi: float


class PairedComparison(NamedTuple):
    """Mean difference A - B over the same queries, its interval and a two-sided p-value."""

    diff: float
    lo: float
    hi: float
    p_value: float


def resample_indices(n: int, n_boot: int, seed: int) -> Iterator[IntArray]:
    """Bootstrap index matrices of shape (chunk, n), n_boot rows in all, the chunk size a function of
    n only, so a seed and n always give the same resamples."""
    if n < 1:
        raise ValueError("bootstrap needs at least one query")
    if n_boot < 1:
        raise ValueError(f"n_boot must be positive, got {n_boot}")
    rng = np.random.default_rng(seed)
    chunk = max(1, _CHUNK_ELEMENTS // n)
    done = 0
    while done < n_boot:
        rows = min(chunk, n_boot - done)
        yield rng.integers(0, n, size=(rows, n), dtype=np.intp)
        done += rows


def percentile_interval(replicates: npt.ArrayLike, alpha: float = 0.05) -> tuple[float, float]:
    """The [alpha/2, 1 - alpha/2] quantiles of bootstrap replicates, NaN replicates left out
    (both NaN when none is left)."""
    replicates = np.asarray(replicates, dtype=np.float64)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    finite = replicates[~np.isnan(replicates)]
    if not finite.size:
        return float("nan"), float("nan")
    lo, hi = np.quantile(finite, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(lo), float(hi)


def bootstrap_means(values: npt.ArrayLike, n_boot: int = 1000, seed: int = 0) -> FloatArray:
    """Replicate means of per-query values: (n_boot,) for (n,) values, (n_boot, k) for (n, k) values,
    all columns over the same resampled queries. Vectorised: no Python loop over replicates."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim not in (1, 2):
        raise ValueError(f"values must be (n,) or (n, k), got shape {v.shape}")
    if np.isnan(v).any():
        raise ValueError("per-query values contain NaN; apply the metric's NaN policy first")
    n = v.shape[0]
    parts = []
    for idx in resample_indices(n, n_boot, seed):  # chunks of replicates, a few per call
        rows = idx.shape[0]
        offsets = (np.arange(rows, dtype=np.intp) * n)[:, None]
        counts = np.bincount((idx + offsets).ravel(), minlength=rows * n).reshape(rows, n)
        parts.append(counts.astype(np.float64) @ v / n)
    return np.concatenate(parts, axis=0)


def bootstrap_ci(values: npt.ArrayLike, n_boot: int = 1000, alpha: float = 0.05, seed: int = 0) -> Estimate:
    """Mean of per-query values with its percentile bootstrap interval over queries (SPEC 7); a NaN interval
    below :data:`MIN_QUERIES` values."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1:
        raise ValueError(f"values must be 1-d (one per query), got shape {v.shape}")
    if np.isnan(v).any():
        raise ValueError("per-query values contain NaN; apply the metric's NaN policy first")
    if not enough_queries(v.size):
        return Estimate(float(v.mean()), math.nan, math.nan)
    lo, hi = percentile_interval(bootstrap_means(v, n_boot, seed), alpha)
    return Estimate(float(v.mean()), lo, hi)


def bootstrap_statistic(
    statistic: Callable[[IntArray], npt.ArrayLike],
    n: int,
    n_boot: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
) -> Estimate:
    """Any statistic of resampled queries (e.g. the ratio V_B = mean(a) / mean(b)) with its percentile
    interval (SPEC 7). ``statistic`` maps a (rows, n) index matrix to (rows,) values, so it is
    vectorised over replicates; the point value is ``statistic`` of the identity resample. NaN
    replicates (e.g. a zero denominator) are left out of the interval; below :data:`MIN_QUERIES` queries the
    interval is NaN."""
    value = np.asarray(statistic(np.arange(n, dtype=np.intp)[None, :]), dtype=np.float64).reshape(-1)
    if not enough_queries(n):
        return Estimate(float(value[0]), math.nan, math.nan)
    parts = [np.asarray(statistic(idx), dtype=np.float64).reshape(-1) for idx in resample_indices(n, n_boot, seed)]
    lo, hi = percentile_interval(np.concatenate(parts), alpha)
    return Estimate(float(value[0]), lo, hi)


def paired_bootstrap(
    values_a: npt.ArrayLike,
    values_b: npt.ArrayLike,
    n_boot: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
) -> PairedComparison:
    """Paired comparison of two routers on the same queries (SPEC 7): mean of a - b, its percentile
    interval over resampled queries, and a two-sided p-value for "no difference" from the replicates
    shifted to the null: p = (1 + #{|d* - d| >= |d|}) / (1 + n_boot). Identical routers give d = 0
    and p = 1. Below :data:`MIN_QUERIES` queries the interval and the p-value are NaN (unavailable)."""
    a = np.asarray(values_a, dtype=np.float64)
    b = np.asarray(values_b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"values_a and values_b must be 1-d of one length, got {a.shape} and {b.shape}")
    if np.isnan(a).any() or np.isnan(b).any():
        raise ValueError("per-query values contain NaN; apply the metric's NaN policy first")
    d = a - b
    diff = float(d.mean())
    if not enough_queries(d.size):
        return PairedComparison(diff, math.nan, math.nan, math.nan)
    reps = bootstrap_means(d, n_boot, seed)
    lo, hi = percentile_interval(reps, alpha)
    extreme = int(np.count_nonzero(np.abs(reps - diff) >= abs(diff)))
    return PairedComparison(diff, lo, hi, (1 + extreme) / (1 + n_boot))
