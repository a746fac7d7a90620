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

import math
from dataclasses import dataclass
from typing import Any, Literal, get_args

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
        return float(_tau(self.perf_s, self.perf_l, rp))


def _tau(perf_s: Any, perf_l: Any, rp: float) -> Any:
    """tau = Perf_S + rp * (Perf_L - Perf_S), for one curve (floats) or one per resample (arrays)."""
    return perf_s + rp * (perf_l - perf_s)


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
    order = _routerlab_order(s, diff)
    gains = diff[order]
    sent = np.concatenate(([0], _group_ends(s[order])))
    cumulative = np.concatenate(([0.0], np.cumsum(gains)))[sent]
    steps = np.arange(grid)
    phi = (np.sort(small).sum() + np.interp(_grid_counts(n, grid), sent, cumulative)) / n
    return CallRateCurve(x=steps / (grid - 1), phi=np.asarray(phi, dtype=np.float64))


def _routerlab_order(s: FloatArray, gain: FloatArray) -> npt.NDArray[np.intp]:
    """The routerlab curve's query order: by router score, ties by the gain large - small. A function of the
    multiset of rows, so row order cannot change the bits."""
    return np.asarray(np.lexsort((gain, s)), dtype=np.intp)


def _group_ends(sorted_scores: FloatArray) -> npt.NDArray[np.intp]:
    """One past the last position of each tie group of sorted router scores."""
    return np.flatnonzero(np.append(sorted_scores[1:] != sorted_scores[:-1], True)) + 1


def _grid_counts(n: int, grid: int) -> npt.NDArray[np.int64]:
    """Queries sent to the large model at each of ``grid`` call-rate points: floor(i * n / (grid - 1)), exact."""
    return (np.arange(grid) * n) // (grid - 1)


def _routerxbench_curve(s: FloatArray, small: FloatArray, large: FloatArray) -> CallRateCurve:
    """RouterXBench's curve, same float operations in the same order (module docstring)."""
    phi, perf_s, perf_l = _routerxbench_phi(s[None, :], small[None, :], large[None, :])
    means = (float(perf_s[0]), float(perf_l[0]))
    return CallRateCurve(x=np.linspace(0, 1, _XB_GRID), phi=phi[0], convention="routerxbench", model_means=means)


def _routerxbench_phi(s: FloatArray, small: FloatArray, large: FloatArray) -> tuple[FloatArray, FloatArray,
                                                                                       FloatArray]:
    """RouterXBench's curve for each row of (rows, n) arrays (one query set per row; numpy sorts, sums and
    averages each row exactly as it does a vector): numpy's default (unstable) argsort, int(rate * n) on the
    float grid, prefix sums in sorted order; Perf_S and Perf_L from the row-order means."""
    b, n = s.shape
    order = np.argsort(s, axis=1)  # numpy's default kind on purpose: the released code's tie order
    sorted_small = np.take_along_axis(small, order, axis=1)
    sorted_large = np.take_along_axis(large, order, axis=1)
    prefix_small, prefix_large = np.cumsum(sorted_small, axis=1), np.cumsum(sorted_large, axis=1)
    total_small = prefix_small[:, -1]
    phi = np.empty((b, _XB_GRID))
    for i, rate in enumerate(np.linspace(0, 1, _XB_GRID)):  # 101 grid points, not queries
        k = int(rate * n)
        if k == 0:
            phi[:, i] = total_small / n
        elif k >= n:
            phi[:, i] = np.mean(sorted_large, axis=1)
        else:
            phi[:, i] = (prefix_large[:, k - 1] + (total_small - prefix_small[:, k - 1])) / n
    return phi, np.mean(small, axis=1), np.mean(large, axis=1)


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


FAIL_BELOW = 0.5
"""A model fails on a query when its score is below this mark: 0 on 0/1 scores, under half marks on graded ones."""


def both_fail(small_score: npt.ArrayLike, large_score: npt.ArrayLike, fail_below: float = FAIL_BELOW) -> BoolArray:
    """Per query, whether both models fail it (score < ``fail_below``): the queries routing cannot help
    (routerxbench-probedirichlet.txt appendix D.2), where sending to either model gives a wrong answer."""
    small = _known(small_score, "small_score")
    large = _known(large_score, "large_score", small.size)
    return np.asarray((small < fail_below) & (large < fail_below))


