"""Two-model routing (SPEC 6, routerxbench-probedirichlet.txt sec. 3): the call-rate curve Phi, router
ability (AUROC), the scenario metrics LPM / HCR / MPM, and AUC, APGR, CPT and call-rate-to-recover.

A router gives each query a score s(q); higher means "the small model will do". Three conventions build
the curve; the curve records its own, and every metric taking it follows it (SPEC 6):

- ``routerlab`` (default): grid point i of ``grid`` points sends floor(i * n / (grid - 1)) queries to the
  large model in exact integer arithmetic (x = 0.58, n = 50 sends 29); a tie group of router scores that is
  sent in part contributes its mean small and large scores in proportion (the exact expectation over a
  uniformly random order within the group), so permuting rows never changes the curve, to the bit. Bands
  and thresholds allow 1e-12 of rounding; APGR is NaN when Perf_L = Perf_S; AUROC is NaN with one label.
- ``routerxbench``: RouterXBench's released src/metric.py (read, not copied): numpy's default (unstable)
  argsort, int(rate * n) on np.linspace(0, 1, 101) (one query fewer at some grid points for 56 sizes
  n <= 10,000), prefix sums in sorted order, band membership by exact float comparison and searchsorted,
  tau from the row-order means, AUROC 0.5 with one label. Same numpy, same bits.
- ``routellm``: RouteLLM's routellm/evals (benchmarks.py, evaluate.py; read, not copied): 11 thresholds
  at the deciles of the strong-win rate (-s here), a query goes to the large model when its rate is >= the
  threshold (> for the last), so tie groups are routed together; APGR by trapezoids, CPT in percent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
import numpy.typing as npt

from routerlab.errors import UsageError
from routerlab.metrics._arrays import BoolArray, FloatArray, as_vector, where_nan_message

_TOL = 1e-12

Convention = Literal["routerlab", "routerxbench", "routellm"]
AurocConvention = Literal["routerlab", "routerxbench"]
_XB_GRID = 101  # RouterXBench's np.linspace(0, 1, 101)
_LLM_GRID = 11  # RouteLLM's default: 10 quantile bins, 11 thresholds


@dataclass(frozen=True)
class CallRateCurve:
    """Phi on the call-rate grid: ``phi[i]`` is the mean score when a share ``x[i]`` of the queries
    goes to the large model. Phi between grid points is linear (SPEC 6). ``convention`` says how the
    curve was built (and so how lpm / hcr / mpm / apgr / cpt read it); ``model_means`` holds the peer's
    own (small, large) mean scores where it takes them from the score columns rather than the curve."""

    x: FloatArray
    phi: FloatArray
    convention: Convention = "routerlab"
    model_means: tuple[float, float] | None = None

    @property
    def perf_s(self) -> float:
        """Perf_S: every query answered by the small model (Phi(0), or the peer's column mean)."""
        return float(self.phi[0]) if self.model_means is None else self.model_means[0]

    @property
    def perf_l(self) -> float:
        """Perf_L: every query answered by the large model (Phi(1), or the peer's column mean)."""
        return float(self.phi[-1]) if self.model_means is None else self.model_means[1]

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


def _check_convention(convention: str, allowed: tuple[str, ...], what: str) -> None:
    if convention not in allowed:
        raise UsageError(f"{what}: convention must be one of {', '.join(map(repr, allowed))}, got {convention!r}")


def call_rate_curve(
    router_scores: npt.ArrayLike,
    small_score: npt.ArrayLike,
    large_score: npt.ArrayLike,
    grid: int | None = None,
    convention: Convention = "routerlab",
) -> CallRateCurve:
    """Phi(x) = mean score when the share x of queries with the lowest router scores goes to the large
    model (SPEC 6). ``grid`` points (default 101; routerxbench needs 101; routellm's default 11 = 10
    bins + 1). The conventions differ in ties and flooring, see the module docstring. Unobserved scores
    raise ``ValueError``; an unknown convention or a grid the peer does not use raises ``UsageError``."""
    _check_convention(convention, get_args(Convention), "call_rate_curve")
    s = _known(router_scores, "router_scores")
    small = _known(small_score, "small_score", s.size)
    large = _known(large_score, "large_score", s.size)
    if s.size == 0:
        raise ValueError("call_rate_curve needs at least one query")
    if convention == "routerxbench":
        if grid not in (None, _XB_GRID):
            raise UsageError(f"the routerxbench curve has {_XB_GRID} grid points, got grid={grid}")
        return _routerxbench_curve(s, small, large)
    points = grid if grid is not None else (_LLM_GRID if convention == "routellm" else 101)
    if points < 2:
        raise UsageError(f"grid needs at least 2 points, got {points}")
    if convention == "routellm":
        return _routellm_curve(s, small, large, points - 1)
    return _routerlab_curve(s, small, large, points)


def _routerlab_curve(s: FloatArray, small: FloatArray, large: FloatArray, grid: int) -> CallRateCurve:
    """Exact expectation over random tie-breaking: the expected gain of sending k queries is the
    piecewise-linear interpolation, in k, of the cumulative gain at tie-group boundaries."""
    n = s.size
    diff = large - small
    order = np.lexsort((diff, s))  # a function of the multiset of rows: row order cannot change the bits
    s_sorted, gains = s[order], diff[order]
    group_end = np.flatnonzero(np.append(s_sorted[1:] != s_sorted[:-1], True)) + 1
    sent = np.concatenate(([0], group_end))
    cumulative = np.concatenate(([0.0], np.cumsum(gains)))[sent]
    steps = np.arange(grid)
    k = (steps * n) // (grid - 1)
    phi = (np.sort(small).sum() + np.interp(k, sent, cumulative)) / n
    return CallRateCurve(x=steps / (grid - 1), phi=np.asarray(phi, dtype=np.float64))


def _routerxbench_curve(s: FloatArray, small: FloatArray, large: FloatArray) -> CallRateCurve:
    """RouterXBench's curve, same float operations in the same order (module docstring)."""
    n = s.size
    order = np.argsort(s)  # numpy's default kind on purpose: the released code's tie order
    sorted_small, sorted_large = small[order], large[order]
    prefix_small, prefix_large = np.cumsum(sorted_small), np.cumsum(sorted_large)
    total_small = prefix_small[-1]
    rates = np.linspace(0, 1, _XB_GRID)
    phi = np.empty(_XB_GRID)
    for i, rate in enumerate(rates):  # 101 grid points, not queries
        k = int(rate * n)
        if k == 0:
            phi[i] = total_small / n
        elif k >= n:
            phi[i] = np.mean(sorted_large)
        else:
            phi[i] = (prefix_large[k - 1] + (total_small - prefix_small[k - 1])) / n
    means = (float(np.mean(small)), float(np.mean(large)))
    return CallRateCurve(x=rates, phi=phi, convention="routerxbench", model_means=means)


def _routellm_curve(s: FloatArray, small: FloatArray, large: FloatArray, bins: int) -> CallRateCurve:
    """RouteLLM's threshold points, sorted by call rate. Its thresholds are pandas' qcut edges as pandas 2
    computes them, np.percentile (linear) at np.linspace(0, 1, bins + 1) * 100 of the strong-win rate
    (pandas 3 nudges the deciles that are not exact in binary up by one ulp, which only matters when one
    lands exactly on a data point). RouteLLM's code stops when two edges coincide (qcut's "bin edges must
    be unique"); here the point simply repeats. Accuracy stays in the scores' own scale (RouteLLM's x 100
    changes neither APGR nor CPT beyond rounding)."""
    n = s.size
    win = -s  # RouteLLM's strong-win rate: higher sends to the strong (large) model
    thresholds = np.percentile(win, np.linspace(0, 1, bins + 1) * 100.0)
    x = np.empty(bins + 1)
    phi = np.empty(bins + 1)
    for i, t in enumerate(thresholds):  # bins + 1 thresholds, not queries
        strong = win > t if i == bins else win >= t
        x[i] = np.count_nonzero(strong) / n
        phi[i] = np.where(strong, large, small).mean()
    order = np.argsort(x, kind="stable")
    return CallRateCurve(
        x=x[order], phi=phi[order], convention="routellm", model_means=(float(small.mean()), float(large.mean()))
    )


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


def auroc(scores: npt.ArrayLike, labels: npt.ArrayLike, convention: AurocConvention = "routerlab") -> float:
    """Area under the ROC curve of ``scores`` for boolean ``labels`` (SPEC 6 router ability): the
    probability that a positive outscores a negative, ties counted 1/2 (average ranks, Mann-Whitney).
    Constant scores give 0.5. With only one label routerlab returns NaN (no pair to compare: undefined,
    and a NaN cannot pass for chance); ``routerxbench`` returns 0.5 there and sklearn's value otherwise."""
    _check_convention(convention, get_args(AurocConvention), "auroc")
    s = _known(scores, "scores")
    y = np.asarray(labels, dtype=bool)
    if y.shape != s.shape:
        raise ValueError(f"labels must have shape {s.shape}, got {y.shape}")
    pos = int(y.sum())
    neg = y.size - pos
    if pos == 0 or neg == 0:
        return 0.5 if convention == "routerxbench" else float("nan")
    if convention == "routerxbench":
        from sklearn.metrics import roc_auc_score  # imported here: slow, and only this convention needs it

        return float(roc_auc_score(y.astype(int), s))
    from scipy.stats import rankdata  # imported here: scipy.stats is slow to import

    ranks = rankdata(s, method="average")
    return float((ranks[y].sum() - pos * (pos + 1) / 2.0) / (pos * neg))


def router_auroc(
    router_scores: npt.ArrayLike,
    small_score: npt.ArrayLike,
    large_score: npt.ArrayLike | None = None,
    convention: AurocConvention = "routerlab",
) -> float:
    """AUROC of the router's score for "the small model is good enough" (SPEC 6). ``routerxbench`` takes
    its labels as the released code does: small >= large when any score exceeds 1, else small >= 1."""
    _check_convention(convention, get_args(AurocConvention), "router_auroc")
    if convention == "routerlab":
        return auroc(router_scores, small_good_enough(small_score, large_score))
    if large_score is None:
        raise UsageError("router_auroc with convention 'routerxbench' needs large_score")
    small = _known(small_score, "small_score")
    large = _known(large_score, "large_score", small.size)
    graded = bool((large > 1).any() or (small > 1).any())
    return auroc(router_scores, small >= large if graded else 1 - small <= 0, convention)


def _band_mask(x: FloatArray, lo: float, hi: float) -> BoolArray:
    return np.asarray((x >= lo - _TOL) & (x <= hi + _TOL))


def _on_grid(curve: CallRateCurve, what: str) -> None:
    if curve.convention == "routellm":
        raise UsageError(
            f"{what} is read on the call-rate grid; RouteLLM's 11 threshold points have none "
            "(build the curve with convention 'routerlab' or 'routerxbench')"
        )


def _routerxbench_band(curve: CallRateCurve, band: tuple[float, float]) -> tuple[int, int]:
    """RouterXBench's LPM slice: the band clipped to [0, 1], ends found by searchsorted on the float
    grid (so x = 0.35 = linspace[35] = 0.35000000000000003 is outside a band ending at 0.35), and at
    least one grid point (the first at or above the lower end)."""
    size = curve.x.size
    lo = max(0.0, min(1.0, band[0]))
    hi = max(lo, min(1.0, band[1]))
    start = int(np.searchsorted(curve.x, lo, side="left"))
    end = int(np.searchsorted(curve.x, hi, side="right"))
    if end <= start:
        end = min(start + 1, size)
    return min(start, size - 1), end


def lpm(curve: CallRateCurve, band: tuple[float, float] = (0.25, 0.30)) -> float:
    """Low-band Performance Mean: mean of Phi over the grid points with call rate in [d_lo, d_hi]
    (SPEC 6; paper tables [0.25, 0.30]; d_lo = 0 gives the paper's eq. 6). NaN if no grid point
    (routerxbench: its band rule, see ``_routerxbench_band``)."""
    _on_grid(curve, "LPM")
    if curve.convention == "routerxbench":
        start, end = _routerxbench_band(curve, band)
        return float(np.mean(curve.phi[start:end]))
    mask = _band_mask(curve.x, *band)
    return float(curve.phi[mask].mean()) if mask.any() else float("nan")


def hcr(curve: CallRateCurve, rp_band: tuple[float, float] = (0.85, 0.95)) -> float:
    """High-band Call Rate: 1 - mean of the grid call rates x with tau_1 <= Phi(x) <= tau_2, tau_i the
    levels of relative performance rp_band (SPEC 6, paper eq. 9; [0.85, 0.95]); 0 where there are none.
    routerlab allows 1e-12 of rounding at tau_i; routerxbench compares exactly."""
    _on_grid(curve, "HCR")
    tau_1, tau_2 = curve.tau(rp_band[0]), curve.tau(rp_band[1])
    tol = 0.0 if curve.convention == "routerxbench" else _TOL
    mask = (curve.phi >= tau_1 - tol) & (curve.phi <= tau_2 + tol)
    return float(1.0 - np.mean(curve.x[mask])) if mask.any() else 0.0


def mpm(
    curve: CallRateCurve,
    band: tuple[float, float] = (0.25, 0.30),
    rp_band: tuple[float, float] = (0.85, 0.95),
) -> float:
    """Mid-band Performance Mean: mean of Phi over the grid points with Phi(d_hi) < Phi(x) < tau_1
    (SPEC 6; d_hi = band[1], tau_1 from rp_band[0]); 0 where there are none. routerxbench takes Phi at
    the last grid point of its LPM slice for Phi(d_hi) and compares exactly."""
    _on_grid(curve, "MPM")
    tau_1 = curve.tau(rp_band[0])
    if curve.convention == "routerxbench":
        floor = float(curve.phi[_routerxbench_band(curve, band)[1] - 1])
        mask = (curve.phi > floor) & (curve.phi < tau_1)
    else:
        floor = curve.at(band[1])
        mask = (curve.phi > floor + _TOL) & (curve.phi < tau_1 - _TOL)
    return float(np.mean(curve.phi[mask])) if mask.any() else 0.0


def _trapezoid(y: FloatArray, x: FloatArray) -> float:
    return float(np.sum(np.diff(x) * (y[1:] + y[:-1]) / 2.0))


def auc_phi(curve: CallRateCurve) -> float:
    """Area under Phi over call rates [0, 1], exact for the piecewise-linear curve (trapezoids)."""
    return _trapezoid(curve.phi, curve.x)


def apgr(curve: CallRateCurve) -> float:
    """Average Performance Gap Recovered = (AUC - Perf_S) / (Perf_L - Perf_S) (SPEC 6); NaN when
    Perf_L = Perf_S. On a ``routellm`` curve as RouteLLM's evaluate.py: the AUC of its 11 points less the
    area of the constant Perf_S over the same x, over that of Perf_L less it (equal up to rounding)."""
    if curve.convention == "routellm":
        weak = _trapezoid(np.full(curve.x.size, curve.perf_s), curve.x)
        strong = _trapezoid(np.full(curve.x.size, curve.perf_l), curve.x)
        return (auc_phi(curve) - weak) / (strong - weak) if strong != weak else float("nan")
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


def cpt(curve: CallRateCurve, gap_fraction: float) -> float:
    """Call-Performance Threshold: the percentage of calls to the large model needed to recover the share
    ``gap_fraction`` of the gap (RouteLLM's CPT(20/50/80%), in percent; SPEC 6). On a ``routellm`` curve
    as RouteLLM: np.interp of the target level over the points' Phi (in call-rate order, assumed
    increasing; a non-increasing curve gives numpy's answer, as there) clamped at the ends; on a grid
    curve 100 * ``call_rate_to_recover`` (first crossing; NaN if never)."""
    if curve.convention != "routellm":
        return 100.0 * call_rate_to_recover(curve, gap_fraction)
    return float(np.interp(curve.tau(gap_fraction), curve.phi, curve.x * 100.0))


def oracle_two_model_score(small_score: npt.ArrayLike, large_score: npt.ArrayLike) -> FloatArray:
    """The oracle's two-model score (SPEC 6 anchor): the dense rank (0, 1, ...) of (small - large, small) in
    lexicographic order, so the gain of escalating orders the queries and, among equal gains, a right small
    answer ranks higher. On 0/1 scores: small wrong & large right < both wrong < both right < only small
    right, which gives AUROC 1 for "the small model is good enough" and the optimal call-rate curve."""
    small = _known(small_score, "small_score")
    large = _known(large_score, "large_score", small.size)
    gain = small - large
    order = np.lexsort((small, gain))
    g, s = gain[order], small[order]
    new = np.concatenate(([False], (g[1:] != g[:-1]) | (s[1:] != s[:-1])))
    rank = np.empty(small.size, dtype=np.float64)
    rank[order] = np.cumsum(new)
    return rank
