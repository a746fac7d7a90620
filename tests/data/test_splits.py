"""Splits: given column, seeded random (stratified), out-of-domain."""

from __future__ import annotations

import numpy as np
import pytest

from routerlab.data.splits import make_split
from routerlab.datasets import demo
from routerlab.errors import UsageError


@pytest.fixture(scope="module")
def table():  # type: ignore[no-untyped-def]
    return demo(600, seed=3)


def test_given_split_matches_column(table) -> None:  # type: ignore[no-untyped-def]
    s = make_split(table, "given")
    assert set(table.queries.split[s.train]) == {"train"}
    assert set(table.queries.split[s.test]) == {"test"}
    assert s.train.size + s.test.size == table.n_queries


def test_random_split_is_seeded_stratified_and_disjoint(table) -> None:  # type: ignore[no-untyped-def]
    a, b, c = make_split(table, "random:0.25", 1), make_split(table, "random:0.25", 1), make_split(table, "random", 2)
    np.testing.assert_array_equal(a.test, b.test)
    assert not np.array_equal(a.test, c.test)
    assert np.intersect1d(a.train, a.test).size == 0
    assert a.train.size + a.test.size == table.n_queries
    ds = table.queries.dataset
    for d in np.unique(ds):  # every domain is on both sides, in proportion
        share = np.isin(a.test, np.flatnonzero(ds == d)).sum() / (ds == d).sum()
        assert share == pytest.approx(0.25, abs=0.02)


def test_ood_split_holds_out_whole_datasets(table) -> None:  # type: ignore[no-untyped-def]
    s = make_split(table, "ood:math,law")
    assert set(table.queries.dataset[s.test]) == {"math", "law"}
    assert not set(table.queries.dataset[s.train]) & {"math", "law"}
    assert s.describe()["test_datasets"] == ["law", "math"]


@pytest.mark.parametrize("spec,msg", [("random:x", "fraction"), ("random:1.5", r"\(0, 1\)"), ("ood:", "name the"),
                                      ("ood:nope", "unknown datasets"), ("weird", "unknown split"),
                                      ("given:val", "no 'val' split")])
def test_bad_split_specs(table, spec: str, msg: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UsageError, match=msg):
        make_split(table, spec)


@pytest.mark.parametrize("spec", ["random:0.25", "given", "given:test", "ood:math"])
def test_a_table_in_split_order_has_the_same_parts_as_views(table, spec: str) -> None:  # type: ignore[no-untyped-def]
    from routerlab.data.splits import in_split_order, split_spec

    if spec.startswith("ood"):
        spec = "ood:" + sorted(table.dataset_counts())[0]
    split = make_split(table, spec, 7)
    ordered, moved = in_split_order(table, split)
    assert ordered.content_hash == table.content_hash  # the same data, stored in another row order
    np.testing.assert_array_equal(moved.train, np.arange(split.train.size))
    np.testing.assert_array_equal(moved.test, np.arange(split.train.size, split.train.size + split.test.size))
    # the spec the split came from (and its seed) makes the moved split on the ordered table
    again = make_split(ordered, split_spec(split), 7)
    np.testing.assert_array_equal(again.train, moved.train)
    np.testing.assert_array_equal(again.test, moved.test)
    for part, new in zip(split.apply(table), moved.apply(ordered), strict=True):
        np.testing.assert_array_equal(part.queries.ids, new.queries.ids)  # same queries, same order
        np.testing.assert_array_equal(part.score, new.score)
        assert np.shares_memory(new.score, ordered.score)  # a view, not a copy
        assert not new.score.flags.writeable  # and one that cannot change the table
    assert sorted(ordered.queries.ids.tolist()) == sorted(table.queries.ids.tolist())  # no query lost
    # ordering it again changes nothing and copies nothing
    same, moved_again = in_split_order(ordered, moved)
    assert same is ordered
    np.testing.assert_array_equal(moved_again.test, moved.test)


def test_a_random_split_of_a_table_in_split_order_with_another_seed_is_drawn_as_usual(table) -> None:  # type: ignore[no-untyped-def]
    from routerlab.data.splits import in_split_order

    ordered, _ = in_split_order(table, make_split(table, "random:0.25", 7))
    other = make_split(ordered, "random:0.25", 8)  # not the one it was ordered for: a fresh draw on its rows
    assert not np.array_equal(other.test, np.arange(other.train.size, table.n_queries))
    assert other.train.size + other.test.size == table.n_queries
    # an ordinary selection of consecutive rows is still a copy
    assert not np.shares_memory(table.select_queries(np.arange(10)).score, table.score)
