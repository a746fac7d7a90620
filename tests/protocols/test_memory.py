"""Memory at RouterEval scale (issue 20, part 8): the blocked computations give the numbers the one-pass ones
gave, bit for bit; a split's parts are shared while alive; evaluate lets the full table go before training.

The one-pass references below are the code the blocked versions replaced, kept here to pin them."""

from __future__ import annotations

import gc
import itertools
import weakref
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pytest
import scipy.sparse as sp

import routerlab.metrics._arrays as arrays
from routerlab.data.feedback import Feedback, draw_actions, draw_rows
from routerlab.data.splits import random_split
from routerlab.data.table import RoutingTable, column_means
from routerlab.features.base import Features
from routerlab.metrics._arrays import column_blocks, pick_best, row_blocks
from routerlab.metrics.bounds import actor_means
from routerlab.metrics.latency import oracle_best_of_n
from routerlab.metrics.registry import evaluate_choices
from routerlab.metrics.selection import entropy_bits, softmax
from routerlab.protocols.full import evaluate
from routerlab.routers._common import propagate
from routerlab.routers.base import Router


@pytest.fixture(scope="module")
def demo_table() -> RoutingTable:
    from routerlab.datasets import demo

    return demo()


@pytest.fixture
def tiny_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 40 cells: every matrix below is cut into many row or column blocks."""
    monkeypatch.setattr(arrays, "BLOCK_CELLS", 40)


def _scores(n: int, m: int, seed: int = 0, binary: bool = False) -> npt.NDArray[np.float32]:
    rng = np.random.default_rng(seed)
    s = (rng.random((n, m)) < 0.6) if binary else rng.random((n, m))
    out = s.astype(np.float32)
    out[rng.random((n, m)) < 0.1] = np.nan
    return out


@pytest.mark.parametrize(("n_rows", "n_cols", "cells"), [(10, 1, 4), (10, 3, 4), (7, 50, 20), (1, 9, 1),
                                                         (0, 5, 8), (100, 1000, 1 << 22), (5, 0, 8)])
def test_column_blocks_cover_every_column_at_least_two_wide(n_rows: int, n_cols: int, cells: int) -> None:
    blocks = column_blocks(n_rows, n_cols, cells)
    assert blocks[0].start == 0 and blocks[-1].stop == n_cols
    assert all(a.stop == b.start for a, b in itertools.pairwise(blocks))
    widths = [b.stop - b.start for b in blocks]
    assert all(w >= 2 for w in widths) or (len(blocks) == 1 and n_cols < 2)


def test_row_blocks_cover_every_row() -> None:
    assert row_blocks(10, 3, 7) == [slice(0, 2), slice(2, 4), slice(4, 6), slice(6, 8), slice(8, 10)]
    assert row_blocks(0, 3, 7) == [slice(0, 0)]
    assert row_blocks(3, 100, 7) == [slice(0, 1), slice(1, 2), slice(2, 3)]  # at least one row a block


@pytest.mark.usefixtures("tiny_blocks")
@pytest.mark.parametrize("binary", [False, True])
def test_blocked_column_means_are_the_one_pass_means(binary: bool) -> None:
    s = _scores(61, 23, binary=binary)
    assert len(column_blocks(*s.shape)) > 1
    v = s.astype(np.float64)
    obs = ~np.isnan(v)
    want = np.where(obs, v, 0.0).sum(axis=0) / obs.sum(axis=0)
    assert np.array_equal(column_means(s), want, equal_nan=True)
    sums32 = np.where(obs, s, 0.0).sum(axis=0, dtype=np.float64)
    assert np.array_equal(actor_means(s), sums32 / obs.sum(axis=0), equal_nan=True)
    s[:, 4] = np.nan  # an actor never observed: NaN
    assert np.isnan(column_means(s)[4]) and np.isnan(actor_means(s)[4])


@pytest.mark.usefixtures("tiny_blocks")
def test_blocked_propagation_is_the_one_pass_propagation() -> None:
    train = _scores(50, 17)
    rng = np.random.default_rng(1)
    idx = rng.integers(0, 50, (12, 3))
    W = sp.csr_matrix((rng.random(36), (np.repeat(np.arange(12), 3), idx.ravel())), shape=(12, 50))
    prior = rng.random(17)
    s = train.astype(np.float64)
    obs = ~np.isnan(s)
    num = np.asarray(W @ np.where(obs, s, 0.0)) + 0.5 * prior[None, :]
    den = np.asarray(W @ obs.astype(np.float64)) + 0.5
    want = np.broadcast_to(prior, num.shape).copy()
    np.divide(num, den, out=want, where=den > 1e-12)
    assert np.array_equal(propagate(W, train, prior, 0.5), want)


@pytest.mark.usefixtures("tiny_blocks")
def test_blocked_softmax_and_entropy_are_the_one_pass_ones() -> None:
    rng = np.random.default_rng(2)
    s = rng.normal(size=(31, 7)) * 5
    s[3, 2] = -np.inf
    z = np.where(np.isneginf(s), -np.inf, (s - s.max(axis=1, keepdims=True)) / 0.7)
    e = np.exp(z)
    p = e / e.sum(axis=1, keepdims=True)
    assert np.array_equal(softmax(s, 0.7), p)
    safe = np.where(p > 0, p, 1.0)
    assert np.array_equal(entropy_bits(p), -(p * np.log2(safe)).sum(axis=1))


@pytest.mark.usefixtures("tiny_blocks")
def test_blocked_best_of_n_is_the_one_pass_pick() -> None:
    score = _scores(40, 6, binary=True)
    rng = np.random.default_rng(3)
    latency = rng.random((40, 6)).astype(np.float32)
    picks = rng.integers(0, 6, (3, 40))
    s = score.astype(np.float64)
    cand = np.zeros(s.shape, dtype=bool)
    cand[np.arange(40)[None, :], picks] = True
    cand &= ~np.isnan(s)
    keep = cand.any(axis=1)
    want = pick_best(cand[keep], s[keep], latency[keep].astype(np.float64), None)
    got = oracle_best_of_n(score[keep], latency[keep], picks[:, keep])
    assert np.array_equal(got, want)
    with pytest.raises(ValueError, match="no router picked an observed actor"):
        oracle_best_of_n(np.full((2, 3), np.nan, dtype=np.float32), None, np.zeros((1, 2), dtype=int))


@pytest.mark.usefixtures("tiny_blocks")
def test_blocked_draws_are_the_one_pass_draws() -> None:
    rng = np.random.default_rng(4)
    p = rng.random((25, 5))
    p[p < 0.3] = 0.0
    p[:, 0] += 1e-3
    p /= p.sum(axis=1, keepdims=True)
    cdf = np.cumsum(p, axis=1)
    u = np.random.default_rng(9).random(25) * cdf[:, -1]
    want = np.minimum((cdf <= u[:, None]).sum(axis=1), 4)
    actor, prop = draw_actions(p, np.random.default_rng(9))
    assert np.array_equal(actor, want) and np.array_equal(prop, p[np.arange(25), want])
    again = draw_rows(25, 5, lambda rows: p[rows], np.random.default_rng(9))
    assert np.array_equal(again[0], actor)
    with pytest.raises(Exception, match="rows summing to 1"):
        draw_actions(p * 2, np.random.default_rng(0))


def test_logged_feedback_keeps_exactly_the_logged_cells() -> None:
    score = _scores(9, 4)
    score[np.isnan(score)] = 0.5
    table = RoutingTable.from_arrays(score, actors=list("abcd"), latency_s=score * 2)
    actor = np.array([0, 1, 2, 3, 0, 1, 2, 3, 0])
    fb = Feedback.logged(table, actor, np.full(9, 0.25))
    keep = np.zeros((9, 4), dtype=bool)
    keep[np.arange(9), actor] = True
    for key in ("score", "latency_s"):
        got = getattr(fb.table, key)
        assert got.dtype == np.float32
        assert np.array_equal(got, np.where(keep, getattr(table, key), np.float32(np.nan)), equal_nan=True)


def test_metrics_read_a_float32_score_matrix_without_changing_a_number() -> None:
    score = _scores(80, 5, binary=True)
    score[np.isnan(score)] = 0.0
    choice = np.random.default_rng(5).integers(0, 5, 80)
    a = evaluate_choices(score, choice, best_single=2, n_boot=50)
    b = evaluate_choices(score.astype(np.float64), choice, best_single=2, n_boot=50)
    assert a == b
    with pytest.raises(ValueError, match="outside"):
        evaluate_choices(score, choice, best_single=7, n_boot=50)


def test_a_split_applied_twice_shares_its_live_parts(demo_table: RoutingTable) -> None:
    sp_ = random_split(demo_table, 0.25, seed=1)
    train, test = sp_.apply(demo_table)
    again = sp_.apply(demo_table)
    assert again[0] is train and again[1] is test
    other = random_split(demo_table, 0.25, seed=2).apply(demo_table)
    assert other[0] is not train and not np.array_equal(other[0].queries.ids, train.queries.ids)
    ref = weakref.ref(train)
    del train, again
    gc.collect()
    assert ref() is None  # the cache holds no part alive
    fresh, _ = sp_.apply(demo_table)
    assert np.array_equal(fresh.score, demo_table.score[sp_.train], equal_nan=True)


class _TableWatcher(Router):
    """Records, when it is trained, whether a weakly referenced table is still alive."""

    name = "table-watcher"
    summary = "test router"
    logged_recipe = "native"  # learns nothing from outcomes: any feedback will do
    defaults: ClassVar[dict[str, Any]] = {}
    watched: weakref.ref[RoutingTable] | None = None
    alive_at_fit: bool | None = None

    def _fit(self, train: RoutingTable, features: Features) -> None:
        gc.collect()
        type(self).alive_at_fit = self.watched is not None and self.watched() is not None

    def _scores(self, features: Features) -> npt.ArrayLike:
        return np.zeros((features.n, len(self.actor_names)))


def test_evaluate_lets_the_whole_table_go_before_any_router_trains(demo_table: RoutingTable) -> None:
    def fresh() -> RoutingTable:
        table = RoutingTable.from_arrays(demo_table.score.copy(), actors=demo_table.actors,
                                         query_ids=demo_table.queries.ids, text=demo_table.queries.text,
                                         dataset=demo_table.queries.dataset, split=demo_table.queries.split)
        _TableWatcher.watched = weakref.ref(table)
        return table

    ev = evaluate(fresh(), [_TableWatcher()], encoder="tfidf:dim=8", n_boot=40)
    assert _TableWatcher.alive_at_fit is False  # nobody but evaluate held it, and evaluate let it go
    assert ev.provenance.data["n_queries"] == demo_table.n_queries
    kept = fresh()
    evaluate(kept, [_TableWatcher()], encoder="tfidf:dim=8", n_boot=40)
    assert _TableWatcher.alive_at_fit is True  # the caller's table is the caller's: evaluate copies nothing back


@pytest.mark.parametrize("name", ["full", "cold-start", "voyager"])
def test_the_protocols_let_the_whole_table_go_as_evaluate_does(demo_table: RoutingTable, name: str) -> None:
    """The CLI hands the table straight to the protocol's run: run must not keep it alive while routers train."""
    from routerlab.protocols.base import get_protocol

    def fresh() -> RoutingTable:
        table = RoutingTable.from_arrays(demo_table.score.copy(), actors=demo_table.actors,
                                         query_ids=demo_table.queries.ids, text=demo_table.queries.text,
                                         dataset=demo_table.queries.dataset, split=demo_table.queries.split)
        _TableWatcher.watched = weakref.ref(table)
        return table

    proto = get_protocol(name)
    settings = proto.Settings.from_mapping({"encoder": "tfidf:dim=8", "n_boot": 40,
                                            **({"rounds": 2} if name == "voyager" else {})})
    _TableWatcher.alive_at_fit = None
    proto.run(fresh(), settings, 0, [_TableWatcher()])
    assert _TableWatcher.alive_at_fit is False


