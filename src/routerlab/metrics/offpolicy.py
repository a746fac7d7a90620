"""Off-policy estimators: a router's value from logs another policy collected (SPEC 1, logged observability).

A log holds, for n queries x_i, the actor a_i a logging policy chose, its probability p_i = mu(a_i | x_i) (the
propensity) and the observed reward r_i of that actor alone. A target policy pi (the router under evaluation)
gives pi_i = pi(a_i | x_i) (for a router that acts by its argmax, 1[choice_i = a_i]). With importance weights
w_i = pi_i / p_i:

- IPS (inverse propensity scoring; Horvitz & Thompson 1952, Precup, Sutton & Singh 2000):
  ``V = 1/n sum_i w_i r_i``, unbiased whenever p_i > 0 wherever pi puts mass.
- SNIPS (self-normalised IPS; Swaminathan & Joachims 2015): ``V = sum_i w_i r_i / sum_i w_i``, biased but
  consistent, bounded by the rewards' range, usually of lower variance. Undefined (NaN) when sum_i w_i = 0,
  i.e. no logged query was logged with an actor the target policy could choose: there is nothing to average,
  and 0 would be a made-up number. :func:`weight_diagnostics` says so in words.
- DR (doubly robust; Dudik, Langford & Li 2011): with a reward model rhat(x, a) and the target distribution
  pi(. | x_i), ``V = 1/n sum_i [sum_a pi(a|x_i) rhat(x_i, a) + w_i (r_i - rhat(x_i, a_i))]``; unbiased when
  the propensities are right, whatever the model, and of low variance when the model is good. rhat = 0 gives
  IPS; a perfect model (rhat = the true reward) gives the true value on every log.

Every estimator is a mean (IPS, DR) or a ratio of two means (SNIPS) of per-query terms
(:class:`Contributions`), so one bootstrap resample of the logged queries serves every estimator and every
metric at once. Intervals (SPEC 7: 95% over queries): the percentile bootstrap over logged queries (the
default in the protocols; SNIPS as the ratio of the resampled sums), and each estimator's own normal
approximation, ``V +- z sd / sqrt(n)`` of its terms for IPS and DR, and the linearised (delta-method, Hajek)
variance ``sum_i w_i^2 (r_i - V)^2 / (sum_i w_i)^2`` for SNIPS.

Every function works along the last axis (the logged queries), with any leading axes (e.g. many simulated logs
at once): reward (..., n), propensity (..., n), target probabilities (..., n) or distributions (..., n, m).
Pure array code: nothing from routerlab but this package's conventions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from routerlab.metrics._arrays import FloatArray, IntArray
from routerlab.metrics.bootstrap import bootstrap_means, enough_queries, percentile_interval

Estimator = Literal["ips", "snips", "dr"]
ESTIMATORS: tuple[Estimator, ...] = ("ips", "snips", "dr")

# Diagnostics thresholds (documented in docs/off-policy.md):
TINY_PROPENSITY_FACTOR = 0.1  # a propensity below 0.1 / m is "tiny": a weight 10x a uniform log's
MIN_ESS = 30.0  # below ~30 effective queries neither the normal nor the bootstrap interval is trustworthy
ESS_SHARE_FACTOR = 0.1  # ESS below 0.1 * n / m: weights 10x more concentrated than a uniform log gives


def _float(values: npt.ArrayLike, name: str) -> FloatArray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim < 1:
        raise ValueError(f"{name} must have a query axis, got a scalar")
    if np.isnan(arr).any():
        raise ValueError(f"{name} contains NaN; every logged query needs one")
    return arr


def importance_weights(target_prob: npt.ArrayLike, propensity: npt.ArrayLike) -> FloatArray:
    """w_i = pi(a_i | x_i) / p_i, for target probabilities in [0, 1] and propensities in (0, 1]."""
    pi = _float(target_prob, "target_prob")
    p = _float(propensity, "propensity")
    if (p <= 0).any() or (p > 1).any():
        raise ValueError("propensities must lie in (0, 1]: an action logged with probability 0 cannot be reweighted")
    if (pi < 0).any() or (pi > 1 + 1e-9).any():
        raise ValueError("target probabilities must lie in [0, 1]")
    return np.asarray(pi / p, dtype=np.float64)


def target_probability(target_dist: npt.ArrayLike, action: npt.ArrayLike) -> FloatArray:
    """pi(a_i | x_i): the target distribution (..., n, m) read at the logged actions (..., n)."""
    dist = _float(target_dist, "target_dist")
    a = _actions(action, dist.shape[-1])
    if dist.shape[:-1] != a.shape:
        dist = np.broadcast_to(dist, (*a.shape, dist.shape[-1]))
    return np.asarray(np.take_along_axis(dist, a[..., None], axis=-1)[..., 0], dtype=np.float64)


def _actions(action: npt.ArrayLike, m: int) -> IntArray:
    a = np.asarray(action)
    if a.ndim < 1 or (a.size and not np.issubdtype(a.dtype, np.integer)):
        raise ValueError("logged actions must be integer actor indices with a query axis")
    if a.size and (a.min() < 0 or a.max() >= m):
        raise ValueError(f"a logged action lies outside the {m} actors")
    return a.astype(np.intp)


@dataclass(frozen=True)
class Contributions:
    """Per-query terms of one estimator along the last axis: its value is ``mean(numerator) / mean(denominator)``
    (``denominator`` None: a plain mean). IPS and DR are means; SNIPS is the ratio of mean(w r) to mean(w)."""

    estimator: Estimator
    numerator: FloatArray
    denominator: FloatArray | None = None

    @property
    def n(self) -> int:
        return int(self.numerator.shape[-1])

    def value(self) -> FloatArray:
        """The estimate (shape = the leading axes; a 0-d array for one log). SNIPS with sum w = 0 is NaN."""
        num = self.numerator.mean(axis=-1)
        if self.denominator is None:
            return np.asarray(num)
        den = self.denominator.mean(axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray(np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan))

    def normal_interval(self, alpha: float = 0.05) -> tuple[FloatArray, FloatArray]:
        """The estimator's own normal-approximation interval: ``V +- z sd(terms) / sqrt(n)`` (IPS, DR; sample sd,
        ddof = 1), and for SNIPS the linearised variance ``sum w_i^2 (r_i - V)^2 / (sum w_i)^2`` (the Hajek
        ratio estimator's delta method). NaN where the estimate is undefined or n < MIN_QUERIES (too few queries
        for an interval: unavailable, not computed)."""
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
        from scipy.special import ndtri  # here: scipy.special costs 0.5 s to import, and only this needs it

        z = float(ndtri(1.0 - alpha / 2.0))
        v = self.value()
        n = self.n
        if not enough_queries(n, "logged queries"):
            nan = np.full(v.shape, np.nan)
            return nan, nan.copy()
        if self.denominator is None:
            se = self.numerator.std(axis=-1, ddof=1) / np.sqrt(n)
        else:
            w = self.denominator
            total = w.sum(axis=-1)
            # w r - V w = w (r - V): numerator holds w r
            resid = self.numerator - np.where(np.isnan(v), 0.0, v)[..., None] * w
            with np.errstate(invalid="ignore", divide="ignore"):
                se = np.sqrt((resid**2).sum(axis=-1) * n / (n - 1)) / np.where(total > 0, total, np.nan)
        return np.asarray(v - z * se), np.asarray(v + z * se)


def ips_contributions(reward: npt.ArrayLike, weight: npt.ArrayLike) -> Contributions:
    """IPS terms w_i r_i (Horvitz & Thompson 1952)."""
    r, w = np.broadcast_arrays(_float(reward, "reward"), _float(weight, "weight"))
    return Contributions("ips", np.asarray(w * r, dtype=np.float64))


def snips_contributions(reward: npt.ArrayLike, weight: npt.ArrayLike) -> Contributions:
    """SNIPS terms: numerator w_i r_i, denominator w_i (Swaminathan & Joachims 2015)."""
    r, w = np.broadcast_arrays(_float(reward, "reward"), _float(weight, "weight"))
    return Contributions("snips", np.asarray(w * r, dtype=np.float64), np.array(w, dtype=np.float64))


def dr_contributions(
    reward: npt.ArrayLike,
    action: npt.ArrayLike,
    propensity: npt.ArrayLike,
    target_dist: npt.ArrayLike,
    reward_hat: npt.ArrayLike,
) -> Contributions:
    """DR terms ``sum_a pi(a|x_i) rhat(x_i, a) + w_i (r_i - rhat(x_i, a_i))`` (Dudik, Langford & Li 2011);
    ``target_dist`` and ``reward_hat`` are (..., n, m)."""
    r = _float(reward, "reward")
    dist = _float(target_dist, "target_dist")
    rhat = _float(reward_hat, "reward_hat")
    a = _actions(action, dist.shape[-1])
    shape = np.broadcast_shapes(r.shape, a.shape, np.shape(propensity), dist.shape[:-1], rhat.shape[:-1])
    m = dist.shape[-1]
    if rhat.shape[-1] != m:
        raise ValueError(f"reward_hat has {rhat.shape[-1]} actors, the target distribution {m}")
    dist = np.broadcast_to(dist, (*shape, m))
    rhat = np.broadcast_to(rhat, (*shape, m))
    a = np.broadcast_to(a, shape)
    w = importance_weights(target_probability(dist, a), np.broadcast_to(np.asarray(propensity, np.float64), shape))
    direct = (dist * rhat).sum(axis=-1)
    rhat_logged = np.take_along_axis(rhat, a[..., None], axis=-1)[..., 0]
    return Contributions("dr", np.asarray(direct + w * (np.broadcast_to(r, shape) - rhat_logged), dtype=np.float64))


def contributions(
    estimator: str,
    reward: npt.ArrayLike,
    action: npt.ArrayLike,
    propensity: npt.ArrayLike,
    target_dist: npt.ArrayLike,
    reward_hat: npt.ArrayLike | None = None,
) -> Contributions:
    """The per-query terms of ``estimator`` ('ips', 'snips' or 'dr'; DR needs ``reward_hat``)."""
    if estimator == "dr":
        if reward_hat is None:
            raise ValueError("the doubly robust estimator needs a reward model (reward_hat)")
        return dr_contributions(reward, action, propensity, target_dist, reward_hat)
    w = importance_weights(target_probability(target_dist, action), propensity)
    if estimator == "ips":
        return ips_contributions(reward, w)
    if estimator == "snips":
        return snips_contributions(reward, w)
    raise ValueError(f"unknown estimator {estimator!r}; estimators are {', '.join(ESTIMATORS)}")


def ips(reward: npt.ArrayLike, target_prob: npt.ArrayLike, propensity: npt.ArrayLike) -> FloatArray:
    """IPS estimate ``mean(w r)``, w = pi(a_i|x_i) / p_i, over the last axis."""
    return ips_contributions(reward, importance_weights(target_prob, propensity)).value()


def snips(reward: npt.ArrayLike, target_prob: npt.ArrayLike, propensity: npt.ArrayLike) -> FloatArray:
    """SNIPS estimate ``sum(w r) / sum(w)``; NaN where sum(w) = 0 (undefined: see the module docstring)."""
    return snips_contributions(reward, importance_weights(target_prob, propensity)).value()


def dr(reward: npt.ArrayLike, action: npt.ArrayLike, propensity: npt.ArrayLike, target_dist: npt.ArrayLike,
       reward_hat: npt.ArrayLike) -> FloatArray:
    """Doubly robust estimate (Dudik, Langford & Li 2011) over the last axis."""
    return dr_contributions(reward, action, propensity, target_dist, reward_hat).value()


def effective_sample_size(weight: npt.ArrayLike) -> FloatArray:
    """Kish's (1965) effective sample size ``(sum w)^2 / sum w^2`` over the last axis: n for equal weights, 1
    when one query holds all the weight, 0 when every weight is 0 (no logged query informs the estimate)."""
    w = _float(weight, "weight")
    s2 = (w**2).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(np.where(s2 > 0, w.sum(axis=-1) ** 2 / np.where(s2 > 0, s2, 1.0), 0.0))


@dataclass(frozen=True)
class WeightDiagnostics:
    """How much a log says about a target policy: n logged queries, how many the target could have chosen the
    same way (w > 0), Kish's ESS, the largest weight, the smallest propensity, and warnings in words."""

    n: int
    n_agree: int
    ess: float
    max_weight: float
    min_propensity: float
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"n": self.n, "n_agree": self.n_agree, "ess": self.ess, "max_weight": self.max_weight,
                "min_propensity": self.min_propensity, "warnings": list(self.warnings)}


