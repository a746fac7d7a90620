"""How many test queries a paired comparison of two routers needs (sample size and power; docs/power.md).

Two routers scored on the same test queries give per-query differences d_i = score_A(q_i) - score_B(q_i), with
mean d and standard deviation sd (ddof 1). A two-sided paired test at level alpha detects a true mean difference
delta with power 1 - beta once

    n >= ((z_{1 - alpha/2} + z_{1 - beta}) * sd / delta)^2                    (normal approximation)

and at n queries its power is

    Phi(sqrt(n) |delta| / sd - z_{1 - alpha/2}) + Phi(-sqrt(n) |delta| / sd - z_{1 - alpha/2}).

The normal approximation is routerlab's choice, not the t-test's version: the test routerlab runs on a comparison is
the paired bootstrap interval of evaluate (a 95% percentile interval of the resampled mean difference), a large-sample
test whose width is that of a z interval, not a t interval; the t-correction (:func:`sample_size_t`, exact power of
the paired t-test under normal differences) adds about z^2 / 2, i.e. 2 queries, at the sizes a table has. Scores of
0/1 make the differences a three-point distribution, which the approximation ignores; a seeded simulation
(tests/metrics/test_power.py) shows the empirical power of both tests at the computed n is within 0.03 of the target.

No size is estimated from fewer than :data:`~routerlab.metrics.bootstrap.MIN_QUERIES` queries (the sd would rest on
too few), nor from differences of sd 0 (identical routers: nothing to size a test from); the result says why. A size
below ``MIN_QUERIES`` is raised to it: routerlab computes no interval from fewer queries, so fewer cannot detect
anything there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from routerlab.metrics.bootstrap import MIN_QUERIES, paired_bootstrap

_NORMAL = NormalDist()


def _check_levels(alpha: float, power: float | None = None) -> None:
    if not (isinstance(alpha, int | float) and 0.0 < alpha < 1.0):
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    if power is not None:
        if not (isinstance(power, int | float) and 0.0 < power < 1.0):
            raise ValueError(f"power must lie in (0, 1), got {power!r}")
        if power <= alpha:
            raise ValueError(f"power must exceed alpha ({alpha:g}): a two-sided test at level alpha has at least that "
                             f"power at any size, got {power:g}")


def _check_positive(name: str, value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


def sample_size_raw(sd: float, delta: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """((z_{1-alpha/2} + z_power) * sd / delta)^2: the (fractional) number of paired queries at which a two-sided
    test at level ``alpha`` detects a mean difference ``delta`` with probability ``power`` (normal approximation).
    inf when it overflows (a ``delta`` vanishingly small beside ``sd``)."""
    _check_positive("sd", sd)
    _check_positive("delta", abs(delta))
    _check_levels(alpha, power)
    k = _NORMAL.inv_cdf(1.0 - alpha / 2.0) + _NORMAL.inv_cdf(power)
    try:
        return float((k * sd / abs(delta)) ** 2)
    except OverflowError:
        return math.inf


def sample_size(sd: float, delta: float, alpha: float = 0.05, power: float = 0.8) -> int | None:
    """The whole number of paired test queries :func:`sample_size_raw` asks for, rounded up (a hair of float error
    is not rounded up: 31.0000000001 is 31) and at least ``MIN_QUERIES``; None when it is not finite."""
    raw = sample_size_raw(sd, delta, alpha, power)
    if not math.isfinite(raw):
        return None
    return max(math.ceil(raw - 1e-9 * max(1.0, raw)), MIN_QUERIES)


def power_at(n: float, sd: float, delta: float, alpha: float = 0.05) -> float:
    """The power of a two-sided paired test at level ``alpha`` on ``n`` queries against a true mean difference
    ``delta`` when the differences have standard deviation ``sd`` (normal approximation); ``alpha`` at delta = 0."""
    _check_positive("sd", sd)
    _check_positive("n", n)
    _check_levels(alpha)
    if not math.isfinite(delta):
        raise ValueError(f"delta must be finite, got {delta!r}")
    z = _NORMAL.inv_cdf(1.0 - alpha / 2.0)
    shift = math.sqrt(n) * abs(delta) / sd
    return float(_NORMAL.cdf(shift - z) + _NORMAL.cdf(-shift - z))


def sample_size_t(sd: float, delta: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """The smallest n >= 2 at which the two-sided paired t-test at level ``alpha`` reaches ``power`` against a mean
    difference ``delta`` (exact under normal differences: the noncentral t with n - 1 degrees of freedom and
    noncentrality sqrt(n) delta / sd). Not routerlab's estimate (see the module docstring); it shows how much the
    t-correction adds, e.g. 34 against the normal approximation's 32 at delta / sd = 0.5, alpha 0.05, power 0.8."""
    from scipy import stats

    raw = sample_size_raw(sd, delta, alpha, power)
    if not math.isfinite(raw) or raw > 1e12:
        raise ValueError(f"the sample size for delta {delta!r} and sd {sd!r} is too large to search")

    def t_power(n: int) -> float:
        df = n - 1
        crit = float(stats.t.ppf(1.0 - alpha / 2.0, df))
        nc = math.sqrt(n) * abs(delta) / sd
        return float(stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc))

    n = max(2, math.ceil(raw - 1e-9 * max(1.0, raw)))
    while t_power(n) < power:  # the t-test needs at least the normal approximation's n, a few more at small n
        n += 1
    return n


