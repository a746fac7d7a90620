"""Two-model routing (SPEC 6, routerxbench-probedirichlet.txt sec. 3): the call-rate curve Phi, router
ability (AUROC), the scenario metrics LPM / HCR / MPM, and AUC, APGR and call-rate-to-recover.

A router gives each query a score s(q); higher means "the small model will do". Decisions where SPEC is
silent: grid point i of ``grid`` points sends floor(i * n / (grid - 1)) queries to the large model,
computed in exact integer arithmetic (so x = 0.29 with n = 100 sends 29, not the 28 that floating-point
0.29 * 100 would give); band and threshold comparisons allow 1e-12 of rounding; APGR is NaN when
Perf_L = Perf_S; AUROC is NaN when only one label occurs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.stats import rankdata

from routerlab.metrics._arrays import BoolArray, FloatArray, as_vector, where_nan_message

_TOL = 1e-12


@dataclass(frozen=True)
class CallRateCurve:
    """Phi on the call-rate grid: ``phi[i]`` is the mean score when a share ``x[i]`` of the queries
    goes to the large model. Phi between grid points is linear (SPEC 6)."""

    x: FloatArray
    phi: FloatArray

    @property
    def perf_s(self) -> float:
        """Perf_S = Phi(0): every query answered by the small model."""
        return float(self.phi[0])

    @property
    def perf_l(self) -> float:
        """Perf_L = Phi(1): every query answered by the large model."""
        return float(self.phi[-1])

    def at(self, x: float) -> float:
        """Phi(x), linear between grid points."""
        return float(np.interp(x, self.x, self.phi))

    def tau(self, rp: float) -> float:
        """tau = Perf_S + rp * (Perf_L - Perf_S), the absolute level of relative performance rp."""
        return self.perf_s + rp * (self.perf_l - self.perf_s)


def _known(values: npt.ArrayLike, name: str, n: int | None = None) -> FloatArray:
    v = as_vector(values, name, n)
    if np.isnan(v).any():
        raise ValueError(f"{name} is NaN (unobserved) at {where_nan_message(np.isnan(v))}")
    return v


def call_rate_curve(
    router_scores: npt.ArrayLike,
    small_score: npt.ArrayLike,
    large_score: npt.ArrayLike,
    grid: int = 101,
) -> CallRateCurve:
    """Phi on x = 0, 1/(grid-1), ..., 1 (SPEC 6, as RouterXBench's released code): the floor(x * n)
    lowest-scored queries (stable sort, so ties keep query order) go to the large model, the rest to
    the small one; Phi(x) = mean score of the resulting answers. Unobserved scores raise."""
    if grid < 2:
        raise ValueError(f"grid needs at least 2 points, got {grid}")
    s = _known(router_scores, "router_scores")
    small = _known(small_score, "small_score", s.size)
    large = _known(large_score, "large_score", s.size)
    n = s.size
    if n == 0:
        raise ValueError("call_rate_curve needs at least one query")
    order = np.argsort(s, kind="stable")
    gain = np.concatenate(([0.0], np.cumsum(large[order] - small[order])))
    steps = np.arange(grid)
    k = (steps * n) // (grid - 1)
    phi = (small.sum() + gain[k]) / n
    return CallRateCurve(x=steps / (grid - 1), phi=np.asarray(phi, dtype=np.float64))


def small_good_enough(small_score: npt.ArrayLike, large_score: npt.ArrayLike | None = None) -> BoolArray:
    """The label of router ability (SPEC 6): on 0/1 scores the small model is right (score 1); on graded
    scores small >= large. Scores count as 0/1 when both vectors hold only 0 and 1; graded scores
    need ``large_score``."""
    small = _known(small_score, "small_score")
    large = None if large_score is None else _known(large_score, "large_score", small.size)
    binary = np.isin(small, (0.0, 1.0)).all() and (large is None or np.isin(large, (0.0, 1.0)).all())
    if binary:
        return np.asarray(small == 1.0)
    if large is None:
        raise ValueError("graded scores need large_score to label 'small is good enough'")
    return np.asarray(small >= large)


def auroc(scores: npt.ArrayLike, labels: npt.ArrayLike) -> float:
    """Area under the ROC curve of ``scores`` for boolean ``labels`` (SPEC 6 router ability): the
    probability that a positive outscores a negative, ties counted 1/2 (average ranks, Mann-Whitney).
    Constant scores give 0.5; NaN when only one label occurs."""
    s = _known(scores, "scores")
    y = np.asarray(labels, dtype=bool)
    if y.shape != s.shape:
        raise ValueError(f"labels must have shape {s.shape}, got {y.shape}")
    pos = int(y.sum())
    neg = y.size - pos
    if pos == 0 or neg == 0:
        return float("nan")
    ranks = rankdata(s, method="average")
    return float((ranks[y].sum() - pos * (pos + 1) / 2.0) / (pos * neg))


def router_auroc(
    router_scores: npt.ArrayLike, small_score: npt.ArrayLike, large_score: npt.ArrayLike | None = None
) -> float:
    """AUROC of the router's score for "the small model is good enough" (SPEC 6)."""
    return auroc(router_scores, small_good_enough(small_score, large_score))


def _band_mask(x: FloatArray, lo: float, hi: float) -> BoolArray:
    return np.asarray((x >= lo - _TOL) & (x <= hi + _TOL))


def lpm(curve: CallRateCurve, band: tuple[float, float] = (0.25, 0.30)) -> float:
    """Low-band Performance Mean: mean of Phi over the grid points with call rate in [d_lo, d_hi]
    (SPEC 6; paper tables [0.25, 0.30]; d_lo = 0 gives the paper's eq. 6). NaN if no grid point."""
    mask = _band_mask(curve.x, *band)
    return float(curve.phi[mask].mean()) if mask.any() else float("nan")


def hcr(curve: CallRateCurve, rp_band: tuple[float, float] = (0.85, 0.95)) -> float:
    """High-band Call Rate: 1 - mean of the grid call rates x with tau_1 <= Phi(x) <= tau_2, tau_i the
    levels of relative performance rp_band (SPEC 6, paper eq. 9; [0.85, 0.95]); 0 where there are none."""
    tau_1, tau_2 = curve.tau(rp_band[0]), curve.tau(rp_band[1])
    mask = (curve.phi >= tau_1 - _TOL) & (curve.phi <= tau_2 + _TOL)
    return float(1.0 - curve.x[mask].mean()) if mask.any() else 0.0


def mpm(
    curve: CallRateCurve,
    band: tuple[float, float] = (0.25, 0.30),
    rp_band: tuple[float, float] = (0.85, 0.95),
) -> float:
    """Mid-band Performance Mean: mean of Phi over the grid points with Phi(d_hi) < Phi(x) < tau_1
    (SPEC 6; d_hi = band[1], tau_1 from rp_band[0]); 0 where there are none."""
    floor, tau_1 = curve.at(band[1]), curve.tau(rp_band[0])
    mask = (curve.phi > floor + _TOL) & (curve.phi < tau_1 - _TOL)
    return float(curve.phi[mask].mean()) if mask.any() else 0.0


def auc_phi(curve: CallRateCurve) -> float:
    """Area under Phi over call rates [0, 1], exact for the piecewise-linear curve (trapezoids)."""
    return float(np.sum(np.diff(curve.x) * (curve.phi[1:] + curve.phi[:-1]) / 2.0))


def apgr(curve: CallRateCurve) -> float:
    """Average Performance Gap Recovered = (AUC - Perf_S) / (Perf_L - Perf_S) (SPEC 6, RouteLLM's
    APGR on this curve); NaN when Perf_L = Perf_S."""
    gap = curve.perf_l - curve.perf_s
    return (auc_phi(curve) - curve.perf_s) / gap if gap != 0 else float("nan")


def call_rate_to_recover(curve: CallRateCurve, gap_fraction: float) -> float:
    """Smallest call rate x at which the piecewise-linear Phi reaches Perf_S + f (Perf_L - Perf_S)
    (SPEC 6's "call rate needed to recover 20/50/80% of the gap"); NaN if it never does."""
    target = curve.tau(gap_fraction)
    reached = np.flatnonzero(curve.phi >= target - _TOL)
    if not reached.size:
        return float("nan")
    i = int(reached[0])
    if i == 0:
        return float(curve.x[0])
    x0, x1, p0, p1 = curve.x[i - 1], curve.x[i], curve.phi[i - 1], curve.phi[i]
    step = float(np.clip((target - p0) / (p1 - p0), 0.0, 1.0))
    return float(x0 + step * (x1 - x0))
