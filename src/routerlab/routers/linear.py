"""Learned per-query routers on frozen query vectors: ``linear`` (RouterEval LinearR), ``mlp``
(RouterEval MLPR / RouterWorld MLP), ``mlc`` (RouterEval MLC), ``naive-bayes`` (RouterWorld Naive
Bayes) and ``svm`` (linear SVM on the best-actor label).

Every learner trains on observed cells only: NaN cells are left out of the loss (ridge normal
equations, masked BCE/softmax) or, for single-label classifiers, queries with no observed actor
are dropped and the label is the best *observed* actor.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from routerlab._spec import Constraint, Interval, Options
from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.metrics._arrays import column_blocks
from routerlab.metrics.selection import oracle_choice, selection_vector
from routerlab.routers._common import UNKNOWN_SCORE, FloatMatrix, observed_rows, prior_means
from routerlab.routers._early_stopping import EarlyStopping
from routerlab.routers._masked_mlp import NETWORK_CONSTRAINTS, MaskedMLP, network_from_options
from routerlab.routers.base import DevPart, Router, register


def masked_ridge(
    X: npt.ArrayLike, Y: npt.ArrayLike, mask: npt.ArrayLike, alpha: float
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Per-column ridge regression of ``Y[:, j]`` on ``X`` over the rows where ``mask[:, j]``; the
    intercept is not penalised. Closed form on the normal equations; columns sharing a mask share
    one factorisation, and each column's Gram matrix is built from whichever is fewer, its observed
    or its unobserved rows. Returns (W (d, m), b (m,)); a never-observed column gets W=0, b=NaN.
    ``Y`` is read a block of columns at a time (float32 stays float32 until then), so a 28,799 x 8,500
    training matrix needs no 1.8 GiB float64 copy; the right-hand sides of a block then differ from one
    product over all columns by BLAS rounding only (~1e-13)."""
    x = np.asarray(X, dtype=np.float64)
    y = np.asarray(Y)
    if not np.issubdtype(y.dtype, np.floating):
        y = y.astype(np.float64)
    msk = np.asarray(mask, dtype=bool)
    n, d = x.shape
    m = y.shape[1]
    mu = x.mean(axis=0)
    xc = np.hstack([x - mu, np.ones((n, 1))])
    reg = alpha * np.eye(d + 1)
    reg[d, d] = 0.0
    gram = xc.T @ xc
    rhs = np.empty((d + 1, m))
    for block in column_blocks(n, m):
        rhs[:, block] = xc.T @ np.where(msk[:, block], np.asarray(y[:, block], dtype=np.float64), 0.0)
    coef = np.zeros((d + 1, m))
    coef[d] = np.nan
    for pattern, cols in _mask_patterns(msk):
        n_obs = int(pattern.sum())
        if n_obs == 0:
            continue
        if n_obs == n:
            g = gram
        elif n - n_obs < n_obs:
            miss = xc[~pattern]
            g = gram - miss.T @ miss
        else:
            obs = xc[pattern]
            g = obs.T @ obs
        coef[:, cols] = np.linalg.solve(g + reg + 1e-10 * np.eye(d + 1), rhs[:, cols])
    W = coef[:d]
    b = coef[d] - mu @ W
    return W, b


def _mask_patterns(msk: npt.NDArray[np.bool_]) -> Iterator[tuple[npt.NDArray[np.bool_], npt.NDArray[np.intp]]]:
    """The distinct observation patterns of ``msk``'s columns, each with the columns that share it, one at a
    time (a logged table has a pattern per actor: all of them at once would be another mask). A fully
    observed mask is one pattern without a sort; otherwise the columns are bit-packed and compared as bytes
    (8x less data than ``np.unique(msk.T, axis=0)``, which took 40 s on 2,000 actors)."""
    n, m = msk.shape
    if msk.all():
        yield np.ones(n, dtype=bool), np.arange(m)
        return
    packed = np.ascontiguousarray(np.packbits(msk, axis=0).T)  # (m, ceil(n / 8))
    keys = packed.view(np.dtype((np.void, packed.shape[1]))).ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    for p, j in enumerate(first):
        yield msk[:, j], np.flatnonzero(inverse == p)


