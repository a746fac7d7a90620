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