def weight_diagnostics(weight: npt.ArrayLike, propensity: npt.ArrayLike, n_actors: int) -> WeightDiagnostics:
    """Diagnostics of one log's weights (1-d) with the warnings routerlab gives:

    - a propensity below ``0.1 / m`` is tiny: its query's weight can be 10x what a uniform log gives, so a
      handful of queries can carry the estimate (and a mis-recorded propensity ruins it);
    - ESS below 30: too few effective queries for either interval to be trusted (the usual rule of thumb for
      the central limit theorem);
    - ESS below ``0.1 * n / m``: the weights are 10x more concentrated than a deterministic target's under a
      uniform log (whose ESS is about n / m);
    - no logged query agrees with the target: IPS is 0, SNIPS undefined, DR the reward model's guess alone.
    """
    w = _float(weight, "weight")
    p = _float(propensity, "propensity")
    if w.ndim != 1 or p.shape != w.shape:
        raise ValueError(f"weight and propensity must be 1-d of one length, got {w.shape} and {p.shape}")
    if n_actors < 1:
        raise ValueError("n_actors must be at least 1")
    n = int(w.size)
    ess = float(effective_sample_size(w)) if n else 0.0
    agree = int((w > 0).sum())
    min_p = float(p.min()) if n else float("nan")
    out: list[str] = []
    tiny = TINY_PROPENSITY_FACTOR / n_actors
    if n and min_p < tiny:
        count = int((p < tiny).sum())
        out.append(f"{count} logged quer{'y has' if count == 1 else 'ies have'} a propensity below "
                   f"{tiny:.3g} (0.1 / {n_actors} actors; smallest {min_p:.3g}): a few queries can carry the "
                   "estimate")
    if agree == 0:
        out.append("no logged query was logged with an actor this router would choose: IPS is 0, SNIPS is "
                   "undefined and DR is the reward model's guess alone")
    else:
        if ess < MIN_ESS:
            out.append(f"effective sample size {ess:.1f} is below {MIN_ESS:g}: the intervals are not reliable")
        share = ESS_SHARE_FACTOR * n / n_actors
        if ess < share:
            out.append(f"effective sample size {ess:.1f} of {n} logged queries is below 0.1 * n / m = {share:.1f}:"
                       " the weights are far more concentrated than under a uniform log")
    return WeightDiagnostics(n, agree, ess, float(w.max()) if n else float("nan"), min_p, out)