@register
class LinearRouter(Router):
    """RouterEval LinearR: one linear map from the query vector to a score per actor. Choice: ridge
    regression of the observed scores (closed form, option ``alpha``=1) instead of the paper's BCE
    with SGD (batch 1, lr 1e-2, 10 epochs); same model class, deterministic and exact."""

    name = "linear"
    fresh_scores = True  # X @ W: a new matrix each call
    logged_recipe = "masked"  # per-actor ridge over the observed cells: only the logged actor gets a target
    summary = "RouterEval LinearR: per-actor ridge regression of score on the query vector"
    defaults: ClassVar[dict[str, Any]] = {"alpha": 1.0}
    constraints: ClassVar[dict[str, Constraint]] = {"alpha": Interval(float, 0, None, closed="neither")}

    _W: npt.NDArray[np.float64]
    _b: npt.NDArray[np.float64]

    def _fit(self, train: RoutingTable, features: Features) -> None:
        W, b = masked_ridge(features.X, train.score, train.observed, float(self.params["alpha"]))
        self._W, self._b = W, np.where(np.isnan(b), prior_means(train.score), b)

    def _scores(self, features: Features) -> npt.ArrayLike:
        out = np.asarray(features.X, dtype=np.float64) @ self._W
        out += self._b  # in place: no second (queries x actors) matrix
        return out


@register
class MLPRouter(Router):
    """RouterEval MLPR: an MLP from the query vector to one sigmoid score per actor, BCE on the
    observed cells (a numpy MLP: sklearn's MLPRegressor cannot mask unobserved targets). Options:
    ``hidden`` (default 128; RouterEval 256; RouterWorld ``1024/512/256/128``), ``epochs`` (20),
    ``lr`` (1e-3, Adam), ``batch_size`` (64), ``weight_decay`` (1e-4). Choice: RouterWorld's MLP is
    a cross-entropy classifier; here it is the multi-output regressor with RouterWorld's sizes.

    Early stopping (only when ``fit`` is given a development part): after each epoch the router routes the
    development queries whose every actor is observed and measures the mean score of its choices (``dev_mu_o``,
    what it is scored by on test); it keeps the best epoch (ties: the earlier) and stops after ``patience`` (5)
    epochs without improvement. Without a development part it trains all ``epochs``, as before."""

    name = "mlp"
    logged_recipe = "correct-only"  # routerworld G.1 MLP: the correct_only subset
    uses_dev = True
    summary = "RouterEval MLPR: MLP predicting each actor's score (hidden=128; RouterWorld 1024/512/256/128)"
    defaults: ClassVar[dict[str, Any]] = {
        "hidden": (128,), "epochs": 20, "lr": 1e-3, "batch_size": 64, "weight_decay": 1e-4, "patience": 5,
    }
    constraints: ClassVar[dict[str, Constraint]] = {**NETWORK_CONSTRAINTS, "patience": Interval(int, 1, None)}

    _net: MaskedMLP

    def _fit(self, train: RoutingTable, features: Features) -> None:
        p = self.params
        self._net = network_from_options(p, "bce", self.seed).fit(features.X, train.score, train.observed)

    def _fit_dev(self, train: RoutingTable, features: Features, dev: DevPart) -> None:
        score, x_dev = dev_scored_rows(self, dev)
        net = network_from_options(self.params, "bce", self.seed)
        stopper = EarlyStopping("dev_mu_o", higher_is_better=True, patience=int(self.params["patience"]))
        kept: list[list[npt.NDArray[np.float32]]] = []

        def on_epoch(epoch: int) -> bool:
            choice = net.predict(x_dev).argmax(axis=1)  # the router's argmax over its scores, as on test
            improved, stop = stopper.update(float(score[np.arange(score.shape[0]), choice].mean()))
            if improved:
                kept[:] = [[w.copy() for w in net.weights], [b.copy() for b in net.biases]]
            return stop

        net.fit(features.X, train.score, train.observed, on_epoch=on_epoch)
        net.weights, net.biases = kept
        self._net = net
        self.early_stopping = stopper.describe(score.shape[0], int(self.params["epochs"]))

    def _scores(self, features: Features) -> npt.ArrayLike:
        return self._net.predict(features.X)


