"""Nearest-neighbour routers: ``knn`` (RouterWorld KNN k=5, cosine; HSE KNN-1/3/10 with ``k``) and
``prknn`` (RouterEval PRknn: Euclidean, K=5).

A query's score for an actor is the mean observed score of that actor on the query's k nearest
training queries (NaN cells skipped; an actor no neighbour observed falls back to its train mean).
Search is blocked matrix products (see ``_common.nearest``), so 36,000 x 30,000 runs in memory.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from routerlab._spec import Constraint, Interval, Options
from routerlab.data.table import RoutingTable
from routerlab.features.base import Features
from routerlab.routers._common import SearchBase, nearest, neighbour_matrix, prior_means, propagate, search_base
from routerlab.routers.base import Router, check_at_most_train, register

# Tie-break between actors with equal neighbour means: a tiny bonus proportional to the actor's train
# mean, so a tie goes to the better actor overall instead of the first column.
_TIE_BREAK = 1e-6


@register
class KNNRouter(Router):
    """k-nearest-neighbour router (RouterWorld KNN k=5; HSE KNN-k with cosine similarity). Options:
    ``k`` (default 5), ``metric`` (cosine | euclidean), ``weighted`` (weight neighbours by
    similarity; default False, the papers' plain mean). Ties between actors go to the better actor
    on train (paper-unspecified; argmax would take the first column)."""

    name = "knn"
    logged_recipe = "correct-only"  # routerworld G.1: the selected model as label, correct samples only
    fresh_scores = True  # propagate's output: a new matrix each call
    summary = "mean score of each actor on the k nearest train queries (cosine, k=5)"
    defaults: ClassVar[dict[str, Any]] = {"k": 5, "metric": "cosine", "weighted": False}
    constraints: ClassVar[dict[str, Constraint]] = {
        "k": Interval(int, 1, None), "metric": Options({"cosine", "euclidean"}), "weighted": Options({True, False}),
    }

    _X: npt.NDArray[np.float32]
    _base: SearchBase  # _X prepared for the search once, at fit (not re-normalised on every call)
    _score: npt.NDArray[np.float32]  # the training table's own matrix (no copy): read a block at a time
    _prior: npt.NDArray[np.float64]

    def _check_table(self, train: RoutingTable) -> None:
        check_at_most_train(self, "k", train)

    def _fit(self, train: RoutingTable, features: Features) -> None:
        self._X = features.X
        self._base = search_base(self._X, self.params["metric"])
        self._score = train.score
        self._prior = prior_means(self._score)

    def _scores(self, features: Features) -> npt.ArrayLike:
        idx, sim = nearest(features.X, self._base, self.params["k"], self.params["metric"])
        if self.params["weighted"]:
            # cosine in [-1, 1] -> (0, 2]; euclidean -d^2 -> 1 / (1 + d)
            w = sim + 1.0 + 1e-9 if self.params["metric"] == "cosine" else 1.0 / (1.0 + np.sqrt(-np.minimum(sim, 0)))
        else:
            w = np.ones_like(sim)
        W = neighbour_matrix(idx, w, self._X.shape[0])
        out = propagate(W, self._score, self._prior)
        out += _TIE_BREAK * self._prior[None, :]  # in place: no second (queries x actors) matrix
        return out


@register
class PRKNNRouter(KNNRouter):
    """RouterEval's PRknn: the K=5 training queries with the smallest Euclidean distance; the
    actor with the highest average score on them. Same options as ``knn``."""

    name = "prknn"
    summary = "RouterEval PRknn: mean score on the K=5 nearest train queries (Euclidean)"
    defaults: ClassVar[dict[str, Any]] = {"k": 5, "metric": "euclidean", "weighted": False}
