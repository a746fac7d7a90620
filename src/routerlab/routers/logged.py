"""How routers built for full feedback learn from logged feedback (SPEC 1 observability; routerworld appendix G).

Logged feedback shows one actor's outcome per training query, chosen by a logging policy with a known
probability (its propensity). :meth:`Router.fit <routerlab.routers.base.Router.fit>` turns it into the table the
router's ``_fit`` sees, with :func:`training_table`, by one of these recipes (the router option ``logged``):

- ``correct-only`` (routerworld G.1 for kNN, Naive Bayes, MLP, Emb-FT, Hybrid-LLM; G.2 Gen-SFT): keep the queries
  whose logged actor is correct (score >= 0.5, SPEC 5) and label each with that actor: its score row is the
  one-hot vector of the selected actor, every cell observed. A mean over rows is then a vote share, a per-actor
  classifier a one-vs-rest classifier of the selected label, a best-actor label the selected actor. The zeros are
  labels, not outcomes: the router never reads an outcome that was not logged.
- ``masked`` (G.1 GraphRouter: "only the selected model receives gradient"; Avenger: accuracy over the selected
  field): the logged table as it is; every router here skips unobserved (NaN) cells in its loss or means.
- ``iw-correct-only`` / ``iw-masked`` (option ``logged=iw``): the router's own recipe on an importance-resampled
  log: rows drawn with probability proportional to 1 / propensity (self-normalised), by seeded systematic
  resampling, as many as there are eligible rows. This undoes a non-uniform logging policy's selection bias for
  every router alike (none needs a sample-weight argument). With equal propensities (uniform logging) every row
  is kept exactly once, so ``iw`` is then the same as ``paper``.
- ``dr`` (option ``logged=dr``): a doubly-robust pseudo-full table. A reward model r̂(x, a) per actor (ridge on
  the query vectors of that actor's logged rows, cross-fitted over 5 seeded folds) gives every cell
  ``Γ[i, a] = r̂(x_i, a) + 1[a = a_i] (r_i - r̂(x_i, a_i)) / p_i`` (score; latency and cost too where logged), and
  the router trains on Γ as under full observability, so latency-aware labels (hybrid's fastest correct actor,
  avenger's L-DCG ranks) come back. r̂ and Γ are clipped to the table's ranges (score in [0, 1], latency and
  cost >= 0): clipping biases the unbiased Γ, most on the logged cell where 1 / p is large (with 0/1 scores and
  p < 1 the logged cell's Γ is exactly its outcome).

Tables made here carry ``meta["logged_recipe"]``, so a router can tell a one-model-per-query table from a full one.
Full docs: docs/logged-recipes.md.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from routerlab.data.feedback import Feedback
from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.features.base import Features

FloatMatrix = npt.NDArray[np.float64]
IntVector = npt.NDArray[np.intp]

RECIPES = ("correct-only", "masked", "iw-correct-only", "iw-masked", "dr")
"""What :func:`training_table` accepts: a router's resolved ``logged`` option (see ``Router.recipe_for``)."""

DR_FOLDS = 5
DR_ALPHAS = (0.3, 1.0, 3.0, 10.0, 30.0)
"""The DR reward model: K-fold cross-fitting, and the ridge penalties it chooses from per column by the
cross-fitted squared error on the logged cells (query vectors are L2-normalised; on llmrouter's tf-idf vectors
with uniform logs the best fixed penalty was 3-10: correlation with the hidden cells 0.47 vs 0.34 at 0.1)."""

_DR_FIELDS = ("score", "latency_s", "cost_usd")


def logged_actor(table: RoutingTable) -> tuple[npt.NDArray[np.bool_], IntVector]:
    """(rows with an observed cell, the observed actor per row; 0 where none) of a logged table."""
    observed = table.observed
    rows = np.asarray(observed.any(axis=1), dtype=bool)
    return rows, np.asarray(observed.argmax(axis=1), dtype=np.intp)


def correct_only(table: RoutingTable, threshold: float = 0.5, router: str = "router"
                 ) -> tuple[IntVector, RoutingTable]:
    """(kept rows, table) of the correct-only recipe: the logged queries whose observed actor is correct
    (score >= ``threshold``, SPEC 5), score = one-hot of that actor (every cell observed), the logged cell's
    tokens, latency and cost kept (NaN elsewhere). No such query is a UsageError naming ``router``."""
    rows, actor = logged_actor(table)
    n = table.n_queries
    logged = table.score[np.arange(n), actor].astype(np.float64)  # one cell a query: no float64 matrix
    with np.errstate(invalid="ignore"):
        correct = rows & (logged >= threshold)
    keep = np.flatnonzero(correct).astype(np.intp)
    if keep.size == 0:
        raise UsageError(f"router {router!r}: no logged query has a correct outcome (score >= {threshold:g}), so "
                         "the correct-only recipe has nothing to learn from; use logged=masked or logged=dr")
    labels = np.zeros((keep.size, table.n_actors), dtype=np.float32)
    labels[np.arange(keep.size), actor[keep]] = 1.0
    # the kept queries with the labels as scores (their logged scores are never copied, only to be replaced)
    others = {k: v[keep] for k, v in table.matrices().items() if k != "score"}
    return keep, replace(table, queries=table.queries.take(keep), score=labels, **others)  # type: ignore[arg-type]