def dev_scored_rows(router: Router, dev: DevPart) -> tuple[npt.NDArray[np.float64], npt.NDArray[Any]]:
    """The development queries a router's choices can be scored on (every actor observed, as on test): their
    scores (n, m) and feature rows; none is a UsageError naming the router."""
    score = np.asarray(dev.table.score, dtype=np.float64)
    complete = ~np.isnan(score).any(axis=1)
    if not complete.any():
        raise UsageError(f"router {router.name!r}: no development query has every actor observed, so no epoch "
                         "can be scored on the development part")
    return score[complete], np.asarray(dev.features.X)[complete]


@register
class MLCRouter(Router):
    """RouterEval MLC: a classifier trained with every optimal actor of the selection vector (SPEC 4:
    correct actors, or those within 95% of the best) as a positive class. Choice: one softmax over
    the observed actors against the selection vector normalised to sum 1 (the paper outputs "a
    probability distribution"); its probabilities are the scores and the selection distribution.
    Options: ``hidden`` (default none: a linear classifier), ``epochs`` (10, as the paper),
    ``lr`` (1e-2), ``batch_size`` (32), ``rel`` (0.95)."""

    name = "mlc"
    logged_recipe = "correct-only"  # a classifier of optimal actors: the selected correct one (G.1)
    summary = "RouterEval MLC: multi-label classifier on the selection vector (optimal actors)"
    defaults: ClassVar[dict[str, Any]] = {
        "hidden": (), "epochs": 10, "lr": 1e-2, "batch_size": 32, "weight_decay": 1e-4, "rel": 0.95,
    }
    constraints: ClassVar[dict[str, Constraint]] = {**NETWORK_CONSTRAINTS, "rel": Interval(float, 0, 1)}

    _net: MaskedMLP

    def _fit(self, train: RoutingTable, features: Features) -> None:
        p = self.params
        s = np.asarray(train.score, dtype=np.float64)
        rows = observed_rows(s)
        target = np.zeros_like(s)
        if rows.any():
            sel = selection_vector(s[rows], rel=float(p["rel"])).astype(np.float64)
            target[rows] = sel / sel.sum(axis=1, keepdims=True)
        self._net = network_from_options(p, "softmax", self.seed).fit(features.X, target, ~np.isnan(s))

    def _scores(self, features: Features) -> npt.ArrayLike:
        return self._net.predict(features.X)

    def _distribution(self, features: Features, scores: FloatMatrix) -> npt.ArrayLike:
        return scores  # the scores of this pass are already a distribution


@register
class NaiveBayesRouter(Router):
    """RouterWorld's Naive Bayes on frozen query vectors. Choice: one Gaussian naive Bayes per actor,
    "correct" vs "wrong", fitted on that actor's observed cells (graded scores act as soft labels);
    the score is the posterior probability of correct, ties broken by the log-odds. Option
    ``var_smoothing`` (0.1 times the largest feature variance; sklearn uses 1e-9, far too little for TF-IDF)."""

    name = "naive-bayes"
    logged_recipe = "correct-only"  # routerworld G.1 Naive Bayes: the correct_only subset
    summary = "RouterWorld Naive Bayes: per-actor Gaussian NB posterior that the actor is correct"
    defaults: ClassVar[dict[str, Any]] = {"var_smoothing": 0.1}
    constraints: ClassVar[dict[str, Constraint]] = {"var_smoothing": Interval(float, 0, None, closed="neither")}

    _coef: dict[str, npt.NDArray[np.float64]]

    def _fit(self, train: RoutingTable, features: Features) -> None:
        x = np.asarray(features.X, dtype=np.float64)
        s = np.asarray(train.score, dtype=np.float64)
        obs = ~np.isnan(s)
        eps = float(self.params["var_smoothing"]) * max(float(x.var(axis=0).max()), 1e-12)
        gmean, gvar = x.mean(axis=0), x.var(axis=0) + eps
        x2 = x * x
        parts: dict[str, npt.NDArray[np.float64]] = {}
        for label, w in (("1", np.where(obs, s, 0.0)), ("0", np.where(obs, 1.0 - s, 0.0))):
            count = w.sum(axis=0)  # (m,)
            safe = np.maximum(count, 1e-12)[:, None]
            mean = (w.T @ x) / safe
            var = (w.T @ x2) / safe - mean**2
            empty = (count < 1e-12)[:, None]
            mean = np.where(empty, gmean, mean)
            var = np.where(empty, gvar, np.maximum(var, 0.0) + eps)
            parts["inv" + label] = 1.0 / var
            parts["mu_inv" + label] = mean / var
            parts["const" + label] = -0.5 * (np.log(2 * np.pi * var).sum(axis=1) + (mean**2 / var).sum(axis=1))
            parts["count" + label] = count
        prior = np.log((parts["count1"] + 1.0) / (parts["count0"] + 1.0))
        self._coef = {
            "quad": -0.5 * (parts["inv1"] - parts["inv0"]),  # (m, d)
            "lin": parts["mu_inv1"] - parts["mu_inv0"],
            "const": parts["const1"] - parts["const0"] + prior,
        }

    def _scores(self, features: Features) -> npt.ArrayLike:
        x = np.asarray(features.X, dtype=np.float64)
        c = self._coef
        log_odds = (x * x) @ c["quad"].T + x @ c["lin"].T + c["const"][None, :]
        prob = 0.5 * (1.0 + np.tanh(0.5 * np.clip(log_odds, -700, 700)))
        scale = np.abs(log_odds).max(axis=1, keepdims=True) + 1.0
        return np.asarray(prob + 1e-6 * log_odds / scale)