def bootstrap_intervals(
    terms: list[Contributions], n_boot: int = 1000, seed: int = 0, alpha: float = 0.05
) -> list[tuple[float, float]]:
    """Percentile bootstrap intervals (SPEC 7) of several estimators over one log (1-d terms), all from the same
    resamples of the logged queries: every numerator and denominator is one column of one (n, k) matrix whose
    resampled means come from one count-matrix product per chunk (no loop per resample). SNIPS replicates are
    ratios of the resampled sums; a replicate whose denominator is 0 is left out. Below MIN_QUERIES logged queries
    every interval is (NaN, NaN): unavailable, not computed."""
    if not terms:
        return []
    n = terms[0].n
    cols: list[FloatArray] = []
    for t in terms:
        if t.numerator.ndim != 1 or t.n != n:
            raise ValueError("bootstrap_intervals takes the 1-d terms of one log")
    if not enough_queries(n, "logged queries"):
        return [(float("nan"), float("nan"))] * len(terms)
    for t in terms:
        cols.append(t.numerator)
        if t.denominator is not None:
            cols.append(t.denominator)
    reps = bootstrap_means(np.column_stack(cols), n_boot, seed)
    out: list[tuple[float, float]] = []
    j = 0
    for t in terms:
        rep = reps[:, j]
        j += 1
        if t.denominator is not None:
            den = reps[:, j]
            j += 1
            with np.errstate(invalid="ignore", divide="ignore"):
                rep = np.where(den > 0, rep / np.where(den > 0, den, 1.0), np.nan)
        out.append(percentile_interval(rep, alpha))
    return out


