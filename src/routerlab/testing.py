"""Checks a router must pass to honour routerlab's contract, for built-ins and plugins alike
(in the spirit of scikit-learn's ``check_estimator``)::

    from routerlab.testing import check_router
    check_router(MyRouter())          # raises AssertionError naming the broken rule

The rules: after ``fit`` on a small synthetic split, one ``route`` pass gives finite scores of shape (n, m), the
choice is their argmax, and the distribution is a probability distribution per query that agrees with the scores
(it *is* the softmax of the scores unless the router has a distribution of its own, and then it gives the chosen
actor positive probability); the same seed gives the same numbers; unobserved (NaN) training cells do not break
it; it never sees test outcomes (only a bound marked ``uses_test_labels`` accepts them, through ``reveal``); and
its choices depend on its features only (:data:`FEATURES_ONLY`): refitted and rerouted with every hidden query
column permuted across queries (the demo's latent ``difficulty`` and ``tier``, plus a column naming each query's
best actor, as RouterBench's oracle column does) and the test outcomes permuted across test queries, it must make
exactly the same choices, and reading a hidden column by name fails the check.

A two-model router (``two_model``, SPEC 6) is checked on the demo's smallest and largest actor (small first) with
synthetic small-model signals (``hidden``, ``option_logits``, ``self_ask``, ``samples``) made from a hash of each
query's text, never from its outcomes; it needs both outcomes of every training query (the two-model protocol drops
the others), so the unobserved-cells rule does not apply to it.
"""

from __future__ import annotations

import copy
import hashlib
import secrets
from dataclasses import replace

import numpy as np

from routerlab.data.demo import demo
from routerlab.data.table import HiddenColumnError, Queries, RoutingTable
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.metrics.selection import softmax
from routerlab.routers.base import Router, Routing


def _features(train: RoutingTable, test: RoutingTable) -> tuple[Features, Features]:
    """Cheap, deterministic query vectors: hashed bag of words of each text (no encoder needed)."""
    def vectors(table: RoutingTable) -> np.ndarray:
        X = np.zeros((table.n_queries, 64), dtype=np.float32)
        for i, text in enumerate(table.queries.text.tolist()):
            for word in str(text).lower().split():
                X[i, sum(word.encode()) % 64] += 1.0
        return np.asarray(X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0), dtype=np.float32)

    return Features(vectors(train), train, "hashed-words"), Features(vectors(test), test, "hashed-words")