@register
class SVMRouter(Router):
    """A linear SVM (one-vs-rest) trained on each training query's best observed actor (SPEC 4's
    oracle label: ties to the fastest, then the cheapest, then the first); scores are the decision
    values, an actor that is never a label scores below all. Options: ``C`` (1.0); ``solver``:
    ``liblinear`` (sklearn LinearSVC, exact), ``sgd`` (averaged SGD on the hinge loss, 20 epochs,
    alpha = 1 / (C n)) or ``auto`` (choice: liblinear up to 200,000 rows x classes, else sgd, since
    LinearSVC takes ~5 s per class on 30,000 x 384 and real tables have up to 112 actors)."""

    name = "svm"
    logged_recipe = "correct-only"  # a best-actor classifier: the selected correct one (G.1)
    summary = "linear SVM (one-vs-rest) on the best-actor label of each training query"
    defaults: ClassVar[dict[str, Any]] = {"C": 1.0, "solver": "auto", "max_iter": 2000}
    constraints: ClassVar[dict[str, Constraint]] = {
        "C": Interval(float, 0, None, closed="neither"), "solver": Options({"auto", "liblinear", "sgd"}),
        "max_iter": Interval(int, 1, None),
    }

    _classes: npt.NDArray[np.intp]
    _model: Any
    solver_used: str

    def _check_table(self, train: RoutingTable) -> None:
        if not observed_rows(train.score).any():
            raise UsageError("router 'svm': the training table has no observed score")

    def _fit(self, train: RoutingTable, features: Features) -> None:
        from sklearn.linear_model import SGDClassifier
        from sklearn.svm import LinearSVC

        solver = self.params["solver"]
        C = float(self.params["C"])
        s = np.asarray(train.score, dtype=np.float64)
        rows = observed_rows(s)
        lat = None if train.latency_s is None else train.latency_s[rows]
        cost = None if train.cost_usd is None else train.cost_usd[rows]
        label = oracle_choice(s[rows], lat, cost)
        self._classes = np.unique(label)
        self._model = None
        n = int(rows.sum())
        if solver == "auto":
            solver = "liblinear" if n * self._classes.shape[0] <= 200_000 else "sgd"
        self.solver_used = solver
        if self._classes.shape[0] < 2:
            return
        if solver == "liblinear":
            model = LinearSVC(C=C, max_iter=self.params["max_iter"], random_state=self.seed)
        else:
            model = SGDClassifier(loss="hinge", alpha=1.0 / (C * n), max_iter=20, tol=None, average=True,
                                  random_state=self.seed)
        self._model = model.fit(features.X[rows], label)

    def _scores(self, features: Features) -> npt.ArrayLike:
        m = len(self.actor_names)
        out = np.full((features.n, m), UNKNOWN_SCORE)
        if self._model is None:
            out[:, self._classes[0]] = 1.0
            return out
        dec = np.asarray(self._model.decision_function(features.X), dtype=np.float64)
        if dec.ndim == 1:
            dec = np.stack([-dec, dec], axis=1)
        low = dec.min(axis=1, keepdims=True) - 1.0
        out = np.broadcast_to(low, (features.n, m)).copy()
        out[:, self._classes] = dec
        return out