@pytest.mark.usefixtures("tiny_blocks")
def test_softmax_written_over_its_scores_is_the_softmax_beside_them() -> None:
    rng = np.random.default_rng(5)
    s = rng.normal(size=(23, 9)) * 3
    s[4, 1] = -np.inf
    expected = softmax(s, 0.5)
    out = s.copy()
    assert softmax(out, 0.5, out=out) is out
    assert np.array_equal(out, expected)
    with pytest.raises(ValueError, match="out must be"):
        softmax(s, out=np.empty((23, 8)))


@pytest.mark.parametrize("spec", ["knn", "knn:weighted=true", "prknn", "linear"])
def test_a_scoring_pass_without_scores_decides_as_route_does(demo_table: RoutingTable, spec: str) -> None:
    """Router.decisions writes the softmax over the router's own fresh scores: the same choice, distribution
    and policy as route, bit for bit, and the router still scores the same on a second pass."""
    from routerlab.protocols.full import featurize
    from routerlab.routers.base import get_router

    train, test = random_split(demo_table, 0.2, seed=0).apply(demo_table)
    ftrain, ftest = featurize(train, test, "tfidf:dim=16")
    router = get_router(spec, seed=0).fit(train, ftrain)
    assert router.fresh_scores
    routed = router.route(ftest)
    choice, dist, policy = router.decisions(ftest)
    assert np.array_equal(choice, routed.choice)
    assert np.array_equal(dist, routed.distribution) and np.array_equal(policy, routed.policy)
    assert np.array_equal(router.scores(ftest), routed.scores)  # nothing of the router was overwritten


