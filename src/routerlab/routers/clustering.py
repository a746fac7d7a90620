"""Cluster routers: ``cluster`` (RouterEval C-RoBERTa) and ``avenger`` (RouterWorld's Avenger,
Zhang et al. 2025b).

Both cluster the training query vectors with k-means (scikit-learn, seeded) and summarise the
actors per cluster from the observed training cells only; a cluster where an actor was never
observed uses that actor's overall train mean.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from routerlab._spec import Constraint, Interval, Options
from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.metrics.selection import softmax
from routerlab.routers._common import (
    FloatMatrix,
    l2_normalize,
    ldcg_matrix,
    neighbour_matrix,
    one_hot,
    prior_means,
    propagate,
)
from routerlab.routers.base import Router, check_at_most_train, register


def _kmeans(X: npt.ArrayLike, k: int, seed: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.intp]]:
    """(centres (k', d), label per row) with k' = min(k, distinct rows)."""
    from sklearn.cluster import KMeans

    x = np.asarray(X, dtype=np.float64)
    distinct = np.unique(x, axis=0).shape[0] if x.shape[0] <= 50_000 else x.shape[0]
    k = max(1, min(int(k), distinct))
    km = KMeans(n_clusters=k, random_state=seed, n_init="auto").fit(x)
    return np.asarray(km.cluster_centers_, dtype=np.float64), np.asarray(km.labels_, dtype=np.intp)


def _cluster_means(labels: npt.NDArray[np.intp], values: npt.ArrayLike, k: int, prior: npt.ArrayLike) -> FloatMatrix:
    """(k, m) mean observed value per cluster and actor; ``prior`` where a cluster never observed it."""
    member = neighbour_matrix(labels[:, None], 1.0, k).T.tocsr()  # (k, n) membership
    return propagate(member, values, np.asarray(prior, dtype=np.float64))


def _sq_distances(X: npt.ArrayLike, centres: npt.ArrayLike) -> FloatMatrix:
    x = np.asarray(X, dtype=np.float64)
    c = np.asarray(centres, dtype=np.float64)
    d = (x * x).sum(axis=1)[:, None] - 2.0 * x @ c.T + (c * c).sum(axis=1)[None, :]
    return np.asarray(np.maximum(d, 0.0))


def _every_model_seen(train: RoutingTable) -> bool:
    """False for a table built from logged feedback by the correct-only or masked recipe (one model seen per
    query: L-DCG ranks are undefined, routerworld G.1), True for full feedback and the DR pseudo-full table."""
    return train.meta.get("logged_recipe") in (None, "dr")


@register
class ClusterRouter(Router):
    """RouterEval C-RoBERTa: k-means on the training query vectors (``k``=3 as the paper), the
    actor with the best mean observed score per cluster; a query goes to its nearest centre
    (Euclidean). Scores: the nearest cluster's actor means. Distribution (SPEC 4): soft membership
    ``softmax(-distance / (temperature * s))`` over clusters mapped to each cluster's actor, with s
    the mean train distance to the own centre (choice: makes ``temperature``=1 scale-free)."""

    name = "cluster"
    logged_recipe = "correct-only"  # most often selected-and-correct actor per cluster (G.1 style)
    summary = "RouterEval C-RoBERTa: k-means (k=3), best actor of the nearest cluster"
    defaults: ClassVar[dict[str, Any]] = {"k": 3, "temperature": 1.0}
    constraints: ClassVar[dict[str, Constraint]] = {
        "k": Interval(int, 1, None), "temperature": Interval(float, 0, None, closed="neither"),
    }

    _centres: FloatMatrix
    _means: FloatMatrix
    _scale: float

    def _check_table(self, train: RoutingTable) -> None:
        check_at_most_train(self, "k", train)

    def _fit(self, train: RoutingTable, features: Features) -> None:
        self._centres, labels = _kmeans(features.X, self.params["k"], self.seed)
        prior = prior_means(train.score)
        self._means = _cluster_means(labels, train.score, self._centres.shape[0], prior)
        self._means = self._means + 1e-6 * prior[None, :]  # ties: the better actor overall
        d = np.sqrt(_sq_distances(features.X, self._centres))
        self._scale = max(float(d[np.arange(d.shape[0]), labels].mean()), 1e-12)

    def _scores(self, features: Features) -> npt.ArrayLike:
        nearest = _sq_distances(features.X, self._centres).argmin(axis=1)
        return np.asarray(self._means[nearest])

    def _distribution(self, features: Features, scores: FloatMatrix) -> npt.ArrayLike:
        d = np.sqrt(_sq_distances(features.X, self._centres))
        member = softmax(-d / (float(self.params["temperature"]) * self._scale))
        best = one_hot(self._means.argmax(axis=1), self._means.shape[1])  # (k, m)
        return member @ best


@register
class AvengerRouter(Router):
    """RouterWorld's Avenger (Zhang et al. 2025b): k-means (k=64) on L2-normalised query vectors;
    per cluster an actor ranking by mean L-DCG when the training table has latency (SPEC 5,
    correct = score >= ``threshold``), else by mean score; a query takes its ``top``=11 nearest
    centres by cosine distance, weighted ``softmax(-beta * distance)`` with beta=3, and each cluster
    votes ``1 / (rank + 0.1)`` (rank 0 = first) for every actor; scores are the weighted votes.
    Choices: the vote and the weighting follow the Avenger method description; ranking ties go to
    the lower index. Distribution: the cluster weights mapped to each cluster's first actor. Logged
    feedback (routerworld G.1): ranked by each actor's mean observed score per cluster (the "masked" recipe),
    since L-DCG needs every model; ``logged=dr`` restores L-DCG ranks on the pseudo-full table."""

    name = "avenger"
    # routerworld G.1: accuracy over the selected field only = per-cluster mean of the observed cells
    logged_recipe = "masked"
    summary = "RouterWorld Avenger: k-means 64, per-cluster L-DCG rankings, top-11 clusters vote (beta 3)"
    defaults: ClassVar[dict[str, Any]] = {"k": 64, "top": 11, "beta": 3.0, "rank_by": "auto", "threshold": 0.5}
    constraints: ClassVar[dict[str, Constraint]] = {
        "k": Interval(int, 1, None), "top": Interval(int, 1, None), "beta": Interval(float, 0, None),
        "rank_by": Options({"auto", "ldcg", "accuracy"}), "threshold": Interval(float, 0, 1),
    }

    _centres: FloatMatrix
    _votes: FloatMatrix
    _first: npt.NDArray[np.intp]
    ranked_by: str

    def _check_table(self, train: RoutingTable) -> None:
        check_at_most_train(self, "k", train)
        if self.params["rank_by"] == "ldcg" and train.latency_s is None:
            raise UsageError("router 'avenger': rank_by=ldcg needs latency in the training table")
        if self.params["rank_by"] == "ldcg" and not _every_model_seen(train):
            raise UsageError("router 'avenger': rank_by=ldcg needs every model's outcome on each training query; "
                             "logged feedback shows one (use logged=dr, or rank_by=accuracy as routerworld G.1)")

    def _fit(self, train: RoutingTable, features: Features) -> None:
        p = self.params
        use_ldcg = p["rank_by"] == "ldcg" or (
            p["rank_by"] == "auto" and train.latency_s is not None and _every_model_seen(train))
        x = l2_normalize(features.X)
        centres, labels = _kmeans(x, p["k"], self.seed)
        self._centres = np.asarray(l2_normalize(centres), dtype=np.float64)
        score = np.asarray(train.score, dtype=np.float64)
        if use_ldcg:
            assert train.latency_s is not None
            values = ldcg_matrix(score, train.latency_s, float(p["threshold"]))
        else:
            values = score
        self.ranked_by = "ldcg" if use_ldcg else "accuracy"
        means = _cluster_means(labels, values, self._centres.shape[0], prior_means(values))
        m = means.shape[1]
        order = np.lexsort((np.broadcast_to(np.arange(m), means.shape), -means), axis=1)
        rank = np.empty_like(order)
        np.put_along_axis(rank, order, np.broadcast_to(np.arange(m), means.shape).copy(), axis=1)
        self._votes = np.asarray(1.0 / (rank + 0.1), dtype=np.float64)  # (k, m)
        self._first = order[:, 0]

    def _weights(self, features: Features) -> FloatMatrix:
        """(n, k) cluster weights: softmax(-beta * cosine distance) over the top nearest, 0 elsewhere."""
        dist = 1.0 - l2_normalize(features.X).astype(np.float64) @ self._centres.T
        k = self._centres.shape[0]
        top = min(self.params["top"], k)  # top > k: every cluster votes
        keep = np.argpartition(dist, top - 1, axis=1)[:, :top] if top < k else np.tile(np.arange(k), (dist.shape[0], 1))
        logits = np.full(dist.shape, -np.inf)
        np.put_along_axis(logits, keep, -float(self.params["beta"]) * np.take_along_axis(dist, keep, axis=1), axis=1)
        return softmax(logits)

    def _scores(self, features: Features) -> npt.ArrayLike:
        return self._weights(features) @ self._votes

    def _distribution(self, features: Features, scores: FloatMatrix) -> npt.ArrayLike:
        return self._weights(features) @ one_hot(self._first, self._votes.shape[1])
