"""``routerlab.testing.check_router`` passes every router of the zoo and fails routers that break the contract:
a distribution that disagrees with the scores, a router that accepts test outcomes, non-deterministic scores, and a
router whose choices depend on anything but its features (a hidden query column, read by name, from the stack or
from memory; a test outcome)."""

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


# ------------------------------------------------------------------ a router sees its features only
class _ReadsHidden(_Means):
    """Routes to the actor a hidden per-query column names, read from its features by name."""

    name = "reads-hidden-test"

    def _scores(self, features: Features) -> npt.ArrayLike:
        s = np.tile(self._means, (features.n, 1))
        named = features.queries.extra["best_actor"]
        s[np.arange(features.n), [features.actor_names.index(str(a)) for a in named]] += 10.0
        return s


class _ReadsHiddenInFit(_Means):
    """Reads the latent difficulty of its training queries."""

    name = "reads-hidden-in-fit-test"

    def _fit(self, train: RoutingTable, features: Features) -> None:
        super()._fit(train, features)
        self._means = self._means + 0.0 * float(np.mean(train.queries.extra["difficulty"]))


def _tables_on_the_stack() -> list[RoutingTable]:
    """Every routing table referenced by a caller's local variables: what a router walking the stack finds."""
    import inspect

    found = []
    frame = inspect.currentframe()
    while frame is not None:
        found += [v for v in frame.f_locals.values() if isinstance(v, RoutingTable)]
        frame = frame.f_back
    return found


def _tables_in_memory() -> list[RoutingTable]:
    import gc

    return [o for o in gc.get_objects() if isinstance(o, RoutingTable)]


class _Finds(_Means):
    """Finds the table its test queries came from (``finder``) and routes to the actor its hidden best_actor
    column names, or, lacking one, to the actor with the best test outcome: a cheat the features cannot stop."""

    name = "finds-the-table-test"
    finder = staticmethod(_tables_on_the_stack)

    def _scores(self, features: Features) -> npt.ArrayLike:
        s = np.tile(self._means, (features.n, 1))
        for t in self.finder():
            if t.n_queries == features.n and np.array_equal(t.queries.ids, features.queries.ids):
                if "best_actor" in t.queries.hidden:
                    named = t.queries.extra["best_actor"]
                    s[np.arange(features.n), [features.actor_names.index(str(a)) for a in named]] += 10.0
                else:
                    s = s + 10.0 * np.nan_to_num(t.score)
                break
        return s


class _FindsInMemory(_Finds):
    name = "finds-in-memory-test"
    finder = staticmethod(_tables_in_memory)


class _UsesTierIfVisible(_Means):
    """Honest: reads the query column ``tier`` where the table declares it visible, else does without."""

    name = "uses-tier-if-visible-test"
    seen: ClassVar[list[object]] = []

    def _fit(self, train: RoutingTable, features: Features) -> None:
        super()._fit(train, features)
        type(self).seen.append(sorted(train.queries.extra))

    def _scores(self, features: Features) -> npt.ArrayLike:
        s = np.tile(self._means, (features.n, 1))
        tier = features.queries.extra.get("tier")
        if tier is not None:
            s[:, -1] += np.asarray([t == "hard" for t in tier.tolist()], dtype=float)
        return s


@pytest.mark.parametrize(("cheat", "rule"), [
    (_ReadsHidden(), "reads a hidden query column .*'best_actor' is hidden from routers"),
    (_ReadsHiddenInFit(), "reads a hidden query column .*'difficulty' is hidden from routers"),
    (_Finds(), "choices change on .* test queries when only hidden query columns and test outcomes are permuted"),
    (_FindsInMemory(), "choices change on .* when only hidden query columns and test outcomes are permuted"),
])
def test_a_router_reading_anything_but_its_features_fails(cheat: Router, rule: str) -> None:
    with pytest.raises(AssertionError, match=rule) as info:
        check_router(cheat)
    assert "may depend only on its features (a query's id, text, dataset, split and visible columns)" in str(
        info.value)


def test_the_finders_do_find_the_outcomes() -> None:
    """The stack and memory cheats are real: on a table of the demo, routed where its table is in reach, they
    score the oracle; check_router fails them only because it keeps the unpermuted tables out of reach."""
    from routerlab.data.demo import demo

    table = demo(300)
    train, test = table.select_split("train"), table.select_split("test")
    ftrain, ftest = Features(np.zeros((train.n_queries, 1)), train, "z"), Features(np.zeros((test.n_queries, 1)),
                                                                                   test, "z")
    oracle = float(np.nanmax(test.score, axis=1).mean())
    for cheat in (_Finds(), _FindsInMemory()):
        choice = cheat.fit(train, ftrain).route(ftest).choice
        assert float(test.score[np.arange(test.n_queries), choice].mean()) == oracle


def test_an_honest_router_reads_a_column_only_when_visible() -> None:
    from routerlab.data.demo import demo

    check_router(_UsesTierIfVisible())  # the demo's tier is hidden: .get gives None, the router does without
    table = demo(300)
    _UsesTierIfVisible.seen.clear()
    for t, expect in ((table, []), (table.with_visible(["tier"]), ["tier"])):
        train, test = t.select_split("train"), t.select_split("test")
        router = _UsesTierIfVisible().fit(train, Features(np.zeros((train.n_queries, 1)), train, "z"))
        bump = router.scores(Features(np.zeros((test.n_queries, 1)), test, "z"))[:, -1] - router._means[-1]
        hard = np.asarray([x == "hard" for x in test.queries.extra["tier"].tolist()], dtype=float)
        assert hard.any() and np.array_equal(bump, hard if expect else np.zeros(test.n_queries))
    assert _UsesTierIfVisible.seen == [[], ["tier"]]  # the training table too: hidden columns never reach _fit