def both_fail_share(small_score: npt.ArrayLike, large_score: npt.ArrayLike, fail_below: float = FAIL_BELOW) -> float:
    """The share of queries both models fail (:func:`both_fail`), in [0, 1]; NaN for no query."""
    fail = both_fail(small_score, large_score, fail_below)
    return float(fail.mean()) if fail.size else float("nan")


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
    return auroc(router_scores, _ability_labels(small, large, convention), convention)


def _ability_labels(small: FloatArray, large: FloatArray, convention: str) -> BoolArray:
    """The label of router ability per query by the convention's rule: routerlab's :func:`small_good_enough`;
    RouterXBench's released code: small >= large when any score exceeds 1, else small >= 1."""
    if convention == "routerlab":
        return small_good_enough(small, large)
    graded = bool((large > 1).any() or (small > 1).any())
    return np.asarray(small >= large if graded else 1 - small <= 0)


def _band_mask(x: FloatArray, lo: float, hi: float) -> BoolArray:
    return np.asarray((x >= lo - _TOL) & (x <= hi + _TOL))


def _on_grid(curve: CallRateCurve, what: str) -> None:
    if curve.convention == "routellm":
        raise UsageError(
            f"{what} is read on the call-rate grid; RouteLLM's 11 threshold points have none "
            "(build the curve with convention 'routerlab' or 'routerxbench')"
        )


def _routerxbench_band(x: FloatArray, band: tuple[float, float]) -> tuple[int, int]:
    """RouterXBench's LPM slice of the grid ``x``: the band clipped to [0, 1], ends found by searchsorted on the
    float grid (so x = 0.35 = linspace[35] = 0.35000000000000003 is outside a band ending at 0.35), and at
    least one grid point (the first at or above the lower end)."""
    size = x.size
    lo = max(0.0, min(1.0, band[0]))
    hi = max(lo, min(1.0, band[1]))
    start = int(np.searchsorted(x, lo, side="left"))
    end = int(np.searchsorted(x, hi, side="right"))
    if end <= start:
        end = min(start + 1, size)
    return min(start, size - 1), end


def lpm(curve: CallRateCurve, band: tuple[float, float] = (0.25, 0.30)) -> float:
    """Low-band Performance Mean: mean of Phi over the grid points with call rate in [d_lo, d_hi]
    (SPEC 6; paper tables [0.25, 0.30]; d_lo = 0 gives the paper's eq. 6). NaN if no grid point
    (routerxbench: its band rule, see ``_routerxbench_band``)."""
    _on_grid(curve, "LPM")
    if curve.convention == "routerxbench":
        start, end = _routerxbench_band(curve.x, band)
        return float(np.mean(curve.phi[start:end]))
    mask = _band_mask(curve.x, *band)
    return float(curve.phi[mask].mean()) if mask.any() else float("nan")


def hcr(curve: CallRateCurve, rp_band: tuple[float, float] = (0.85, 0.95)) -> float:
    """High-band Call Rate: 1 - mean of the grid call rates x with tau_1 <= Phi(x) <= tau_2, tau_i the
    levels of relative performance rp_band (SPEC 6, paper eq. 9; [0.85, 0.95]); 0 where there are none.
    routerlab allows 1e-12 of rounding at tau_i; routerxbench compares exactly."""
    _on_grid(curve, "HCR")
    mask = _high_band(curve.phi, curve.tau(rp_band[0]), curve.tau(rp_band[1]), _tolerance(curve.convention))
    return float(1.0 - np.mean(curve.x[mask])) if mask.any() else 0.0


def _tolerance(convention: str) -> float:
    """The rounding allowance at band ends and thresholds: 1e-12 for routerlab, none for RouterXBench."""
    return 0.0 if convention == "routerxbench" else _TOL


def _high_band(phi: FloatArray, tau_1: Any, tau_2: Any, tol: float) -> BoolArray:
    """HCR's points: tau_1 <= Phi <= tau_2 within ``tol`` (per curve, or per row with (rows, 1) taus)."""
    return np.asarray((phi >= tau_1 - tol) & (phi <= tau_2 + tol))


def _mid_band(phi: FloatArray, floor: Any, tau_1: Any, tol: float) -> BoolArray:
    """MPM's points: Phi(d_hi) < Phi < tau_1, strictly by more than ``tol`` (per curve, or per row)."""
    return np.asarray((phi > floor + tol) & (phi < tau_1 - tol))


