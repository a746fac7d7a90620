"""Many-model routing: selection vectors, the oracle r_o and r_o(p), mu_o, V_B, V_R and E_p (SPEC 4),
and selection shares / collapse (SPEC 5).

All functions take a (queries x actors) ``score`` matrix in [0, 1] and, where a router is evaluated, a
``choice`` vector of actor indices. Unobserved (NaN) cells follow the rule in ``_arrays``: never a
candidate of the oracle; a chosen one raises unless ``nan_policy="zero"``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from routerlab.metrics._arrays import (
    BoolArray,
    FloatArray,
    IntArray,
    ScoreNanPolicy,
    as_actor_matrix,
    as_choice,
    as_matrix,
    chosen_scores,
    pick_best,
    require_observed_rows,
    row_blocks,
    where_nan_message,
)
from routerlab.metrics.bounds import actor_means

_SUM_TOL = 1e-6


def selection_vector(score: npt.ArrayLike, rel: float = 0.95) -> BoolArray:
    """Optimal-actor mask per query, the training label of classifier routers (SPEC 4).

    An observed actor is optimal when ``score >= rel * row max``. On 0/1 scores this marks exactly
    the correct actors, and a row with no correct actor (max 0) marks every observed actor, as SPEC 4
    asks; on graded scores it is RouterEval's "within 95% of the best". Unobserved cells are never
    optimal; a query with no observed actor raises ``ValueError``.
    """
    s = as_matrix(score)
    observed = require_observed_rows(s)
    filled = np.where(observed, s, -np.inf)
    best = filled.max(axis=1, keepdims=True)
    return np.asarray(observed & (filled >= rel * best))


def oracle_choice(
    score: npt.ArrayLike,
    latency: npt.ArrayLike | None = None,
    cost: npt.ArrayLike | None = None,
) -> IntArray:
    """The oracle r_o's actor per query (SPEC 4): a best-scoring observed actor; ties go to the fastest,
    then the cheapest, then the first. ``latency``/``cost`` are (n, m) or per-actor (m,); NaN = unknown,
    ranked after known values. On 0/1 scores with latency it is RouterWorld's Oracle(Perfect)."""
    s = as_matrix(score)
    n, m = s.shape
    observed = require_observed_rows(s)
    lat = None if latency is None else as_actor_matrix(latency, n, m, "latency")
    cst = None if cost is None else as_actor_matrix(cost, n, m, "cost")
    return pick_best(observed, s, lat, cst)


def oracle_p_choice(
    score: npt.ArrayLike,
    p: float,
    seed: int = 0,
    latency: npt.ArrayLike | None = None,
    cost: npt.ArrayLike | None = None,
) -> IntArray:
    """One draw of r_o(p) (SPEC 4): per query the oracle's actor with probability p, else an actor drawn
    uniformly from the query's observed actors. Deterministic for a seed."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must lie in [0, 1], got {p}")
    s = as_matrix(score)
    observed = require_observed_rows(s)
    oracle = oracle_choice(s, latency, cost)
    rng = np.random.default_rng(seed)
    use_oracle = rng.random(s.shape[0]) < p
    keys = np.where(observed, rng.random(s.shape), -1.0)
    uniform = np.argmax(keys, axis=1)
    return np.asarray(np.where(use_oracle, oracle, uniform), dtype=np.intp)


def mu_o_per_query(score: npt.ArrayLike, choice: npt.ArrayLike, nan_policy: ScoreNanPolicy = "raise") -> FloatArray:
    """The chosen actor's score on every query (the per-query terms of mu_o, SPEC 4)."""
    s = as_matrix(score)
    return chosen_scores(s, as_choice(choice, *s.shape), nan_policy)


def mu_o(score: npt.ArrayLike, choice: npt.ArrayLike, nan_policy: ScoreNanPolicy = "raise") -> float:
    """mu_o = mean score of the chosen actors over the test queries (SPEC 4, RouterEval eq. 5's
    numerator). For ``oracle_choice`` it is the mean of the row maxima."""
    return float(np.mean(mu_o_per_query(score, choice, nan_policy)))