def ridge_reward_model(
    X: npt.ArrayLike,
    action: npt.ArrayLike,
    reward: npt.ArrayLike,
    n_actors: int,
    fold: npt.ArrayLike,
    *,
    alpha: float = 1.0,
    min_rows: int = 10,
) -> tuple[FloatArray, int]:
    """A cross-fitted reward model for DR: rhat (n, m) or (n, m, k) for rewards (n,) or (n, k).

    Per fold f and actor a, a ridge regression (intercept unpenalised, i.e. ridge on features and rewards centred
    on the training rows' means, as scikit-learn's ``Ridge``; penalty ``alpha``) of the rewards of the logged rows
    of actor a outside fold f on their features ``X`` (n, d) predicts rhat(x_i, a) for the queries of fold f. No
    query's own reward enters its prediction (cross-fitting; Chernozhukov et al. 2018), which keeps DR's
    correction term unbiased. An actor with fewer than ``min_rows`` rows outside the fold gets their mean reward
    (all logged rewards outside the fold when it has none; 0 when there are none at all, which makes DR equal
    IPS). Predictions are clipped to the range of the logged rewards. Returns (rhat, number of (fold, actor) cells
    that fell back to a mean).

    Each cell solves the smaller of its two equivalent systems: the dual (rows x rows, when an actor has fewer
    training rows than features, the usual case for a log of a few hundred queries) or the primal (d x d).
    """
    x = np.asarray(X, dtype=np.float64)
    a = np.asarray(action).astype(np.intp)
    y = np.asarray(reward, dtype=np.float64)
    f = np.asarray(fold).astype(np.intp)
    single = y.ndim == 1
    y2 = y[:, None] if single else y
    n = a.shape[0]
    if x.ndim != 2 or x.shape[0] != n or y2.shape[0] != n or f.shape != (n,) or a.shape != (n,):
        raise ValueError("X (n, d), action (n,), reward (n,) or (n, k) and fold (n,) must share n")
    if np.isnan(y2).any() or not np.isfinite(x).all():
        raise ValueError("rewards and features must be finite")
    if alpha <= 0:
        raise ValueError(f"alpha must be positive, got {alpha}")
    d, k = x.shape[1], y2.shape[1]
    n_folds = int(f.max()) + 1 if n else 0
    rhat = np.zeros((n, n_actors, k))
    beta = np.zeros((n_folds, n_actors, d, k))
    xm = np.zeros((n_folds, n_actors, d))
    ym = np.zeros((n_folds, n_actors, k))
    fitted = np.zeros((n_folds, n_actors), dtype=bool)
    dual: list[tuple[int, int, IntArray]] = []
    primal: list[tuple[int, int]] = []
    for g in range(n_folds):
        outside = f != g
        everyone = y2[outside].mean(axis=0) if outside.any() else np.zeros(k)
        for actor in range(n_actors):
            rows = np.flatnonzero(outside & (a == actor))
            r = rows.size
            if r < max(min_rows, 1) or d == 0:
                ym[g, actor] = y2[rows].mean(axis=0) if r else everyone  # the mean fallback (beta stays 0)
                continue
            fitted[g, actor] = True
            xm[g, actor], ym[g, actor] = x[rows].mean(axis=0), y2[rows].mean(axis=0)
            if r <= d:
                dual.append((g, actor, rows))
            else:
                primal.append((g, actor))
    if primal:
        # primal: beta = (Xc' Xc + alpha I)^-1 Xc' yc. Each row's products are formed once, in its own (fold, actor)
        # cell; a training set's sums are its actor's total minus the held-out fold's cell, then centred:
        # Xc' Xc = X' X - r xm xm', Xc' yc = X' y - r xm ym'
        xx = np.zeros((n_folds, n_actors, d, d))
        xy = np.zeros((n_folds, n_actors, d, k))
        cnt = np.zeros((n_folds, n_actors))
        for actor in sorted({c[1] for c in primal}):
            for g in range(n_folds):
                rows = (f == g) & (a == actor)
                xx[g, actor] = x[rows].T @ x[rows]
                xy[g, actor] = x[rows].T @ y2[rows]
                cnt[g, actor] = rows.sum()
        for g, actor in primal:
            r = cnt[:, actor].sum() - cnt[g, actor]
            gram = xx[:, actor].sum(axis=0) - xx[g, actor] - r * np.outer(xm[g, actor], xm[g, actor])
            rhs = xy[:, actor].sum(axis=0) - xy[g, actor] - r * np.outer(xm[g, actor], ym[g, actor])
            beta[g, actor] = np.linalg.solve(gram + alpha * np.eye(d), rhs)
    if dual:
        # dual: beta = Xc' (Xc Xc' + alpha I)^-1 yc, every cell at once, each padded to the longest with zero rows
        # (a zero row adds alpha on its diagonal and 0 to the right-hand side, so its coefficient is 0)
        size = max(rows.size for _, _, rows in dual)
        idx = np.zeros((len(dual), size), dtype=np.intp)
        valid = np.zeros((len(dual), size), dtype=bool)
        for c, (_, _, rows) in enumerate(dual):
            idx[c, :rows.size] = rows
            valid[c, :rows.size] = True
        g_, a_ = np.array([c[0] for c in dual]), np.array([c[1] for c in dual])
        xc = np.where(valid[..., None], x[idx] - xm[g_, a_][:, None, :], 0.0)
        yc = np.where(valid[..., None], y2[idx] - ym[g_, a_][:, None, :], 0.0)
        gram = xc @ xc.transpose(0, 2, 1) + alpha * np.eye(size)
        beta[g_, a_] = xc.transpose(0, 2, 1) @ np.linalg.solve(gram, yc)
    for g in range(n_folds):  # rhat = (x - xm) beta + ym for the fold's queries, every actor at once
        test = f == g
        offset = ym[g] - np.einsum("ad,adk->ak", xm[g], beta[g])
        coef = beta[g].transpose(1, 0, 2).reshape(d, n_actors * k)  # one matrix product for every actor
        rhat[test] = (x[test] @ coef).reshape(-1, n_actors, k) + offset[None]
    fallback = int((~fitted).sum())
    if n:
        rhat = np.clip(rhat, y2.min(axis=0), y2.max(axis=0))
    return (rhat[..., 0] if single else rhat), fallback


def fold_assignment(n: int, n_folds: int, seed: int) -> IntArray:
    """A seeded, balanced assignment of n queries to ``min(n_folds, n)`` folds (cross-fitting)."""
    if n_folds < 1:
        raise ValueError("n_folds must be at least 1")
    k = max(1, min(n_folds, n))
    rng = np.random.default_rng(seed)
    return np.asarray(rng.permutation(np.arange(n) % k), dtype=np.intp)