class _LogWatcher(Router):
    """Records whether the logged feedback it was fitted on is still alive when it scores."""

    name = "log-watcher"
    summary = "test router"
    logged_recipe = "native"  # the logged table reaches _fit as it is
    defaults: ClassVar[dict[str, Any]] = {}
    seen: ClassVar[list[weakref.ref[Any]]] = []
    alive_at_score: ClassVar[list[bool]] = []

    def _fit(self, train: RoutingTable, features: Features) -> None:
        type(self).seen.append(weakref.ref(train.score))

    def _scores(self, features: Features) -> npt.ArrayLike:
        gc.collect()
        type(self).alive_at_score.append(type(self).seen[-1]() is not None)
        return np.zeros((features.n, len(self.actor_names)))


def test_cold_start_does_not_hold_its_log_while_a_router_scores(demo_table: RoutingTable) -> None:
    """The cold-start log's (queries x actors) table is made for each router's fit and let go before it scores
    (a router that keeps its training table keeps it, of course: this one keeps only a weak reference)."""
    from routerlab.protocols.base import run_protocol

    _LogWatcher.seen.clear()
    _LogWatcher.alive_at_score.clear()
    run_protocol("cold-start", demo_table, {"encoder": "tfidf:dim=8", "n_boot": 40}, 0,
                 [_LogWatcher(), _LogWatcher()])
    assert _LogWatcher.alive_at_score == [False, False]


def test_a_subclass_overriding_scores_is_not_taken_at_its_parents_word(demo_table: RoutingTable) -> None:
    """A knn subclass whose _scores returns a matrix it keeps: decisions must not write over it."""
    from routerlab.protocols.full import featurize
    from routerlab.routers.neighbours import KNNRouter

    class Kept(KNNRouter):
        name = "knn-kept-scores"
        kept: npt.NDArray[np.float64]

        def _scores(self, features: Features) -> npt.ArrayLike:
            self.kept = np.asarray(super()._scores(features), dtype=np.float64)
            return self.kept

    train, test = random_split(demo_table, 0.2, seed=0).apply(demo_table)
    ftrain, ftest = featurize(train, test, "tfidf:dim=16")
    router = Kept(seed=0).fit(train, ftrain)
    _, dist, _ = router.decisions(ftest)
    assert dist is not router.kept and np.array_equal(dist, softmax(router.kept))
