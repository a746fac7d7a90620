"""Latency-aware routing metrics: Acc@1, Acc@1-L, DCG, L-DCG and Oracle(Best-of-N) (SPEC 5,
routerworld.txt sec. 4.4).

C_q is the set of correct actors of query q (observed score >= threshold) ordered by ascending latency.
Every metric is given per query (``*_per_query``) and as a mean over the test queries. Queries with an
empty C_q score 0 for every router; ``answerable_only=True`` averages over the other queries only, the
view in which Oracle(Perfect) scores 1. Decisions where SPEC is silent:
- rank r of the chosen actor = 1 + the number of correct actors strictly faster than it, so actors of
  equal latency share the better rank (Acc@1-L then credits any of several equally fastest correct
  actors, and their L-DCG ratio is 1 anyway);
- the latency of every correct actor must be known: a NaN there raises ``ValueError`` (the rank
  would be undefined); negative latencies raise;
- L-DCG's ratio latency_min / latency_chosen is 1 when the two are equal (also when both are 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from routerlab.metrics._arrays import (
    BoolArray,
    FloatArray,
    IntArray,
    ScoreNanPolicy,
    as_actor_matrix,
    as_choice,
    as_float_matrix,
    as_matrix,
    break_ties,
    chosen,
    chosen_scores,
    pick_best,
    row_blocks,
    where_nan_message,
)


def correct_mask(score: npt.ArrayLike, threshold: float = 0.5) -> BoolArray:
    """Cells whose actor is correct: observed score >= ``threshold`` (SPEC 5; on 0/1 scores the usual
    correctness). Unobserved cells are not correct."""
    s = as_matrix(score)
    with np.errstate(invalid="ignore"):
        return np.asarray(~np.isnan(s) & (s >= threshold))


def answerable(score: npt.ArrayLike, threshold: float = 0.5) -> BoolArray:
    """Queries with a non-empty C_q, i.e. at least one correct actor (SPEC 5). ``(~answerable).sum()``
    is the count SPEC 5 asks to report."""
    return np.asarray(correct_mask(score, threshold).any(axis=1))


def fastest_correct(
    score: npt.ArrayLike,
    latency: npt.ArrayLike | None,
    cost: npt.ArrayLike | None = None,
    threshold: float = 0.5,
) -> IntArray:
    """Per query, the fastest correct observed actor (C_q's first, RouterWorld's correct_list[0]);
    ties by cost, then index. A query with no correct actor gets its fastest observed actor (any
    choice scores 0 there). Without latency: the best-scoring observed actor, ties by cost then
    index (the oracle's rule). ``latency``/``cost`` are (n, m) or per-actor (m,); NaN = unknown,
    ranked last. Rows should have an observed cell (a row without one gets actor 0)."""
    s = as_matrix(score)
    n, m = s.shape
    observed = ~np.isnan(s)
    cst = None if cost is None else as_actor_matrix(cost, n, m, "cost")
    if latency is None:
        return pick_best(observed, s, None, cst)
    correct = correct_mask(s, threshold)
    candidates = np.where(correct.any(axis=1, keepdims=True), correct, observed)
    return break_ties(candidates, as_actor_matrix(latency, n, m, "latency"), cst)


@dataclass(frozen=True)
class LatencyRanks:
    """Per-query terms of the SPEC 5 metrics for one choice vector."""

    acc_at_1: FloatArray
    acc_at_1_l: FloatArray
    dcg: FloatArray
    l_dcg: FloatArray
    answerable: BoolArray


def _chosen_correct(
    s: FloatArray, c: IntArray, threshold: float, nan_policy: ScoreNanPolicy
) -> tuple[BoolArray, BoolArray]:
    chosen_scores(s, c, nan_policy)  # applies the NaN rule to the chosen cells
    correct = correct_mask(s, threshold)
    return correct, np.asarray(correct[np.arange(s.shape[0]), c])


def latency_ranks(
    score: npt.ArrayLike,
    choice: npt.ArrayLike,
    latency: npt.ArrayLike,
    threshold: float = 0.5,
    nan_policy: ScoreNanPolicy = "raise",
) -> LatencyRanks:
    """All four SPEC 5 per-query terms at once: Acc@1 = 1[chosen in C_q]; Acc@1-L = 1[chosen is C_q's
    first]; DCG = 1[chosen in C_q] / log2(r + 1); L-DCG = DCG * latency_min / latency_chosen.
    ``latency`` is (n, m) or per-actor (m,)."""
    s = as_matrix(score)
    n, m = s.shape
    c = as_choice(choice, n, m)
    lat = as_actor_matrix(latency, n, m, "latency")
    correct, hit = _chosen_correct(s, c, threshold, nan_policy)
    unknown = (correct & np.isnan(lat)).any(axis=1)
    if unknown.any():
        raise ValueError(f"a correct actor's latency is unknown (NaN) at {where_nan_message(unknown)}")
    if (lat[correct] < 0).any():
        raise ValueError("latencies must be non-negative")
    lat_chosen = chosen(lat, c)
    with np.errstate(invalid="ignore"):
        faster = correct & (lat < lat_chosen[:, None])
    rank = 1 + faster.sum(axis=1)
    lat_min = np.where(correct, lat, np.inf).min(axis=1)
    dcg = np.where(hit, 1.0 / np.log2(rank + 1.0), 0.0)
    slower = hit & (lat_chosen != lat_min)  # lat_min is finite wherever hit
    ratio = np.where(slower, np.where(slower, lat_min, 1.0) / np.where(slower, lat_chosen, 1.0), 1.0)
    return LatencyRanks(
        acc_at_1=hit.astype(np.float64),
        acc_at_1_l=(hit & (rank == 1)).astype(np.float64),
        dcg=dcg,
        l_dcg=np.where(hit, dcg * ratio, 0.0),
        answerable=np.asarray(correct.any(axis=1)),
    )


def _mean(values: FloatArray, mask: BoolArray | None) -> float:
    """Mean over all queries, or over ``mask``; NaN for a mean over no query."""
    if mask is not None:
        values = values[mask]
    return float(values.mean()) if values.size else float("nan")


def acc_at_1_per_query(
    score: npt.ArrayLike, choice: npt.ArrayLike, threshold: float = 0.5, nan_policy: ScoreNanPolicy = "raise"
) -> FloatArray:
    """1 where the chosen actor is correct (SPEC 5 Acc@1); needs no latency."""
    s = as_matrix(score)
    _, hit = _chosen_correct(s, as_choice(choice, *s.shape), threshold, nan_policy)
    return hit.astype(np.float64)


def acc_at_1(
    score: npt.ArrayLike,
    choice: npt.ArrayLike,
    threshold: float = 0.5,
    answerable_only: bool = False,
    nan_policy: ScoreNanPolicy = "raise",
) -> float:
    """Acc@1: share of test queries whose chosen actor is correct (SPEC 5)."""
    values = acc_at_1_per_query(score, choice, threshold, nan_policy)
    return _mean(values, answerable(score, threshold) if answerable_only else None)


def acc_at_1_l_per_query(
    score: npt.ArrayLike,
    choice: npt.ArrayLike,
    latency: npt.ArrayLike,
    threshold: float = 0.5,
    nan_policy: ScoreNanPolicy = "raise",
) -> FloatArray:
    """1 where the chosen actor is the fastest correct one (SPEC 5 Acc@1-L)."""
    return latency_ranks(score, choice, latency, threshold, nan_policy).acc_at_1_l


def acc_at_1_l(
    score: npt.ArrayLike,
    choice: npt.ArrayLike,
    latency: npt.ArrayLike,
    threshold: float = 0.5,
    answerable_only: bool = False,
    nan_policy: ScoreNanPolicy = "raise",
) -> float:
    """Acc@1-L: share of test queries routed to their fastest correct actor (SPEC 5)."""
    r = latency_ranks(score, choice, latency, threshold, nan_policy)
    return _mean(r.acc_at_1_l, r.answerable if answerable_only else None)


def dcg_per_query(
    score: npt.ArrayLike,
    choice: npt.ArrayLike,
    latency: npt.ArrayLike,
    threshold: float = 0.5,
    nan_policy: ScoreNanPolicy = "raise",
) -> FloatArray:
    """1[chosen in C_q] / log2(r + 1), r = the chosen actor's latency rank in C_q (SPEC 5 DCG)."""
    return latency_ranks(score, choice, latency, threshold, nan_policy).dcg


def dcg(
    score: npt.ArrayLike,
    choice: npt.ArrayLike,
    latency: npt.ArrayLike,
    threshold: float = 0.5,
    answerable_only: bool = False,
    nan_policy: ScoreNanPolicy = "raise",
) -> float:
    """Mean DCG over test queries (SPEC 5, routerworld eq. 2)."""
    r = latency_ranks(score, choice, latency, threshold, nan_policy)
    return _mean(r.dcg, r.answerable if answerable_only else None)


def l_dcg_per_query(
    score: npt.ArrayLike,
    choice: npt.ArrayLike,
    latency: npt.ArrayLike,
    threshold: float = 0.5,
    nan_policy: ScoreNanPolicy = "raise",
) -> FloatArray:
    """DCG * latency_min / latency_chosen per query (SPEC 5 L-DCG)."""
    return latency_ranks(score, choice, latency, threshold, nan_policy).l_dcg


def l_dcg(
    score: npt.ArrayLike,
    choice: npt.ArrayLike,
    latency: npt.ArrayLike,
    threshold: float = 0.5,
    answerable_only: bool = False,
    nan_policy: ScoreNanPolicy = "raise",
) -> float:
    """Mean L-DCG over test queries (SPEC 5, routerworld eq. 3); L-DCG <= DCG <= Acc@1 per query."""
    r = latency_ranks(score, choice, latency, threshold, nan_policy)
    return _mean(r.l_dcg, r.answerable if answerable_only else None)


def oracle_best_of_n(
    score: npt.ArrayLike,
    latency: npt.ArrayLike | None,
    choices_of_routers: npt.ArrayLike,
    cost: npt.ArrayLike | None = None,
) -> IntArray:
    """Oracle(Best-of-N) (SPEC 5): per query, the best actor among those picked by at least one router.

    "Best" is the oracle's own rule (SPEC 4): highest score, then fastest, then cheapest, then first;
    on 0/1 scores that is the fastest correct picked actor, so it is Oracle(Perfect) restricted to the
    picked actors. ``choices_of_routers`` is (routers, n). Unobserved picked cells are skipped; a query
    whose picked cells are all unobserved raises ``ValueError``.
    """
    s = as_float_matrix(score)
    n, m = s.shape
    picks = np.asarray(choices_of_routers)
    if picks.ndim != 2 or picks.shape[1] != n:
        raise ValueError(f"choices_of_routers must have shape (routers, {n}), got {picks.shape}")
    picks = np.stack([as_choice(row, n, m, "choices_of_routers") for row in picks]) if picks.size else picks
    picks = picks.astype(np.intp)
    seen = ~np.isnan(s[np.arange(n)[None, :], picks]) if picks.size else np.zeros((0, n), dtype=bool)
    empty = ~seen.any(axis=0)
    if empty.any():
        raise ValueError(f"no router picked an observed actor at {where_nan_message(empty)}")
    lat = None if latency is None else _actor_values(latency, n, m, "latency")
    cst = None if cost is None else _actor_values(cost, n, m, "cost")
    out = np.empty(n, dtype=np.intp)
    for rows in row_blocks(n, m):  # every query on its own: a block of rows at a time, no (n, m) float64 copies
        block = np.asarray(s[rows], dtype=np.float64)
        candidates = np.zeros(block.shape, dtype=bool)
        candidates[np.arange(block.shape[0])[None, :], picks[:, rows]] = True
        candidates &= ~np.isnan(block)
        out[rows] = pick_best(candidates, block, _rows_of(lat, rows, m), _rows_of(cst, rows, m))
    return out


def _actor_values(values: npt.ArrayLike, n: int, m: int, name: str) -> npt.NDArray[np.floating]:
    """A per-cell (n, m) matrix or a per-actor (m,) vector, checked as :func:`as_actor_matrix` checks it but
    kept in its float type (converted a block of rows at a time by :func:`_rows_of`)."""
    arr = np.asarray(values)
    if arr.shape not in {(m,), (n, m)} or arr.dtype.kind != "f":
        return as_actor_matrix(values, n, m, name)  # the shape error, or the conversion of a non-float array
    return arr


def _rows_of(values: npt.NDArray[np.floating] | None, rows: slice, m: int) -> FloatArray | None:
    """Rows ``rows`` of a matrix from :func:`_actor_values` as float64, a per-actor vector broadcast to them."""
    if values is None:
        return None
    if values.ndim == 1:
        return np.broadcast_to(np.asarray(values, dtype=np.float64), (rows.stop - rows.start, m))
    return np.asarray(values[rows], dtype=np.float64)


def latency_rewards(
    score: npt.ArrayLike, latency: npt.ArrayLike | None = None, threshold: float = 0.5
) -> dict[str, FloatArray]:
    """Per-cell SPEC 5 rewards: (n, m) matrices whose cell (q, a) is the value query q gets if actor a is
    chosen, for every actor at once (what a logged outcome is worth, what off-policy estimators average).

    Keys ``acc_at_1``, and with ``latency`` also ``acc_at_1_l``, ``dcg``, ``l_dcg``; column a equals
    :func:`latency_ranks` of the choice "always a" (same rank, tie and latency rules). An unobserved score
    cell (NaN) gets NaN in every matrix (its reward is unknown); a correct actor with unknown latency raises
    ``ValueError`` as in :func:`latency_ranks`. Ranks come from one row-wise sort: O(n m log m), no (n, m, m).
    """
    from scipy.stats import rankdata

    s = as_matrix(score)
    n, m = s.shape
    unknown_score = np.isnan(s)
    correct = correct_mask(s, threshold)
    acc = np.where(unknown_score, np.nan, correct.astype(np.float64))
    if latency is None:
        return {"acc_at_1": acc}
    lat = as_actor_matrix(latency, n, m, "latency")
    unknown = (correct & np.isnan(lat)).any(axis=1)
    if unknown.any():
        raise ValueError(f"a correct actor's latency is unknown (NaN) at {where_nan_message(unknown)}")
    if (lat[correct] < 0).any():
        raise ValueError("latencies must be non-negative")
    keyed = np.where(correct, lat, np.inf)  # only correct actors count as faster
    # 'min' ranks: 1 + the number of strictly smaller keys, i.e. of correct actors strictly faster
    rank = rankdata(keyed, method="min", axis=1) if m else np.zeros((n, 0))
    lat_min = keyed.min(axis=1, initial=np.inf)[:, None]
    dcg = np.where(correct, 1.0 / np.log2(np.asarray(rank, dtype=np.float64) + 1.0), 0.0)
    slower = correct & (lat != lat_min)  # lat_min is finite wherever a cell is correct
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(slower, np.where(slower, lat_min, 1.0) / np.where(slower, lat, 1.0), 1.0)
    out = {
        "acc_at_1": acc,
        "acc_at_1_l": (correct & (rank == 1)).astype(np.float64),
        "dcg": dcg,
        "l_dcg": np.where(correct, dcg * ratio, 0.0),
    }
    for key in ("acc_at_1_l", "dcg", "l_dcg"):
        out[key] = np.where(unknown_score, np.nan, out[key])
    return out