def best_single_performance(
    score: npt.ArrayLike, best_single: int | None = None, nan_policy: ScoreNanPolicy = "raise"
) -> tuple[int, float]:
    """(actor, Perf(BSM)): the best single actor of the candidate set on this (test) split and its mu_o,
    as the router that always picks it (SPEC 4). ``best_single`` fixes the actor instead (e.g. one
    chosen on the train split); None picks the highest mean observed score (ties: lowest index)."""
    s = as_matrix(score)
    if best_single is None:
        means = actor_means(s)
        if np.isnan(means).all():
            raise ValueError("no actor has an observed score")
        best_single = int(np.nanargmax(means))
    fixed = np.full(s.shape[0], best_single, dtype=np.intp)
    return best_single, mu_o(s, fixed, nan_policy)


def v_b(
    score: npt.ArrayLike,
    choice: npt.ArrayLike,
    best_single: int | None = None,
    nan_policy: ScoreNanPolicy = "raise",
) -> float:
    """V_B = mu_o / Perf(best single actor of the candidate set on the test split) (SPEC 4, RouterEval
    eq. 6); >1 means the router beats every single actor. NaN when Perf(BSM) is 0."""
    _, perf = best_single_performance(score, best_single, nan_policy)
    value = mu_o(score, choice, nan_policy)
    return value / perf if perf != 0 else float("nan")


def v_r(score: npt.ArrayLike, choice: npt.ArrayLike, reference: float, nan_policy: ScoreNanPolicy = "raise") -> float:
    """V_R = mu_o / Perf(reference), the reference model's benchmark performance (e.g. GPT-4), which may
    lie outside the candidate set, hence a number, not an actor (SPEC 4, RouterEval eq. 5)."""
    if reference == 0:
        raise ValueError("reference performance must be non-zero")
    return mu_o(score, choice, nan_policy) / float(reference)


def uniform_distribution(score: npt.ArrayLike) -> FloatArray:
    """The random router's selection distribution: uniform over each query's observed actors
    (SPEC 4); on a full table every row is 1/m and E_p = log2 m."""
    s = as_matrix(score)
    observed = require_observed_rows(s).astype(np.float64)
    return np.asarray(observed / observed.sum(axis=1, keepdims=True))


def oracle_distribution(score: npt.ArrayLike) -> FloatArray:
    """r_o's selection distribution P^(j) for E_p (SPEC 4, as RouterEval's released code): each query's
    scores normalised to sum 1 (uniform over the correct actors on 0/1 scores), uniform over the
    observed actors when all are 0. Unobserved cells get 0; negative scores raise."""
    s = as_matrix(score)
    observed = require_observed_rows(s)
    filled = np.where(observed, s, 0.0)
    if (filled < 0).any():
        raise ValueError("scores must be non-negative to form the oracle's distribution")
    total = filled.sum(axis=1, keepdims=True)
    safe = np.where(total > 0, total, 1.0)
    return np.asarray(np.where(total > 0, filled / safe, uniform_distribution(s)))


