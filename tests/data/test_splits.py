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


# ------------------------------------------------------------------------------------------- development part
@pytest.mark.parametrize("spec", ["given", "random:0.25", "ood:math"])
def test_a_dev_part_comes_out_of_the_training_side_stratified_and_seeded(table, spec: str) -> None:  # type: ignore[no-untyped-def]
    plain = make_split(table, spec, 5)
    split = make_split(table, spec, 5, dev=0.3)
    np.testing.assert_array_equal(split.test, plain.test)  # the test side is untouched
    assert np.intersect1d(split.dev, split.train).size == 0 and np.intersect1d(split.dev, split.test).size == 0
    np.testing.assert_array_equal(np.sort(np.concatenate([split.train, split.dev])), np.sort(plain.train))
    ds = table.queries.dataset.astype(str)
    for d in np.unique(ds[plain.train]):  # each training dataset gives round(0.3 * its size) queries
        assert (ds[split.dev] == d).sum() == round(0.3 * (ds[plain.train] == d).sum())
    rec = split.describe()
    assert (rec["dev_fraction"], rec["dev_seed"], rec["n_dev"]) == (0.3, 5, split.dev.size)
    assert rec["n_train"] == split.train.size
    np.testing.assert_array_equal(make_split(table, spec, 5, dev=0.3).dev, split.dev)  # same seed, same part
    assert not np.array_equal(make_split(table, spec, 6, dev=0.3).dev, split.dev)
    np.testing.assert_array_equal(split.without_dev().train, np.sort(plain.train))
    assert "n_dev" not in split.without_dev().describe()
    dev_table = split.apply_dev(table)
    np.testing.assert_array_equal(dev_table.queries.ids, table.queries.ids[split.dev])


def test_the_dev_draw_is_not_the_random_split_draw(table) -> None:  # type: ignore[no-untyped-def]
    # with the same seed, the development part is not simply the next slice of the split's own permutation
    split = make_split(table, "random:0.5", 3, dev=0.5)
    again = make_split(table, "random:0.5", 3)
    assert split.dev.size and np.intersect1d(split.dev, again.test).size == 0


@pytest.mark.parametrize("dev,msg", [(0.0, r"\(0, 1\)"), (1.0, r"\(0, 1\)"), (float("nan"), r"\(0, 1\)"),
                                     (-0.2, r"\(0, 1\)"), ("x", "a number"), (0.0001, "no development")])
def test_bad_dev_fractions(table, dev, msg: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UsageError, match=msg):
        make_split(table, "given", 0, dev=dev)


def test_a_split_without_dev_has_no_dev_table(table) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UsageError, match="--dev F"):
        make_split(table, "given").apply_dev(table)


def test_a_table_in_split_order_keeps_its_dev_part(table) -> None:  # type: ignore[no-untyped-def]
    from routerlab.data.splits import in_split_order, split_spec

    split = make_split(table, "random:0.25", 7, dev=0.2)
    ordered, moved = in_split_order(table, split)
    again = make_split(ordered, split_spec(split), 7, dev=0.2)
    np.testing.assert_array_equal(again.dev, moved.dev)
    np.testing.assert_array_equal(moved.apply_dev(ordered).queries.ids, split.apply_dev(table).queries.ids)
    np.testing.assert_array_equal(moved.apply(ordered)[0].queries.ids, split.apply(table)[0].queries.ids)
