"""Distances (SPEC 2): agreement with scipy, exactness of the packed 0/1 Gram, degenerate rules."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import squareform

from routerlab.errors import UsageError
from routerlab.society import d_max, pairwise_distances
from routerlab.society import distances as dd

from .reference import naive_distances

METRICS = ["cosine", "correlation", "euclidean", "manhattan"]


@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("kind", ["binary", "graded", "coarse"])
def test_distances_match_scipy(metric: str, kind: str) -> None:
    rng = np.random.default_rng(11)
    B = rng.random((30, 200))
    if kind == "binary":
        B = (B < 0.4).astype(float)
    elif kind == "coarse":
        B = np.round(B * 4) / 4
    B[3] = 0.0  # a zero-norm actor
    B[4] = B[7]  # identical actors
    B[5] = 1.0  # a constant actor
    d = pairwise_distances(B, metric)
    ref = squareform(naive_distances(B, metric))
    assert d.binary == (kind == "binary")
    assert np.array_equal(d.matrix, d.matrix.T)
    assert np.all(np.diag(d.matrix) == 0)
    np.testing.assert_allclose(d.matrix, ref, rtol=1e-12, atol=1e-12)
    if metric not in ("cosine", "correlation"):
        assert d.matrix[4, 7] == 0.0
    elif metric == "cosine":
        assert d.matrix[4, 7] == 0.0 and d.matrix[3, 5] == 1.0


def test_identical_graded_actors_are_exactly_zero() -> None:
    rng = np.random.default_rng(2)
    B = rng.random((6, 1000))
    B[2] = B[0]
    B[5] = B[0]
    for metric in METRICS:
        D = pairwise_distances(B, metric).matrix
        assert D[0, 2] == D[0, 5] == D[2, 5] == 0.0
        assert np.all(D[np.triu_indices(6, 1)][[0, 1, 2, 3]] >= 0)


def test_identical_binary_actors_are_exactly_zero_at_large_L() -> None:
    # L (n_j (L - n_j))^2 exceeds 2^53 here, so the correlation denominator is rounded: equality
    # must still give exactly 0
    rng = np.random.default_rng(8)
    B = rng.random((4, 36_000)) < 0.5
    B[3] = B[1]
    for metric in METRICS:
        assert pairwise_distances(B, metric).matrix[1, 3] == 0.0


def test_near_identical_graded_euclidean_is_recomputed_directly() -> None:
    rng = np.random.default_rng(4)
    x = rng.random(5000)
    y = x.copy()
    y[17] += 1e-7
    D = pairwise_distances(np.vstack([x, y]), "euclidean").matrix
    assert D[0, 1] == pytest.approx(1e-7, rel=1e-6)


@pytest.mark.parametrize(("n", "L"), [(5, 7), (400, 9000), (777, 4096)])
def test_packed_binary_gram_is_exact(n: int, L: int) -> None:
    # n >= 384 takes the packed path (two actors per float32, item chunks of 4095)
    rng = np.random.default_rng(n)
    B = (rng.random((n, L)) < 0.6).astype(np.float32)
    B[n - 1] = 1.0  # counts at the chunk maximum
    G = dd.binary_gram(B)
    ref = B.astype(np.float64) @ B.T.astype(np.float64)
    assert np.array_equal(G.astype(np.float64), ref)


def test_binary_input_dtypes_agree() -> None:
    rng = np.random.default_rng(5)
    Bb = rng.random((20, 300)) < 0.5
    base = pairwise_distances(Bb.astype(float)).matrix
    for arr in (Bb, Bb.astype(np.uint8), Bb.astype(np.float32), Bb.astype(np.int64)):
        assert np.array_equal(pairwise_distances(arr).matrix, base)


def test_correlation_of_a_constant_actor_is_one() -> None:
    B = np.array([[1, 1, 1, 1], [1, 1, 1, 1], [1, 0, 1, 0], [0.5, 0.5, 0.5, 0.5]], dtype=float)
    D = pairwise_distances(B, "correlation").matrix
    assert D[0, 1] == 1.0 and D[0, 2] == 1.0 and D[3, 2] == 1.0


def test_is_binary() -> None:
    assert dd.is_binary(np.array([[0.0, 1.0]]))
    assert not dd.is_binary(np.array([[0.0, 0.5]]))
    assert not dd.is_binary(np.array([[1e-300, 1.0]]))
    assert not dd.is_binary(np.array([[np.nextafter(1.0, 0.0), 1.0]]))
    assert dd.is_binary(np.array([[True, False]]))


def test_d_max_and_bad_metric() -> None:
    assert d_max("cosine", 10) == 1.0 and d_max("correlation", 10) == 2.0
    assert d_max("euclidean", 16) == 4.0 and d_max("manhattan", 16) == 16.0
    with pytest.raises(UsageError, match="unknown distance metric"):
        pairwise_distances(np.eye(3), "jaccard")


@pytest.mark.parametrize("metric", METRICS)
def test_gram_and_dense_storage_agree_bit_for_bit(metric: str) -> None:
    """0/1 scores give GramDistances (formed on demand), graded ones DenseDistances; wrapping the
    Gram type's matrix densely changes no number of row, block, subset or farthest_pair."""
    rng = np.random.default_rng(5)
    B = (rng.random((40, 300)) < 0.3).astype(float)
    B[2] = 0.0  # degenerate for cosine and correlation
    B[6] = B[9]
    lazy = pairwise_distances(B, metric)
    assert isinstance(lazy, dd.GramDistances) and isinstance(lazy, dd.Distances) and lazy.lazy
    assert lazy.gram is not None
    dense = dd.DenseDistances(lazy.matrix, metric, lazy.n_items, lazy.binary)
    assert not dense.lazy and dense.gram is None and dense.n == lazy.n and dense.d_max == lazy.d_max
    cols = np.array([0, 1, 3, 17, 39], dtype=np.intp)
    assert np.array_equal(lazy.row(5, cols), dense.row(5, cols))
    rows, idx = [4, 9, 6, 0], [9, 6, 2, 30, 4]
    assert np.array_equal(lazy.block(rows, idx), dense.block(rows, idx))
    sub = lazy.subset(idx)
    assert isinstance(sub, dd.DenseDistances) and np.array_equal(sub.matrix, dense.subset(idx).matrix)
    assert lazy.farthest_pair() == dense.farthest_pair()
    graded = pairwise_distances(rng.random((6, 20)), metric)
    assert isinstance(graded, dd.DenseDistances) and not graded.lazy
