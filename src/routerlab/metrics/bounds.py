"""Reference bounds of a score matrix: oracle, uniform-random and best-single-actor (SPEC 4).

Unobserved cells (NaN) are skipped: a bound is computed over the observed actors of each query, and
queries with no observed actor are left out and counted. These are the three numbers any router
must be placed between before its own score means anything.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from routerlab.metrics._arrays import column_blocks

Array = npt.NDArray[np.floating]


@dataclass(frozen=True)
class Bounds:
    oracle: float
    random: float
    best_single: float
    best_single_actor: int
    n_queries: int
    n_unobserved_queries: int


def _rows_observed(score: Array) -> npt.NDArray[np.bool_]:
    return np.asarray(~np.isnan(score).all(axis=1))


def _observed_part(score: Array, rows: npt.NDArray[np.bool_]) -> Array:
    """The rows of ``score`` with an observed cell: the matrix itself (no copy) when that is every row."""
    return np.ascontiguousarray(score) if rows.all() else score[rows]


def oracle_score(score: Array) -> float:
    """Mean over queries of the best observed score: r_o's mu_o (SPEC 4)."""
    rows = _rows_observed(score)
    return float(np.nanmax(_observed_part(score, rows), axis=1).mean()) if rows.any() else float("nan")


def random_score(score: Array) -> float:
    """Expected mu_o of a uniform random router over each query's observed actors (SPEC 4)."""
    rows = _rows_observed(score)
    return float(np.nanmean(_observed_part(score, rows), axis=1).mean()) if rows.any() else float("nan")


def actor_means(score: Array) -> npt.NDArray[np.float64]:
    """Mean observed score per actor; NaN for an actor with no observed cell. A block of actors at a time,
    so a training matrix needs no full-size mask or copy (the sums are the same, bit for bit)."""
    s = np.asarray(score)
    out = np.full(s.shape[1], np.nan)
    for cols in column_blocks(s.shape[0], s.shape[1]):
        block = s[:, cols]
        obs = ~np.isnan(block)
        counts = obs.sum(axis=0)
        sums = np.where(obs, block, 0.0).sum(axis=0, dtype=np.float64)
        np.divide(sums, counts, out=out[cols], where=counts > 0)
    return out


def best_single_actor(score: Array) -> int:
    """Index of the actor with the highest mean observed score (ties: lowest index)."""
    means = actor_means(score)
    if np.isnan(means).all():
        raise ValueError("no actor has an observed score")
    return int(np.nanargmax(means))


def bounds(test_score: Array, train_score: Array | None = None) -> Bounds:
    """Oracle, random and best-single bounds on ``test_score``; the best single actor is chosen on
    ``train_score`` when given (a router could not know the test split), else on the test split."""
    best = best_single_actor(train_score if train_score is not None else test_score)
    rows = _rows_observed(test_score)
    col = test_score[rows, best]
    return Bounds(
        oracle=oracle_score(test_score),
        random=random_score(test_score),
        best_single=float(np.nanmean(col)) if (~np.isnan(col)).any() else float("nan"),
        best_single_actor=best,
        n_queries=int(rows.sum()),
        n_unobserved_queries=int((~rows).sum()),
    )