def importance_rows(propensity: npt.ArrayLike, eligible: npt.ArrayLike, seed: int) -> IntVector:
    """Systematic importance resampling: ``len(eligible)`` row indices drawn from ``eligible`` with probability
    proportional to ``1 / propensity`` (self-normalised weights), one seeded uniform offset, sorted. Equal
    propensities keep every eligible row exactly once (no resampling noise where there is no bias to undo)."""
    rows = np.asarray(eligible, dtype=np.intp)
    if rows.size == 0:
        return rows
    p = np.asarray(propensity, dtype=np.float64)[rows]
    if np.ptp(p) <= 1e-12 * float(p.max()):
        return rows
    w = 1.0 / p
    cdf = np.cumsum(w / w.sum())
    cdf[-1] = 1.0
    u = np.random.default_rng([seed, 0x4957]).random()
    positions = (u + np.arange(rows.size)) / rows.size
    return rows[np.minimum(np.searchsorted(cdf, positions, side="right"), rows.size - 1)]


def reward_model(X: npt.ArrayLike, values: npt.ArrayLike, observed: npt.ArrayLike, seed: int,
                 folds: int = DR_FOLDS, alphas: tuple[float, ...] = DR_ALPHAS) -> FloatMatrix:
    """Cross-fitted per-column ridge predictions r̂ (n, k) of ``values`` (n, k) from ``X`` (n, d) with an
    unpenalised intercept, each column fitted on its ``observed`` rows only: a row's prediction comes from a
    model fitted without its fold (seeded folds), so its own outcome never enters its r̂ (a lone row is fitted on
    itself). Each column keeps the penalty of ``alphas`` whose held-out predictions err least on its observed
    cells. A column never observed in the other folds is NaN there (nothing to learn from). Columns observed on
    the same rows (an actor's score, latency and cost) share one eigendecomposition per fold (of the smaller of
    the Gram and kernel matrices), which serves every penalty."""
    x = np.asarray(X, dtype=np.float64)
    y = np.asarray(values, dtype=np.float64)
    obs = np.asarray(observed, dtype=bool)
    n = x.shape[0]
    k = max(1, min(int(folds), n))
    fold = np.empty(n, dtype=np.intp)
    fold[np.random.default_rng([seed, 0x4452]).permutation(n)] = np.arange(n) % k
    lam = np.asarray(alphas, dtype=np.float64)
    preds = np.full((lam.size, *y.shape), np.nan)
    patterns, inverse = np.unique(obs.T, axis=0, return_inverse=True)
    with threadpool_limits(limits=1, user_api="blas"):  # small systems: threads only thrash a shared machine
        for i, pattern in enumerate(patterns):
            cols = np.flatnonzero(inverse.ravel() == i)
            for f in range(k):
                held = np.flatnonzero(fold == f)
                rows = pattern & (fold != f) if k > 1 else pattern
                if not rows.any():
                    continue
                xr, yr = x[rows], y[np.ix_(rows, cols)]
                mx, my = xr.mean(axis=0), yr.mean(axis=0)
                xc, yc, xh = xr - mx, yr - my, x[held] - mx
                # ridge = (xc'xc + alpha)^-1 xc'yc from the eigenpairs of the smaller of xc'xc and xc xc'
                if xc.shape[0] >= xc.shape[1]:
                    ev, vec = np.linalg.eigh(xc.T @ xc)
                    left, right = xh @ vec, vec.T @ (xc.T @ yc)
                else:
                    ev, vec = np.linalg.eigh(xc @ xc.T)
                    left, right = (xh @ xc.T) @ vec, vec.T @ yc
                for a, alpha in enumerate(lam):
                    preds[a][np.ix_(held, cols)] = left @ (right / (np.maximum(ev, 0.0) + alpha)[:, None]) + my
    err = np.where(obs[None], preds - y[None], 0.0) ** 2
    err = np.where(np.isnan(err), np.inf, err).sum(axis=1)  # (alphas, columns)
    best = err.argmin(axis=0)
    return np.asarray(np.take_along_axis(preds, best[None, None, :], axis=0)[0])