@dataclass(frozen=True)
class PowerAnalysis:
    """What a paired comparison of two routers says about sample size: the evaluated queries ``n``, the observed
    mean difference with its 95% paired bootstrap interval, the sd of the differences, and for ``delta`` and for
    the observed difference the queries needed (``n_needed``, ``n_needed_observed``) and the power at ``n``
    (``power_at_n``, ``power_observed``). The sizes and powers are None when they cannot be estimated, and
    ``reason`` says why (too few queries, sd 0, a zero observed difference)."""

    n: int
    mean_difference: float
    ci: tuple[float, float]
    sd: float
    delta: float
    alpha: float
    power: float
    n_needed: int | None
    power_at_n: float | None
    n_needed_observed: int | None
    power_observed: float | None
    reason: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {"n_test": self.n, "mu_o_difference": self.mean_difference, "ci": list(self.ci),
                "sd_difference": self.sd, "delta": self.delta, "alpha": self.alpha, "power": self.power,
                "n_needed": self.n_needed, "power_at_n": self.power_at_n,
                "n_needed_observed": self.n_needed_observed, "power_observed": self.power_observed,
                "reason": self.reason}


def paired_power(values_a: npt.ArrayLike, values_b: npt.ArrayLike, delta: float, *, alpha: float = 0.05,
                 power: float = 0.8, n_boot: int = 1000, seed: int = 0) -> PowerAnalysis:
    """The sample-size analysis of router A against router B from their per-query scores on the same test queries
    (see the module docstring). The interval of the observed difference is :func:`paired_bootstrap`'s, with the
    same resamples as ``evaluate --compare-to B`` for the same seed and ``n_boot``; ``alpha`` and ``power`` are the
    planned test's and do not change it. Below ``MIN_QUERIES`` queries the interval is NaN (with the project's one
    warning) and no size or power is estimated."""
    _check_positive("delta", delta)
    _check_levels(alpha, power)
    a = np.asarray(values_a, dtype=np.float64)
    b = np.asarray(values_b, dtype=np.float64)
    cmp = paired_bootstrap(a, b, n_boot=n_boot, seed=seed)  # checks shapes and NaN; warns below MIN_QUERIES
    d = a - b
    n = int(d.size)
    sd = float(d.std(ddof=1)) if n >= 2 else math.nan
    mean = cmp.diff

    def analysis(n_needed: int | None = None, power_at_n: float | None = None, n_needed_observed: int | None = None,
                 power_observed: float | None = None, reason: str | None = None, spread: float = sd) -> PowerAnalysis:
        return PowerAnalysis(n, mean, (cmp.lo, cmp.hi), spread, float(delta), float(alpha), float(power), n_needed,
                             power_at_n, n_needed_observed, power_observed, reason)

    if n < MIN_QUERIES:
        return analysis(reason=f"only {n} evaluated test {'query' if n == 1 else 'queries'}, fewer than the "
                               f"{MIN_QUERIES} a 95% interval needs: no sample size is estimated from them")
    if sd <= 1e-12 * max(1.0, abs(mean)):  # float noise of a constant difference
        same = ("the two routers score the same on every test query" if abs(mean) <= 1e-12 else
                f"the difference is {mean:+.4g} on every test query")
        return analysis(reason=f"{same} (sd of the differences 0): no sample size can be estimated from them",
                        spread=0.0)
    observed = abs(mean) > 1e-12
    return analysis(
        n_needed=sample_size(sd, delta, alpha, power), power_at_n=power_at(n, sd, delta, alpha),
        n_needed_observed=sample_size(sd, mean, alpha, power) if observed else None,
        power_observed=power_at(n, sd, mean if observed else 0.0, alpha),
        reason=None if observed else "the observed difference is 0: no number of queries detects it",
    )


__all__ = ["PowerAnalysis", "paired_power", "power_at", "sample_size", "sample_size_raw", "sample_size_t"]