def mpm(
    curve: CallRateCurve,
    band: tuple[float, float] = (0.25, 0.30),
    rp_band: tuple[float, float] = (0.85, 0.95),
) -> float:
    """Mid-band Performance Mean: mean of Phi over the grid points with Phi(d_hi) < Phi(x) < tau_1
    (SPEC 6; d_hi = band[1], tau_1 from rp_band[0]); 0 where there are none. routerxbench takes Phi at
    the last grid point of its LPM slice for Phi(d_hi) and compares exactly."""
    _on_grid(curve, "MPM")
    if curve.convention == "routerxbench":
        floor = float(curve.phi[_routerxbench_band(curve.x, band)[1] - 1])
    else:
        floor = curve.at(band[1])
    mask = _mid_band(curve.phi, floor, curve.tau(rp_band[0]), _tolerance(curve.convention))
    return float(np.mean(curve.phi[mask])) if mask.any() else 0.0


def _trapezoid(y: FloatArray, x: FloatArray) -> float:
    return float(_trapezoids(y, x))


def _trapezoids(y: FloatArray, x: FloatArray) -> Any:
    """Trapezoid areas under ``y`` over ``x``, along the last axis (one curve, or one per row)."""
    return np.sum(np.diff(x) * (y[..., 1:] + y[..., :-1]) / 2.0, axis=-1)


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


# ------------------------------------------------------------------ the two-model metrics, per bootstrap resample
RESAMPLED = ("auroc", "lpm", "mpm", "hcr", "auc", "apgr")
"""The two-model metrics of one router on one query set that a bootstrap resample changes (each gets an
interval)."""
TWO_MODEL_METRICS = (*RESAMPLED, "perf_small", "perf_large")
"""Every metric :func:`two_model_metrics` returns."""


def two_model_metrics(
    curve: CallRateCurve,
    router_scores: npt.ArrayLike,
    small_score: npt.ArrayLike,
    large_score: npt.ArrayLike,
    lpm_band: tuple[float, float] = (0.25, 0.30),
    rp_band: tuple[float, float] = (0.85, 0.95),
) -> dict[str, float]:
    """SPEC 6's metrics of one router on one query set, by ``curve``'s convention (routerlab or routerxbench):
    AUROC, LPM, MPM, HCR, AUC, APGR, Perf_S and Perf_L (the names of :data:`TWO_MODEL_METRICS`)."""
    _on_grid(curve, "the two-model metrics")
    convention: AurocConvention = "routerxbench" if curve.convention == "routerxbench" else "routerlab"
    return {
        "auroc": router_auroc(router_scores, small_score, large_score, convention=convention),
        "lpm": lpm(curve, lpm_band), "mpm": mpm(curve, lpm_band, rp_band), "hcr": hcr(curve, rp_band),
        "auc": auc_phi(curve), "apgr": apgr(curve), "perf_small": curve.perf_s, "perf_large": curve.perf_l,
    }


def exact_sum_dtype(small_score: FloatArray, large_score: FloatArray) -> type[np.floating[Any]]:
    """The dtype :func:`resampled_two_model_metrics` sums multiplicities in: float32 where every partial sum is
    an integer below 2^24 (0/1 scores: counts, gains and labels are small integers, exact in float32 and summed
    about twice as fast), else float64."""
    binary = bool(np.isin(small_score, (0.0, 1.0)).all() and np.isin(large_score, (0.0, 1.0)).all())
    return np.float32 if binary and small_score.size < 2**23 else np.float64


def resample_counts(idx: npt.NDArray[np.intp], n: int, dtype: type[np.floating[Any]] = np.float64
                    ) -> npt.NDArray[np.floating[Any]]:
    """(n, rows): how often each of ``n`` queries occurs in each resample of ``idx`` (rows, n). Queries run down
    the first axis, so sums over sorted queries are column-wise cumulative sums (vectorised over resamples)."""
    rows = idx.shape[0]
    offsets = (np.arange(rows, dtype=np.intp) * n)[:, None]
    counts = np.bincount((idx + offsets).ravel(), minlength=rows * n).reshape(rows, n)
    return np.ascontiguousarray(counts.T, dtype=dtype)