def doubly_robust(r_hat: npt.ArrayLike, values: npt.ArrayLike, propensity: npt.ArrayLike,
                  low: float = 0.0, high: float = np.inf) -> FloatMatrix:
    """``Γ = r̂ + 1[logged] (r - r̂) / p`` cell by cell (``values`` NaN = not logged; ``propensity`` per row), with
    r̂ first clipped to [``low``, ``high``] (a ridge can leave the range; an out-of-range r̂ would flip the sign of
    the correction) and Γ clipped to it too; NaN where r̂ is NaN (nothing known about that actor), except on a
    logged cell, which then keeps its outcome."""
    r = np.asarray(values, dtype=np.float64)
    est = np.clip(np.asarray(r_hat, dtype=np.float64), low, high)
    p = np.asarray(propensity, dtype=np.float64)[:, None]
    logged = ~np.isnan(r)
    gamma = est + np.where(logged, (np.where(logged, r, 0.0) - np.nan_to_num(est)) / p, 0.0)
    gamma = np.where(logged & np.isnan(est), r, gamma)
    return np.asarray(np.clip(gamma, low, high))


def dr_table(feedback: Feedback, features: Features, seed: int) -> RoutingTable:
    """The doubly-robust pseudo-full table of logged ``feedback``: score (clipped to [0, 1]) and, where the log
    has them, latency and cost (clipped at 0) for every cell, from :func:`reward_model` and
    :func:`doubly_robust`. Tokens stay as logged. Never-logged actors: their score is the overall logged mean,
    their latency and cost unknown (NaN)."""
    table = feedback.table
    assert feedback.propensity is not None
    present = [key for key in _DR_FIELDS if getattr(table, key) is not None]
    mats = [np.asarray(getattr(table, key), dtype=np.float64) for key in present]
    values = np.hstack(mats)
    observed = ~np.isnan(values)
    r_hat = reward_model(features.X, values, observed, seed)
    m = table.n_actors
    out: dict[str, npt.NDArray[np.float32]] = {}
    for i, key in enumerate(present):
        block = slice(i * m, (i + 1) * m)
        est = r_hat[:, block]
        if key == "score":
            logged = observed[:, block]
            fallback = float(values[:, block][logged].mean()) if logged.any() else 0.5
            est = np.where(np.isnan(est), fallback, est)
        high = 1.0 if key == "score" else np.inf
        out[key] = doubly_robust(est, mats[i], feedback.propensity, 0.0, high).astype(np.float32)
    return replace(table, **out)  # type: ignore[arg-type]


def check_table(feedback: Feedback, recipe: str, threshold: float = 0.5, router: str = "router") -> RoutingTable:
    """A cheap stand-in for the recipe's table, for applicability checks before training: the correct-only
    subset (same size as its importance-resampled version) or the logged table (the masked, ``iw-masked`` and
    DR tables have its queries), tagged with the recipe."""
    _check_recipe(feedback, recipe)
    if recipe.endswith("correct-only"):
        _, table = correct_only(feedback.table, threshold, router)
    else:
        table = feedback.table
    return _tagged(table, recipe)


def training_table(feedback: Feedback, features: Features, recipe: str, seed: int, *, threshold: float = 0.5,
                   router: str = "router") -> tuple[RoutingTable, Features]:
    """The table (tagged ``meta["logged_recipe"]``) and matching feature rows a router's ``_fit`` trains on,
    from logged ``feedback`` and its ``features``, by ``recipe`` (one of :data:`RECIPES`; see the module doc).
    ``seed`` drives the importance resampling and the DR folds; ``threshold`` is the correctness threshold of
    the correct-only recipe; ``router`` names the router in errors."""
    _check_recipe(feedback, recipe)
    assert feedback.propensity is not None
    if features.n != feedback.table.n_queries:
        raise UsageError(f"{features.n} feature rows for {feedback.table.n_queries} training queries")
    if recipe == "dr":
        return _tagged(dr_table(feedback, features, seed), recipe), features
    if recipe.endswith("correct-only"):
        rows, table = correct_only(feedback.table, threshold, router)
    else:
        table = feedback.table
        rows = np.arange(table.n_queries, dtype=np.intp)
    if recipe.startswith("iw-"):
        eligible = np.arange(rows.size) if recipe.endswith("correct-only") else np.flatnonzero(
            logged_actor(table)[0])
        pick = importance_rows(feedback.propensity[rows], eligible, seed)
        table, rows = table.select_queries(pick), rows[pick]
    return _tagged(table, recipe), features.take(rows)


def _check_recipe(feedback: Feedback, recipe: str) -> None:
    if recipe not in RECIPES:
        raise UsageError(f"unknown logged-feedback recipe {recipe!r}; use one of {', '.join(RECIPES)}")
    if feedback.kind != "logged":
        raise UsageError("a logged-feedback recipe needs logged feedback (one observed actor per query with its "
                         "propensity); full feedback trains routers directly")


def _tagged(table: RoutingTable, recipe: str) -> RoutingTable:
    return replace(table, meta={**table.meta, "logged_recipe": recipe})
