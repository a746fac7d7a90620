"""Collaborative routers: ``mf`` (matrix factorisation, EmbedLLM / RouteLLM), ``hybrid`` (Hybrid-LLM
style fastest-correct classifier) and ``graph`` (a small GraphRouter-spirit propagation model).

All of them learn from the observed training cells only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from routerlab._spec import Constraint, Interval
from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.metrics.latency import fastest_correct
from routerlab.routers._common import (
    FloatMatrix,
    nearest,
    neighbour_matrix,
    observed_rows,
    one_hot,
    prior_means,
    propagate,
)
from routerlab.routers._masked_mlp import NETWORK_CONSTRAINTS, MaskedMLP, network_from_options
from routerlab.routers.base import Router, check_at_most_train, register

if TYPE_CHECKING:
    import scipy.sparse as sp


@register
class MFRouter(Router):
    """Matrix factorisation of the query x actor score matrix (EmbedLLM, RouteLLM's MF): a query's
    embedding is a learned linear projection of its vector, ``u = x P`` (d -> ``dim``), each actor
    has an embedding ``v_a`` and a bias; ``P(correct) = sigmoid(u . v_a + b_a)``. Trained by
    full-batch Adam on the masked BCE of the observed cells (numpy; graded scores are soft
    targets), L2 ``l2`` on P and V. Options: ``dim`` (16), ``epochs`` (300), ``lr`` (0.01)."""

    name = "mf"
    logged_recipe = "masked"  # masked BCE: only the selected model receives gradient
    summary = "matrix factorisation (EmbedLLM/RouteLLM MF): projected query embedding x actor embedding"
    defaults: ClassVar[dict[str, Any]] = {"dim": 16, "epochs": 300, "lr": 0.01, "l2": 1e-4}
    constraints: ClassVar[dict[str, Constraint]] = {
        "dim": Interval(int, 1, 65_536), "epochs": Interval(int, 1, None),
        "lr": Interval(float, 0, None, closed="neither"), "l2": Interval(float, 0, None),
    }

    _P: npt.NDArray[np.float32]
    _V: npt.NDArray[np.float32]
    _b: npt.NDArray[np.float32]
    _mean: npt.NDArray[np.float32]
    _scale: float

    def _fit(self, train: RoutingTable, features: Features) -> None:
        p = self.params
        dim, epochs, lr, l2 = p["dim"], p["epochs"], float(p["lr"]), float(p["l2"])
        x = np.asarray(features.X, dtype=np.float32)
        self._mean = x.mean(axis=0)
        std = float((x - self._mean).std())
        self._scale = std if std > 1e-12 else 1.0
        x = (x - self._mean) / self._scale
        s = np.asarray(train.score, dtype=np.float32)
        obs = ~np.isnan(s)
        y = np.where(obs, s, 0.0).astype(np.float32)
        n_obs = max(int(obs.sum()), 1)
        d = x.shape[1]
        m = s.shape[1]
        rng = np.random.default_rng([self.seed, 0x4D46])
        P = (rng.standard_normal((d, dim)) / np.sqrt(d)).astype(np.float32)
        V = (rng.standard_normal((m, dim)) * 0.1).astype(np.float32)
        rate = np.clip(prior_means(s), 1e-3, 1 - 1e-3)
        b = np.log(rate / (1 - rate)).astype(np.float32)
        with threadpool_limits(limits=1, user_api="blas"):  # see _masked_mlp: threads thrash on a shared machine
            self._train(x, y, obs, n_obs, [P, V, b], epochs, lr, l2)
        self._P, self._V, self._b = P, V, b

    @staticmethod
    def _train(
        x: npt.NDArray[np.float32], y: npt.NDArray[np.float32], obs: npt.NDArray[np.bool_], n_obs: int,
        params: list[npt.NDArray[np.float32]], epochs: int, lr: float, l2: float,
    ) -> None:
        """Full-batch Adam on [P, V, b], in place."""
        P, V, b = params
        m1 = [np.zeros_like(q) for q in params]
        m2 = [np.zeros_like(q) for q in params]
        for step in range(1, epochs + 1):
            U = x @ P
            z = U @ V.T + b
            g = ((0.5 * (1.0 + np.tanh(0.5 * z)) - y) * obs / n_obs).astype(np.float32)  # dLoss/dz
            grads = [x.T @ (g @ V) + l2 * P, g.T @ U + l2 * V, g.sum(axis=0)]
            lr_t = lr * np.sqrt(1 - 0.999**step) / (1 - 0.9**step)
            for i, (q, gr) in enumerate(zip(params, grads, strict=True)):
                m1[i] = 0.9 * m1[i] + 0.1 * gr
                m2[i] = 0.999 * m2[i] + 0.001 * gr * gr
                q -= (lr_t * m1[i] / (np.sqrt(m2[i]) + 1e-8)).astype(np.float32)

    def _scores(self, features: Features) -> npt.ArrayLike:
        x = (np.asarray(features.X, dtype=np.float32) - self._mean) / self._scale
        z = (x @ self._P) @ self._V.T + self._b
        return 0.5 * (1.0 + np.tanh(0.5 * z.astype(np.float64)))


@register
class HybridRouter(Router):
    """Hybrid-LLM style (RouterWorld's variant): a classifier of each training query's fastest
    correct actor (correct = score >= ``threshold``; RouterWorld's correct_list[0]); a query with no
    correct actor is labelled with its fastest observed actor (any choice scores 0). Without
    latency the label is the best observed actor (ties: cheapest, first). Choice: a softmax
    classifier on the frozen vectors (``hidden``=0: multinomial logistic regression) instead of
    fine-tuned DeBERTa; its class probabilities are the scores and the selection distribution."""

    name = "hybrid"
    logged_recipe = "correct-only"  # routerworld G.1 Hybrid-LLM: the selected model as label, correct only
    summary = "Hybrid-LLM style: classifier of the fastest correct actor (best actor without latency)"
    defaults: ClassVar[dict[str, Any]] = {
        "hidden": (), "epochs": 20, "lr": 1e-3, "batch_size": 64, "weight_decay": 1e-4, "threshold": 0.5,
    }
    constraints: ClassVar[dict[str, Constraint]] = {**NETWORK_CONSTRAINTS, "threshold": Interval(float, 0, 1)}

    _net: MaskedMLP
    label_kind: str

    def _check_table(self, train: RoutingTable) -> None:
        if not observed_rows(train.score).any():
            raise UsageError("router 'hybrid': the training table has no observed score")

    def _fit(self, train: RoutingTable, features: Features) -> None:
        p = self.params
        s = np.asarray(train.score, dtype=np.float64)
        rows = observed_rows(s)
        lat = None if train.latency_s is None else train.latency_s[rows]
        cost = None if train.cost_usd is None else train.cost_usd[rows]
        label = fastest_correct(s[rows], lat, cost, float(p["threshold"]))
        self.label_kind = "fastest correct" if lat is not None else "best observed"
        target = one_hot(label, s.shape[1])
        self._net = network_from_options(p, "softmax", self.seed).fit(features.X[rows], target)

    def _scores(self, features: Features) -> npt.ArrayLike:
        return self._net.predict(features.X)

    def _distribution(self, features: Features, scores: FloatMatrix) -> npt.ArrayLike:
        return scores  # the scores of this pass are already a distribution


@register
class GraphRouter(Router):
    """A small GraphRouter-spirit model (Feng et al. 2025b): a bipartite graph of training queries
    and actors whose edges are the observed scores, plus a k-nearest-neighbour query-query graph
    (cosine, ``k``=10, weights = similarity clipped at 0). Training scores are smoothed by
    ``hops`` steps of label propagation on the query graph (observed edges keep weight
    1 - ``alpha``, unobserved ones are filled by propagation); a routed query links to its k nearest
    training queries and its score for an actor is the weighted mean of their smoothed scores,
    shrunk to the actor's train mean with weight ``prior_weight``. Choice: message passing without
    learned weights (GraphRouter trains a GNN), so it is deterministic and CPU-cheap."""

    name = "graph"
    logged_recipe = "masked"  # routerworld G.1 GraphRouter: only the selected model receives gradient
    summary = "GraphRouter-spirit: query-actor score graph + kNN query graph, label propagation"
    defaults: ClassVar[dict[str, Any]] = {"k": 10, "hops": 2, "alpha": 0.5, "prior_weight": 0.1}
    constraints: ClassVar[dict[str, Constraint]] = {
        "k": Interval(int, 1, None), "hops": Interval(int, 0, 100), "alpha": Interval(float, 0, 1),
        "prior_weight": Interval(float, 0, None),
    }

    _X: npt.NDArray[np.float32]
    _smooth: FloatMatrix
    _prior: npt.NDArray[np.float64]

    def _edges(self, query: npt.ArrayLike, exclude_self: bool) -> sp.csr_matrix:
        idx, sim = nearest(query, self._X, self.params["k"], "cosine", exclude_self=exclude_self)
        return neighbour_matrix(idx, np.maximum(sim, 0.0) + 1e-6, self._X.shape[0])

    def _check_table(self, train: RoutingTable) -> None:
        check_at_most_train(self, "k", train)

    def _fit(self, train: RoutingTable, features: Features) -> None:
        p = self.params
        self._X = features.X
        s = np.asarray(train.score, dtype=np.float64)
        obs = ~np.isnan(s)
        self._prior = prior_means(s)
        F = np.where(obs, s, self._prior[None, :])
        hops = p["hops"] if features.n > 1 else 0
        if hops:
            W = self._edges(features.X, exclude_self=True)
            deg = np.asarray(W.sum(axis=1)).ravel()
            import scipy.sparse as sp  # here, not at the top: listing the routers needs no scipy

            W = sp.diags(1.0 / np.maximum(deg, 1e-12)) @ W
            alpha = float(p["alpha"])
            for _ in range(hops):
                spread = np.asarray(W @ F)
                F = np.where(obs, (1.0 - alpha) * s + alpha * spread, spread)
        self._smooth = F

    def _scores(self, features: Features) -> npt.ArrayLike:
        W = self._edges(features.X, exclude_self=False)
        return propagate(W, self._smooth, self._prior, float(self.params["prior_weight"]))
