"""Inputs: the NaN rule, value checks and routing tables (SPEC 2; NaN rule is routerlab's)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from routerlab.data.table import RoutingTable
from routerlab.errors import DataError, UsageError
from routerlab.society import Society, diversity, hse


def test_nan_items_are_dropped_with_a_warning() -> None:
    B = np.array([[1, 0, np.nan, 1], [0, 1, 1, np.nan], [1, 1, 0, 0]], dtype=float)
    with pytest.warns(RuntimeWarning, match="2 of 4 items"):
        d = diversity(B)
    assert d.n_items == 2 and d.n_dropped_items == 2
    assert d.hse == hse(B[:, :2])
    assert "NaN rule 'drop'" in d.notes[0]


def test_nan_zero_and_raise() -> None:
    B = np.array([[1, 0, np.nan], [0, 1, 1]], dtype=float)
    with pytest.warns(RuntimeWarning, match="count as 0"):
        assert hse(B, nan="zero") == hse(np.nan_to_num(B))
    with pytest.raises(DataError, match="unobserved"):
        hse(B, nan="raise")
    with pytest.raises(UsageError, match="NaN rule"):
        hse(B, nan="mean")  # type: ignore[arg-type]


def test_no_shared_item_is_an_error() -> None:
    B = np.array([[1, np.nan], [np.nan, 1]], dtype=float)
    with pytest.raises(DataError, match="share no evaluation set"):
        hse(B)


def test_values_must_be_scores() -> None:
    with pytest.raises(DataError, match=r"\[0, 1\]"):
        hse(np.array([[0.0, 2.0], [1.0, 0.0]]))
    with pytest.raises(DataError, match="infinite"):
        hse(np.array([[0.0, np.inf], [1.0, 0.0]]))
    with pytest.raises(UsageError, match="2-D"):
        hse(np.zeros(3))
    with pytest.raises(DataError, match="no items"):
        hse(np.zeros((3, 0)))
    with pytest.raises(UsageError, match="linkage"):
        hse(np.eye(3), linkage="ward")


def test_table_without_split_labels_uses_every_query() -> None:
    t = RoutingTable.from_arrays(np.eye(4, 3), actors=["a", "b", "c"])
    with pytest.warns(RuntimeWarning, match="no split labels"):
        assert hse(t) == hse(np.eye(4, 3).T)
    t2 = RoutingTable.from_arrays(np.eye(4, 3), actors=["a", "b", "c"], split=["test"] * 4)
    with pytest.raises(UsageError, match="no query has split 'train'"):
        hse(t2)
    assert hse(t2, split="test") == hse(np.eye(4, 3).T)


def test_society_keeps_names() -> None:
    soc = Society(np.eye(3), ["x", "y", "z"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        d = diversity(soc)
    assert d.names == ["x", "y", "z"]
    assert d.to_dict()["actors"] == ["x", "y", "z"]


def test_precomputed_distances_are_accepted() -> None:
    from routerlab.society import pairwise_distances

    B = np.array([[1, 0, 1], [0, 1, 1], [1, 1, 0]], dtype=float)
    dist = pairwise_distances(B, "euclidean")
    assert hse(dist) == hse(B, "euclidean")
