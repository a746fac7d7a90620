"""``routerlab.testing.check_router`` passes every router of the zoo and fails routers that break the contract:
a distribution that disagrees with the scores, a router that accepts test outcomes, non-deterministic scores."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pytest

from routerlab.data.table import RoutingTable
from routerlab.features.base import Features
from routerlab.routers import Router, routers
from routerlab.testing import check_router
from tests.routers.conftest import make


@pytest.mark.parametrize("name", sorted(n for n, c in routers().items() if not c.needs_backend))  # LLM: own tests
def test_every_router_passes(name: str) -> None:
    check_router(make(name), n_queries=300)


class _Means(Router):
    """Honest: each actor's mean training score for every query."""

    name = "means-test"
    defaults: ClassVar[dict[str, Any]] = {}

    def _fit(self, train: RoutingTable, features: Features) -> None:
        self._means = np.nan_to_num(np.nanmean(train.score, axis=0), nan=0.0)

    def _scores(self, features: Features) -> npt.ArrayLike:
        return np.tile(self._means, (features.n, 1))


class _Disagrees(_Means):
    """Chooses the best actor but says it never picks it."""

    name = "disagrees-test"

    def _distribution(self, features: Features, scores: np.ndarray) -> npt.ArrayLike:
        p = np.ones_like(scores)
        p[np.arange(features.n), scores.argmax(axis=1)] = 0.0
        return p / p.sum(axis=1, keepdims=True)


class _Peeks(_Means):
    """Claims to learn from training feedback only, yet takes the test outcomes."""

    name = "peeks-test"

    def reveal(self, outcomes: RoutingTable) -> _Peeks:
        self._outcomes = outcomes
        return self


class _Noisy(_Means):
    """Different numbers on every fit, whatever the seed."""

    name = "noisy-test"
    _calls = 0

    def _fit(self, train: RoutingTable, features: Features) -> None:
        super()._fit(train, features)
        type(self)._calls += 1
        self._means = self._means + 1e-3 * type(self)._calls


def test_an_honest_router_passes() -> None:
    check_router(_Means())


@pytest.mark.parametrize(("cheat", "rule"), [
    (_Disagrees(), "probability 0"),
    (_Peeks(), "accepts test outcomes"),
    (_Noisy(), "same seed"),
])
def test_cheats_fail_naming_the_rule(cheat: Router, rule: str) -> None:
    with pytest.raises(AssertionError, match=rule):
        check_router(cheat)