def oracle_p_distribution(score: npt.ArrayLike, p: float) -> FloatArray:
    """r_o(p)'s selection distribution: ``p * oracle_distribution + (1 - p) * uniform`` (SPEC 4)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must lie in [0, 1], got {p}")
    return np.asarray(p * oracle_distribution(score) + (1.0 - p) * uniform_distribution(score))


def softmax(scores: npt.ArrayLike, temperature: float = 1.0, *, out: FloatArray | None = None) -> FloatArray:
    """Row-wise softmax of a router's (n, m) scores: its selection distribution for E_p (SPEC 4).
    The row maximum is subtracted before dividing by the temperature, so neither large scores nor a tiny
    temperature overflow; -inf (an actor ruled out) gets mass 0. ``out`` (a float64 array of the scores' shape,
    possibly ``scores`` itself: each block of rows is read before it is written) receives the result, so a
    caller done with its scores need not hold a second (n, m) matrix; the numbers are the same."""
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    s = as_matrix(scores, "scores")
    if np.isnan(s).any():
        raise ValueError("router scores contain NaN")
    if out is None:
        out = np.empty(s.shape)
    elif out.shape != s.shape or out.dtype != np.float64:
        raise ValueError(f"softmax out must be a float64 array of shape {s.shape}")
    for rows in row_blocks(*s.shape):  # row by row in blocks: the temporaries are one block's, not (n, m)'s
        b = s[rows]
        with np.errstate(invalid="ignore", over="ignore"):  # a huge gap over a tiny temperature is -inf: mass 0
            z = np.where(np.isneginf(b), -np.inf, (b - b.max(axis=1, keepdims=True)) / temperature)
        e = np.exp(z)
        out[rows] = e / e.sum(axis=1, keepdims=True)
    return out


def checked_distribution(distribution: npt.ArrayLike) -> FloatArray:
    """``distribution`` as a float64 (n, m) matrix of per-query selection probabilities; ``ValueError`` unless
    it is free of NaN, non-negative and every row sums to 1 (within 1e-6)."""
    d = as_matrix(distribution, "distribution")
    if np.isnan(d).any() or (d < 0).any():
        raise ValueError("distribution must be non-negative and free of NaN")
    sums = d.sum(axis=1)
    off = np.abs(sums - 1.0) > _SUM_TOL
    if off.any():
        raise ValueError(
            f"distribution rows must sum to 1; query {int(np.flatnonzero(off)[0])} sums to {sums[off][0]:.6g}"
        )
    return d


def expected_per_query(values: npt.ArrayLike, distribution: npt.ArrayLike, what: str = "value") -> FloatArray:
    """Per query, the expectation of ``values[q, a]`` (what query q gets if actor a is chosen) when the actor is
    drawn from ``distribution[q]``: ``sum_a p(a|q) values[q, a]`` over the actors with p > 0. That is the
    per-query term of a metric for a router that acts by sampling its distribution (an exploring router as
    deployed); for a one-hot distribution it is exactly ``values[q, choice[q]]``. A value that is unknown (NaN)
    where p = 0 is never drawn and is ignored; one where p > 0 raises ``ValueError`` naming the queries
    (``what`` names the value in the message)."""
    v = as_matrix(values, what)
    d = as_matrix(distribution, "distribution")
    if v.shape != d.shape:
        raise ValueError(f"{what} has shape {v.shape}, the distribution {d.shape}")
    out = np.empty(d.shape[0])
    unknown = np.zeros(d.shape[0], dtype=bool)
    for rows in row_blocks(*d.shape):  # row by row in blocks: the temporaries are one block's, not (n, m)'s
        used, vb = d[rows] > 0, v[rows]
        unknown[rows] = (used & np.isnan(vb)).any(axis=1)
        out[rows] = np.where(used, d[rows] * np.nan_to_num(vb), 0.0).sum(axis=1)
    if unknown.any():
        raise ValueError(f"the {what} of an actor drawn with probability > 0 is unknown (NaN) at "
                         f"{where_nan_message(unknown)}")
    return out


def entropy_bits(distribution: npt.ArrayLike) -> FloatArray:
    """Entropy in bits of each query's selection distribution, with 0 log 0 = 0 (SPEC 4). Rows must be
    non-negative and sum to 1 (within 1e-6), else ``ValueError``."""
    d = checked_distribution(distribution)
    out = np.empty(d.shape[0])
    for rows in row_blocks(*d.shape):  # row by row in blocks: no (n, m) temporaries
        b = d[rows]
        safe = np.where(b > 0, b, 1.0)
        out[rows] = -(b * np.log2(safe)).sum(axis=1)
    return out


def e_p(distribution: npt.ArrayLike) -> float:
    """E_p = mean over test queries of the entropy in bits of the router's selection distribution
    (SPEC 4, RouterEval eq. 7 in bits): log2 m for the random router, 0 for a one-hot router."""
    return float(np.mean(entropy_bits(distribution)))


def selection_shares(choice: npt.ArrayLike, m: int) -> FloatArray:
    """Share of test queries sent to each of the m actors (SPEC 5); all zero when there are none."""
    c = as_choice(choice, None, m)
    counts = np.bincount(c, minlength=m).astype(np.float64)
    return counts / c.size if c.size else counts


def expected_shares(distribution: npt.ArrayLike) -> FloatArray:
    """Expected share of the queries sent to each actor by a router that draws each query's actor from its row
    of ``distribution``: the column means (SPEC 5 selection shares of an exploring router as deployed)."""
    d = checked_distribution(distribution)
    return np.asarray(d.mean(axis=0)) if d.shape[0] else np.zeros(d.shape[1])


def collapsed(choice: npt.ArrayLike, m: int, threshold: float = 0.99) -> bool:
    """True when the router's most frequent actor takes >= ``threshold`` of the test queries (SPEC 5:
    "collapsed" at 99%). An empty choice vector is not collapsed."""
    return shares_collapsed(selection_shares(choice, m), threshold)


def shares_collapsed(shares: npt.ArrayLike, threshold: float = 0.99) -> bool:
    """The collapse flag (SPEC 5) of selection shares: the largest share is >= ``threshold``; no actor (or an
    empty run) is not collapsed."""
    s = np.asarray(shares, dtype=np.float64)
    return bool(s.size and s.max() >= threshold)