def resampled_two_model_metrics(
    router_scores: FloatArray,
    small_score: FloatArray,
    large_score: FloatArray,
    idx: npt.NDArray[np.intp],
    convention: AurocConvention = "routerlab",
    lpm_band: tuple[float, float] = (0.25, 0.30),
    rp_band: tuple[float, float] = (0.85, 0.95),
    *,
    counts: npt.NDArray[np.floating[Any]] | None = None,
) -> dict[str, FloatArray]:
    """The metrics of :data:`RESAMPLED` for every bootstrap resample of ``idx`` (rows, n) at once: what
    :func:`two_model_metrics` gives on ``router_scores[idx[b]]``, ``small_score[idx[b]]``,
    ``large_score[idx[b]]``, vectorised over b (equal up to float rounding; the tests check it). The routerlab
    curve of a resample keeps the data's tie groups and weighs each query by its multiplicity; ``counts``
    (:func:`resample_counts` of ``idx``, in :func:`exact_sum_dtype`) may be passed to share them between
    routers. RouterXBench's curve is its released code's, row by row. Scores must be observed (no NaN)."""
    _check_convention(convention, get_args(AurocConvention), "resampled_two_model_metrics")
    s, small, large = router_scores, small_score, large_score
    n = s.size
    labels = _ability_labels(small, large, convention)
    if convention == "routerlab":
        w = resample_counts(idx, n, exact_sum_dtype(small, large)) if counts is None else counts
        order = _routerlab_order(s, large - small)
        ends = _group_ends(s[order])
        w_sorted = w[order]
        sent = _at_group_ends(w_sorted, ends)
        phi = _resampled_routerlab_phi(w, w_sorted, ends, sent, small, (large - small)[order], n)
        perf_s, perf_l = phi[:, 0], phi[:, -1]
        auroc_b = _weighted_auroc(w_sorted, ends, sent, labels[order], one_label=math.nan)
        x = np.arange(_GRID) / (_GRID - 1)
    else:
        phi, perf_s, perf_l = _routerxbench_phi(s[idx], small[idx], large[idx])
        order = np.argsort(s, kind="stable")
        w_sorted, ends = resample_counts(idx, n, exact_sum_dtype(small, large))[order], _group_ends(s[order])
        auroc_b = _weighted_auroc(w_sorted, ends, _at_group_ends(w_sorted, ends), labels[order], one_label=0.5)
        x = np.linspace(0, 1, _XB_GRID)
    return {"auroc": auroc_b, **_resampled_curve_metrics(phi, x, perf_s, perf_l, convention, lpm_band, rp_band)}


_GRID = 101  # the call-rate grid of the resampled curves (routerlab's default, RouterXBench's linspace)


def _at_group_ends(w_sorted: npt.NDArray[np.floating[Any]], ends: npt.NDArray[np.intp],
                   values: FloatArray | None = None) -> FloatArray:
    """(groups + 1, rows): the cumulative sum of the multiplicities ``w_sorted`` (n, rows) of the sorted queries
    (times their ``values``) at each tie group's end, a zero row first; summed in the multiplicities' dtype
    (see :func:`exact_sum_dtype`), returned as float64."""
    weighted = w_sorted if values is None else w_sorted * values.astype(w_sorted.dtype)[:, None]
    total = np.cumsum(weighted, axis=0)[ends - 1]
    return np.concatenate([np.zeros((1, w_sorted.shape[1])), total], axis=0, dtype=np.float64)


def _resampled_routerlab_phi(w: npt.NDArray[np.floating[Any]], w_sorted: npt.NDArray[np.floating[Any]],
                             ends: npt.NDArray[np.intp], sent: FloatArray,
                             small: FloatArray, gain_sorted: FloatArray, n: int) -> FloatArray:
    """(rows, grid) routerlab curves of the resamples: tie groups of the router score are fixed by the data, a
    resample only changes how many copies of each query a group holds; the expected gain of sending k queries
    is the linear interpolation, in k, of the cumulative gain at the groups' ends (as :func:`call_rate_curve`).
    ``sent`` is :func:`_at_group_ends` of the multiplicities: the queries sent when whole groups go."""
    b = w.shape[1]
    sent = np.ascontiguousarray(sent.T)  # (b, g + 1), non-decreasing per row
    gained = np.ascontiguousarray(_at_group_ends(w_sorted, ends, gain_sorted).T)
    g = ends.size
    k = _grid_counts(n, _GRID).astype(np.float64)
    offsets = np.arange(b, dtype=np.float64) * (n + 1)  # rows laid end to end stay sorted
    pos = np.searchsorted((sent + offsets[:, None]).ravel(), (k[None, :] + offsets[:, None]).ravel(), side="right")
    j = np.minimum(pos.reshape(b, _GRID) - 1 - (np.arange(b) * (g + 1))[:, None], g - 1)
    r = np.arange(b)[:, None]
    lo_n, hi_n = sent[r, j], sent[r, j + 1]
    step = np.where(hi_n > lo_n, (k[None, :] - lo_n) / np.where(hi_n > lo_n, hi_n - lo_n, 1.0), 0.0)
    step = np.clip(step, 0.0, 1.0)
    gain = gained[r, j] + step * (gained[r, j + 1] - gained[r, j])
    return np.asarray((small @ w)[:, None] + gain) / n


