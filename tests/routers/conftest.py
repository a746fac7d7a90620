"""Shared fixtures of the router tests: a small demo table split into train/test, TF-IDF vectors fitted
on the training texts, and small settings for the slower learners so the whole folder stays quick."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

from routerlab.data.table import RoutingTable
from routerlab.datasets import demo
from routerlab.features.base import Features
from routerlab.routers import Router, get_router

# Small settings for the tests only (defaults are sized for real data).
SMALL: dict[str, dict[str, Any]] = {
    "mlp": {"hidden": 32, "epochs": 8},
    "mf": {"epochs": 120},
    "avenger": {"k": 16},
    "probe-dirichlet": {"epochs": 5},
    "probe-mean": {"epochs": 5},
    "probe-final": {"epochs": 5},
    "fixed": {"actor": "large-120b"},  # fixed has no default actor: a demo actor
}


@dataclass(frozen=True)
class Data:
    train: RoutingTable
    test: RoutingTable
    ftrain: Features
    ftest: Features
    vectorizer: TfidfVectorizer

    def features(self, table: RoutingTable) -> Features:
        return Features(self.vectorizer.transform(table.queries.text).toarray(), table, "tfidf")


@pytest.fixture(scope="session")
def data() -> Data:
    t = demo(1200, seed=3)
    train, test = t.select_split("train"), t.select_split("test")
    vec = TfidfVectorizer(max_features=600, sublinear_tf=True).fit(train.queries.text)
    ftr = Features(vec.transform(train.queries.text).toarray(), train, "tfidf")
    fte = Features(vec.transform(test.queries.text).toarray(), test, "tfidf")
    return Data(train, test, ftr, fte, vec)


def make(name: str, seed: int = 0, **params: Any) -> Router:
    return get_router(name, seed=seed, **{**SMALL.get(name, {}), **params})


def fit_for_test(router: Router, data: Data) -> Router:
    """Fit on the training split; a bound (the oracle) is also handed the test outcomes, as protocols do."""
    router.fit(data.train, data.ftrain)
    return router.reveal(data.test) if router.uses_test_labels else router


@pytest.fixture(scope="session")
def fitted(data: Data) -> Callable[[str], Router]:
    """Each router fitted once on the clean training split (cached for the session)."""
    cache: dict[str, Router] = {}

    def get(name: str) -> Router:
        if name not in cache:
            cache[name] = fit_for_test(make(name), data)
        return cache[name]

    return get


def mean_score(table: RoutingTable, choice: np.ndarray) -> float:
    return float(table.score[np.arange(choice.shape[0]), choice].mean())