def _text_rng(text: str) -> np.random.Generator:
    return np.random.default_rng(int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little"))


def synthetic_signals(table: RoutingTable, layers: int = 4, dim: int = 16, options: int = 4, samples: int = 5
                      ) -> dict[str, np.ndarray]:
    """Deterministic stand-ins for a small model's signals (shapes and dtypes as
    :mod:`routerlab.features.signals` gives them), drawn from a hash of each query's text only."""
    n = table.n_queries
    out: dict[str, np.ndarray] = {
        "hidden": np.empty((n, layers, dim), np.float16), "option_logits": np.empty((n, options), np.float32),
        "self_ask": np.empty(n, np.float32), "samples": np.empty((n, samples), np.int32)}
    for i, text in enumerate(table.queries.text.tolist()):
        rng = _text_rng(str(text))
        out["hidden"][i] = rng.normal(size=(layers, dim))
        out["option_logits"][i] = rng.normal(size=options) * 2
        out["self_ask"][i] = rng.normal()
        out["samples"][i] = rng.integers(0, options, size=samples)
    return out


def _two_model_view(train: RoutingTable, test: RoutingTable) -> tuple[RoutingTable, RoutingTable]:
    """The demo restricted to its smallest and largest actor (small first)."""
    order = np.argsort(train.actors.params_b, kind="stable")
    pair = [train.actor_names[int(order[0])], train.actor_names[int(order[-1])]]
    return train.select_actors(pair), test.select_actors(pair)


FEATURES_ONLY = ("a router's choices may depend only on its features (a query's id, text, dataset, split and "
                 "visible columns) and its training feedback, never on a hidden query column or a test outcome")
"""The rule the visibility check enforces, as its error states it."""

BEST_ACTOR = "best_actor"
"""The hidden column the visibility check adds: the name of each query's best actor (first on ties)."""


def _with_best_actor(table: RoutingTable) -> RoutingTable:
    """``table`` with a hidden query column naming each query's best actor, as RouterBench's
    ``oracle_model_to_route_to`` does: what a cheat would read."""
    q = table.queries
    best = np.asarray(table.actor_names, dtype=object)[np.nan_to_num(table.score, nan=-1.0).argmax(axis=1)]
    return replace(table, queries=Queries(q.ids, q.text, q.dataset, q.split, {**q.extra, BEST_ACTOR: best},
                                          q.visible))


def _shuffled(table: RoutingTable, rng: np.random.Generator, *, outcomes: bool) -> RoutingTable:
    """``table`` with its hidden query columns permuted across queries (one permutation for all of them) and,
    with ``outcomes``, its matrices' rows permuted across queries by another; ids, texts, datasets, splits and
    visible columns stay."""
    q, n = table.queries, table.n_queries
    rows = rng.permutation(n)
    extra = {k: (np.asarray(v)[rows] if k in q.hidden else v) for k, v in q.extra.items()}
    queries = Queries(q.ids, q.text, q.dataset, q.split, extra, q.visible)
    mats = {k: v[rng.permutation(n)] for k, v in table.matrices().items()} if outcomes else {}
    return replace(table, queries=queries, **mats)  # type: ignore[arg-type]


def _demo_split(router: Router, n_queries: int, seed: int, tag: str, *, shuffle: bool = False
                ) -> tuple[RoutingTable, RoutingTable, Features, Features]:
    """The demo's train and test splits (two-model routers: their two-model view) with a :data:`BEST_ACTOR`
    column and query ids that carry ``tag`` (new for each check, so no other copy of the demo alive in the process
    matches them), and their features; with ``shuffle``, the hidden columns of both splits and the test outcomes
    permuted (:func:`_shuffled`). Nothing else refers to the tables made on the way."""
    table = demo(n_queries, seed=seed)
    q = table.queries
    table = replace(table, queries=Queries(np.array([f"{tag}{i}" for i in q.ids.tolist()], dtype=object), q.text,
                                           q.dataset, q.split, q.extra, q.visible))
    train, test = table.select_split("train"), table.select_split("test")
    del table
    two_model = bool(getattr(router, "two_model", False))
    if two_model:
        train, test = _two_model_view(train, test)
    train, test = _with_best_actor(train), _with_best_actor(test)
    if shuffle:
        rng = np.random.default_rng([seed, 20])
        train, test = _shuffled(train, rng, outcomes=False), _shuffled(test, rng, outcomes=True)
    ftrain, ftest = _features(train, test)
    if two_model:
        ftrain, ftest = ftrain.with_signals(synthetic_signals(train)), ftest.with_signals(synthetic_signals(test))
    return train, test, ftrain, ftest


def _reads_hidden(router: Router, exc: HiddenColumnError) -> AssertionError:
    return AssertionError(f"{router.name}: reads a hidden query column ({exc}); {FEATURES_ONLY}")


def _check_features_only(router: Router, plain: np.ndarray, n_queries: int, seed: int, tag: str) -> None:
    """The visibility rule (:data:`FEATURES_ONLY`): refitted and rerouted with the hidden columns and the test
    outcomes permuted, ``router`` makes the ``plain`` choices again. Called once the unpermuted tables are gone, so
    a router that finds a table by walking the stack or the heap finds only the permuted one."""
    try:
        # the permuted test table stays referenced while the router runs: the one a stack or heap walk finds
        train, _test, ftrain, ftest = _demo_split(router, n_queries, seed, tag, shuffle=True)
        shuffled = _fresh(router).fit(train, ftrain).route(ftest).choice
    except HiddenColumnError as exc:
        raise _reads_hidden(router, exc) from None
    if not np.array_equal(plain, shuffled):
        changed = int((plain != shuffled).sum())
        raise AssertionError(f"{router.name}: its choices change on {changed} of {plain.shape[0]} test queries when "
                             f"only hidden query columns and test outcomes are permuted; {FEATURES_ONLY}")


def _fresh(router: Router) -> Router:
    return copy.deepcopy(router)


def _fit(router: Router, train: RoutingTable, test: RoutingTable, ftrain: Features) -> Router:
    router.fit(train, ftrain)
    return router.reveal(test) if router.uses_test_labels else router


def _check_routing(router: Router, r: Routing, n: int, m: int) -> None:
    name = router.name
    assert r.scores.shape == (n, m), f"{name}: scores have shape {r.scores.shape}, expected {(n, m)}"
    assert np.isfinite(r.scores).all(), f"{name}: non-finite scores"
    assert np.array_equal(r.choice, r.scores.argmax(axis=1)), f"{name}: the choice is not the argmax of the scores"
    p = r.distribution
    assert p.shape == (n, m) and (p >= -1e-12).all() and np.allclose(p.sum(axis=1), 1.0), (
        f"{name}: the selection distribution is not a probability distribution per query")
    own = type(router)._distribution is not Router._distribution
    if own:
        chosen = p[np.arange(n), r.choice]
        assert (chosen > 0).all(), (f"{name}: its distribution gives the actor it chooses probability 0 on "
                                    f"{int((chosen <= 0).sum())} of {n} queries")
    else:
        np.testing.assert_allclose(p, softmax(r.scores), rtol=0, atol=1e-12,
                                   err_msg=f"{name}: the distribution is not the softmax of the scores")


def check_router(router: Router, *, n_queries: int = 400, seed: int = 0) -> None:
    """Raise ``AssertionError`` (naming the rule) unless ``router`` honours the contract; ``router`` itself is
    left unfitted (copies are checked). Runs on routerlab's synthetic demo, in about a second."""
    tag = f"check-{secrets.token_hex(6)}-"
    try:
        plain = _check_contract(router, *_demo_split(router, n_queries, seed, tag), seed=seed)
    except HiddenColumnError as exc:
        raise _reads_hidden(router, exc) from None
    if not router.uses_test_labels:  # bounds read test outcomes by design
        _check_features_only(router, plain, n_queries, seed, tag)


def _check_contract(router: Router, train: RoutingTable, test: RoutingTable, ftrain: Features, ftest: Features, *,
                    seed: int) -> np.ndarray:
    """Every rule but the visibility one, on the demo's ``train``/``test``; the choices of the first fit."""
    two_model = bool(getattr(router, "two_model", False))
    n, m = test.n_queries, test.n_actors

    first = _fit(_fresh(router), train, test, ftrain)
    r1 = first.route(ftest)
    _check_routing(first, r1, n, m)
    assert np.array_equal(first.choose(ftest), r1.choice), f"{router.name}: choose() disagrees with route()"
    assert np.array_equal(first.distribution(ftest), r1.distribution), (
        f"{router.name}: distribution() disagrees with route()")

    r2 = _fit(_fresh(router), train, test, ftrain).route(ftest)
    assert np.array_equal(r1.scores, r2.scores) and np.array_equal(r1.distribution, r2.distribution), (
        f"{router.name}: two fits with the same seed give different numbers")

    for attr in ("table", "score", "latency_s", "cost_usd"):
        assert not hasattr(ftest, attr), f"query features expose {attr!r}"
    if not router.uses_test_labels:
        try:
            _fresh(router).reveal(test)
        except UsageError:
            pass
        else:
            raise AssertionError(f"{router.name}: accepts test outcomes but is not marked uses_test_labels")

    if two_model:
        return r1.choice
    score = train.score.copy()
    rng = np.random.default_rng(seed)
    score[rng.random(score.shape) < 0.3] = np.nan
    masked = replace(train, score=score)
    try:
        r3 = _fit(_fresh(router), masked, test, Features(ftrain.X, masked, ftrain.encoder)).route(ftest)
    except UsageError as exc:
        raise AssertionError(f"{router.name}: cannot fit with 30% unobserved training cells: {exc}") from None
    _check_routing(router, r3, n, m)
    return r1.choice