def _weighted_auroc(w_sorted: npt.NDArray[np.floating[Any]], ends: npt.NDArray[np.intp], sent: FloatArray,
                    labels_sorted: BoolArray, *, one_label: float) -> FloatArray:
    """Mann-Whitney AUROC per resample (ties 1/2, as :func:`auroc`) from the multiplicities (n, rows) of the
    queries sorted by router score, ``ends`` closing each tie group (``sent``: :func:`_at_group_ends` of the
    multiplicities); ``one_label`` where a resample holds a single label."""
    pos_cum = _at_group_ends(w_sorted, ends, labels_sorted.astype(np.float64))
    neg_cum = sent - pos_cum
    pos, neg = np.diff(pos_cum, axis=0), np.diff(neg_cum, axis=0)
    n_pos, n_neg = pos_cum[-1], neg_cum[-1]
    both = (n_pos > 0) & (n_neg > 0)
    wins = (pos * (neg_cum[:-1] + 0.5 * neg)).sum(axis=0)
    return np.asarray(np.where(both, wins / np.where(both, n_pos * n_neg, 1.0), one_label))


def _resampled_curve_metrics(phi: FloatArray, x: FloatArray, perf_s: FloatArray, perf_l: FloatArray,
                             convention: str, lpm_band: tuple[float, float], rp_band: tuple[float, float]
                             ) -> dict[str, FloatArray]:
    """LPM, MPM, HCR, AUC and APGR of the curves ``phi`` (rows) on the grid ``x``, by the rules :func:`lpm`,
    :func:`mpm`, :func:`hcr`, :func:`auc_phi` and :func:`apgr` apply to one curve (the same bands, tolerances
    and thresholds; the means taken as masked sums over each row)."""
    tau_1 = _tau(perf_s, perf_l, rp_band[0])[:, None]
    tau_2 = _tau(perf_s, perf_l, rp_band[1])[:, None]
    tol = _tolerance(convention)
    if convention == "routerxbench":
        start, end = _routerxbench_band(x, lpm_band)
        lpm_b = phi[:, start:end].mean(axis=1)
        floor = phi[:, end - 1]
    else:
        band = _band_mask(x, *lpm_band)
        lpm_b = phi[:, band].mean(axis=1) if band.any() else np.full(phi.shape[0], math.nan)
        # Phi(d_hi), linear between the grid points around it
        j = min(max(int(np.searchsorted(x, lpm_band[1], side="right")) - 1, 0), x.size - 2)
        frac = (lpm_band[1] - x[j]) / (x[j + 1] - x[j])
        floor = phi[:, j] + frac * (phi[:, j + 1] - phi[:, j])
    mid = _mid_band(phi, floor[:, None], tau_1, tol)
    high = _high_band(phi, tau_1, tau_2, tol)
    n_high, n_mid = high.sum(axis=1), mid.sum(axis=1)
    hcr_b = np.where(n_high > 0, 1.0 - (high * x).sum(axis=1) / np.maximum(n_high, 1), 0.0)
    mpm_b = np.where(n_mid > 0, (mid * phi).sum(axis=1) / np.maximum(n_mid, 1), 0.0)
    auc_b = _trapezoids(phi, x)
    gap = perf_l - perf_s
    apgr_b = np.where(gap != 0, (auc_b - perf_s) / np.where(gap != 0, gap, 1.0), math.nan)
    return {"lpm": np.asarray(lpm_b, dtype=np.float64), "mpm": mpm_b, "hcr": hcr_b, "auc": auc_b, "apgr": apgr_b}
