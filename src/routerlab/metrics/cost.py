"""Cost and latency of a router's choices, cost-aware utility decisions, the cost-quality curve,
its Pareto frontier and AIQ (SPEC 1, 4; SPEC 6 names RouterBench's AIQ as the ``routerbench``
convention, routerlab's own normalisation is the default; SPEC is silent on the rest, see each).

Cost and latency cells are NaN where unknown (SPEC 1): a chosen unknown cell raises ``ValueError``
naming the query, unless ``nan_policy="omit"`` (mean over the queries whose chosen cell is known).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from routerlab.errors import UsageError
from routerlab.metrics._arrays import (
    FloatArray,
    IntArray,
    ScoreNanPolicy,
    ValueNanPolicy,
    as_actor_matrix,
    as_choice,
    as_matrix,
    as_vector,
    chosen,
    chosen_scores,
    where_nan_message,
)

_TOL = 1e-12


def chosen_values(
    values: npt.ArrayLike, choice: npt.ArrayLike, name: str = "cost", nan_policy: ValueNanPolicy = "raise"
) -> FloatArray:
    """The chosen cell of a cost or latency matrix per query; with ``nan_policy="omit"`` unknown cells
    stay NaN (the means below skip them), with "raise" they raise ``ValueError``."""
    v = as_matrix(values, name)
    out = chosen(v, as_choice(choice, *v.shape))
    missing = np.isnan(out)
    if missing.any() and nan_policy != "omit":
        if nan_policy != "raise":
            raise ValueError(f"nan_policy must be 'raise' or 'omit', got {nan_policy!r}")
        raise ValueError(
            f"the chosen actor's {name} is unknown (NaN) at {where_nan_message(missing)}; "
            "pass nan_policy='omit' to average over the known ones"
        )
    return out


def _nan_mean(values: FloatArray) -> float:
    known = values[~np.isnan(values)]
    return float(known.mean()) if known.size else float("nan")


def mean_cost(cost: npt.ArrayLike, choice: npt.ArrayLike, nan_policy: ValueNanPolicy = "raise") -> float:
    """Mean cost (e.g. USD) per query of the chosen actors."""
    return _nan_mean(chosen_values(cost, choice, "cost", nan_policy))


def mean_latency(latency: npt.ArrayLike, choice: npt.ArrayLike, nan_policy: ValueNanPolicy = "raise") -> float:
    """Mean latency per query of the chosen actors (SPEC 1 latency model, seconds)."""
    return _nan_mean(chosen_values(latency, choice, "latency", nan_policy))


def utility_choice(pred_scores: npt.ArrayLike, cost: npt.ArrayLike, lam: float) -> IntArray:
    """Cost-aware decision: per query argmax over actors of ``pred - lam * cost`` (ties: lowest index).
    ``cost`` is (n, m) or per-actor (m,) and must be known; lam = 0 is the quality-only router."""
    pred = as_matrix(pred_scores, "pred_scores")
    n, m = pred.shape
    c = as_actor_matrix(cost, n, m, "cost")
    if np.isnan(pred).any() or np.isnan(c).any():
        raise ValueError("utility_choice needs known predictions and costs (no NaN)")
    return np.asarray(np.argmax(pred - lam * c, axis=1), dtype=np.intp)


@dataclass(frozen=True)
class CostQualityCurve:
    """One point per lambda: the mean cost and mean quality of the utility router at that lambda."""

    lams: FloatArray
    cost: FloatArray
    quality: FloatArray


def cost_quality_sweep(
    score: npt.ArrayLike,
    pred_scores: npt.ArrayLike,
    cost: npt.ArrayLike,
    lams: npt.ArrayLike,
    nan_policy: ScoreNanPolicy = "raise",
) -> CostQualityCurve:
    """The cost-quality curve of ``utility_choice`` over a lambda sweep: true mean score (``score``)
    and mean cost of the chosen actors at each lambda. The loop runs over lambdas, not queries."""
    s = as_matrix(score)
    n, m = s.shape
    c = as_actor_matrix(cost, n, m, "cost")
    grid = as_vector(lams, "lams")
    costs = np.empty(grid.size)
    quality = np.empty(grid.size)
    for i, lam in enumerate(grid):
        pick = utility_choice(pred_scores, c, float(lam))
        costs[i] = float(chosen(c, pick).mean()) if n else float("nan")
        quality[i] = float(chosen_scores(s, pick, nan_policy).mean()) if n else float("nan")
    return CostQualityCurve(lams=grid, cost=costs, quality=quality)


def _as_points(points: npt.ArrayLike) -> FloatArray:
    p = np.asarray(points, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] != 2:
        raise ValueError(f"points must have shape (k, 2) as (cost, quality), got {p.shape}")
    if np.isnan(p).any():
        raise ValueError("points contain NaN")
    return p


def pareto_frontier(points: npt.ArrayLike) -> IntArray:
    """Indices of the non-dominated (cost, quality) points, by ascending cost: no other point is at most
    as costly and at least as good with one strict. Of exact duplicates the first index is kept."""
    p = _as_points(points)
    if not len(p):
        return np.zeros(0, dtype=np.intp)
    order = np.lexsort((np.arange(len(p)), -p[:, 1], p[:, 0]))
    q = p[order, 1]
    best_before = np.concatenate(([-np.inf], np.maximum.accumulate(q)[:-1]))
    return np.asarray(order[q > best_before], dtype=np.intp)


def _upper_hull(x: FloatArray, y: FloatArray) -> IntArray:
    """Indices of the upper convex hull of points sorted by x (then y descending), left to right."""
    hull: list[int] = []
    for i in range(len(x)):  # over curve points (a few lambdas), not queries
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            cross = (x[b] - x[a]) * (y[i] - y[a]) - (y[b] - y[a]) * (x[i] - x[a])
            if cross >= -_TOL:  # b lies on or under the chord a -> i
                hull.pop()
            else:
                break
        if hull and x[hull[-1]] == x[i]:
            continue  # same x, lower y: never on the upper hull
        hull.append(i)
    return np.asarray(hull, dtype=np.intp)


AiqConvention = Literal["routerlab", "routerbench"]


def aiq(
    cost: npt.ArrayLike,
    quality: npt.ArrayLike,
    convention: AiqConvention = "routerlab",
    max_cost: float | None = None,
) -> float:
    """RouterBench's Average Improvement in Quality: the mean height of the non-decreasing convex hull
    of the (cost, quality) points over a cost range (SPEC 6 names the peer convention; the default is
    routerlab's own, SPEC being silent). The two differ in the range of costs averaged over:

    - ``routerlab``: costs normalised to [0, 1] by [min, max] of the points (``max_cost`` widens the
      right end); the upper convex hull from the best point at the cheapest cost up to the highest-quality
      point, flat after it; AIQ = its integral over [0, 1]. All costs equal: the best quality.
    - ``routerbench``: ``routerbench_hull`` extended flat to ``max_cost`` (default its own largest cost;
      pass the largest ``routerbench_hull`` cost over the routers compared), area from the cheapest cost,
      divided by ``max_cost`` (not by the range: a curve far from cost 0 scores low).
    """
    if convention not in ("routerlab", "routerbench"):
        raise UsageError(f"aiq: convention must be 'routerlab' or 'routerbench', got {convention!r}")
    c = as_vector(cost, "cost")
    q = as_vector(quality, "quality", c.size)
    p = _as_points(np.column_stack([c, q]))
    if not len(p):
        raise ValueError("aiq needs at least one point")
    if convention == "routerbench":
        hull = routerbench_hull(p[:, 0], p[:, 1])
        end = float(hull[-1, 0])
        right = end if max_cost is None else float(max_cost)
        if right < end:
            raise UsageError(f"aiq: max_cost {right} is below the hull's largest cost {end}")
        if right <= 0:
            raise UsageError(
                f"aiq: the routerbench convention divides by the largest cost, here {right}; "
                "pass max_cost > 0 (the largest cost over the routers compared)"
            )
        ext = np.vstack([hull, [right, hull[-1, 1]]])
        return float(np.sum(np.diff(ext[:, 0]) * (ext[1:, 1] + ext[:-1, 1]) / 2.0)) / right
    lo, hi = p[:, 0].min(), p[:, 0].max()
    if max_cost is not None:
        if max_cost < hi:
            raise UsageError(f"aiq: max_cost {max_cost} is below the largest cost {hi}")
        hi = float(max_cost)
    span = hi - lo
    if span == 0:
        return float(p[:, 1].max())
    x = (p[:, 0] - lo) / span
    order = np.lexsort((-p[:, 1], x))
    x, y = x[order], p[order, 1]
    hull_idx = _upper_hull(x, y)
    hx, hy = x[hull_idx], y[hull_idx]
    top = int(np.argmax(hy))  # first vertex of the highest quality
    hx, hy = hx[: top + 1], hy[: top + 1]
    area = float(np.sum(np.diff(hx) * (hy[1:] + hy[:-1]) / 2.0))
    return area + float(hy[-1] * (1.0 - hx[-1]))


def routerbench_hull(cost: npt.ArrayLike, quality: npt.ArrayLike) -> FloatArray:
    """RouterBench's non-decreasing convex hull as (cost, quality) rows by cost (its evaluation/AIQ.py,
    read, not copied): the first and last point of numpy's default argsort by cost (ties at either end
    in that order); at every cost strictly between, the upper convex hull's height; the last point kept
    only when not below its predecessor; then each row lower than the row before it (before removal)
    dropped. RouterBench's code fails when no cost lies strictly between the ends; routerlab then keeps
    first and last (a single cost: its best quality)."""
    c = as_vector(cost, "cost")
    p = _as_points(np.column_stack([c, as_vector(quality, "quality", c.size)]))
    if not len(p):
        raise ValueError("routerbench_hull needs at least one point")
    first, last = p[np.argsort(p[:, 0])[[0, -1]]]  # numpy's default kind, as RouterBench
    if first[0] == last[0]:
        return np.array([[first[0], p[:, 1].max()]])
    order = np.lexsort((-p[:, 1], p[:, 0]))
    x, y = p[order, 0], p[order, 1]
    vertices = _upper_hull(x, y)
    inner = np.unique(x[(x > first[0]) & (x < last[0])])
    rows = [first, *np.column_stack([inner, np.interp(inner, x[vertices], y[vertices])])]
    if not inner.size or last[1] >= rows[-1][1]:
        rows.append(last)
    hull = np.array(rows, dtype=np.float64)
    keep = np.concatenate(([True], hull[1:, 1] >= hull[:-1, 1]))
    return np.asarray(hull[keep], dtype=np.float64)
