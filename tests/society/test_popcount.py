"""The popcount route for 0/1 HSE (SPEC 2): exact Gram counts, the compiled Prim's tree equal to the
NumPy Prim's bit for bit, the same HSE as the BLAS route and the scipy reference, and the fallback
when numba is missing. numba is a core dependency: the kernel tests run (and fail) without it."""

from __future__ import annotations

import logging
import sys

import numpy as np
import pytest

import routerlab.society
from routerlab.errors import UsageError
from routerlab.society import _fast, hse, pairwise_distances
from routerlab.society import behaviour as bh
from routerlab.society import distances as dd
from routerlab.society.entropy import minimum_spanning_tree, single_linkage
from routerlab.society.synthetic import orthogonal_society

from .reference import naive_hse

METRICS = ["cosine", "correlation", "euclidean", "manhattan"]


def popcount_gram(B: np.ndarray) -> np.ndarray:
    kernels = _fast.kernels()
    assert kernels is not None
    return np.asarray(kernels.popcount_gram(B))


def odd_matrix(n: int, L: int, seed: int) -> np.ndarray:
    """Random 0/1 rows with an all-zero row, an all-one row and a duplicate where n allows."""
    rng = np.random.default_rng(seed)
    B = (rng.random((n, L)) < 0.45).astype(np.float32)
    if n >= 3:
        B[1] = 0.0
        B[2] = 1.0
    if n >= 5:
        B[4] = B[0]
    return B


@pytest.mark.parametrize(("n", "L"), [(1, 1), (2, 1), (1, 70), (2, 63), (3, 64), (5, 65), (7, 511),
                                      (9, 512), (13, 513), (66, 1000), (130, 36_000), (1030, 67)])
def test_popcount_gram_equals_float64_reference(n: int, L: int) -> None:
    # L around the 64-bit word and 512-bit vector; n around the 4 x 4 block and the 1024 x 64 tiles
    B = odd_matrix(n, L, n * 1000 + L)
    G = popcount_gram(B)
    ref = B.astype(np.float64) @ B.T.astype(np.float64)
    assert G.dtype == np.int32 and G.shape == (n, n)
    assert np.array_equal(G, ref)


def test_popcount_gram_hand_counted() -> None:
    B = np.array([[1, 1, 0, 1], [0, 1, 1, 1], [0, 0, 0, 0]], dtype=np.uint8)
    assert popcount_gram(B).tolist() == [[3, 2, 0], [2, 3, 0], [0, 0, 0]]


def test_popcount_gram_input_layouts_and_dtypes() -> None:
    B = odd_matrix(40, 300, 3)
    ref = B.astype(np.float64) @ B.T.astype(np.float64)
    wide = np.zeros((40, 600), dtype=np.float32)
    wide[:, ::2] = B
    for arr in (B, B.astype(bool), B.astype(np.uint8), B.astype(np.int64), B.astype(np.float64),
                np.asfortranarray(B), wide[:, ::2], B.T.copy().T):
        assert np.array_equal(popcount_gram(arr), ref), (arr.dtype, arr.flags.c_contiguous)


@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize(("n", "L"), [(2, 3), (3, 1), (12, 40), (150, 70), (200, 36_000)])
def test_compiled_prim_gives_the_numpy_tree(metric: str, n: int, L: int) -> None:
    # few items give many tied distances: the tie order must be the NumPy Prim's as well
    B = odd_matrix(n, L, n + L)
    dist = pairwise_distances(B, metric, gram="popcount")
    assert dist.lazy
    fast = minimum_spanning_tree(dist, kernel="numba")
    slow = minimum_spanning_tree(dist, kernel="numpy")
    for a, b in zip(fast, slow, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert np.array_equal(single_linkage(dist, kernel="numba"), single_linkage(dist, kernel="numpy"))


@pytest.mark.parametrize("metric", METRICS)
def test_compiled_prim_on_dense_graded_distances(metric: str) -> None:
    rng = np.random.default_rng(7)
    B = np.round(rng.random((60, 9)) * 2) / 2  # coarse grades: ties
    B[5] = B[9]
    dist = pairwise_distances(B, metric)
    assert not dist.lazy
    for a, b in zip(minimum_spanning_tree(dist, kernel="numba"), minimum_spanning_tree(dist, kernel="numpy"),
                    strict=True):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("metric", METRICS)
def test_popcount_and_blas_routes_give_the_same_hse_bit_for_bit(metric: str) -> None:
    B = odd_matrix(300, 2000, 11)  # N >= 128: "auto" takes the compiled Prim
    B[10:20] = B[20:30]  # more duplicates: zero-weight edges
    pc = routerlab.society.diversity(B, metric, gram="popcount")
    with _fast.disabled():
        blas = routerlab.society.diversity(B, metric, gram="blas")
    assert pc.distances.gram is not None and pc.distances.gram.dtype == np.int32
    assert blas.distances.gram is not None and blas.distances.gram.dtype == np.float32
    assert pc.hse == blas.hse
    assert np.array_equal(pc.linkage_matrix, blas.linkage_matrix)
    assert np.array_equal(pc.distances.matrix, blas.distances.matrix)
    assert pc.hse == pytest.approx(naive_hse(B, metric), rel=1e-12, abs=1e-12)


def test_popcount_route_keeps_the_paper_anchors() -> None:
    for k in (5, 15, 200):  # orthogonal experts: log2 N exactly
        assert hse(orthogonal_society(k, 3), gram="popcount") == np.log2(k)
    B = np.zeros((130, 130))
    np.fill_diagonal(B, 1.0)
    B[129] = B[0]  # a copy lowers HSE below log2(130)
    assert hse(B, gram="popcount") == hse(B, gram="blas") < np.log2(130)


def test_auto_takes_popcount_for_large_binary_and_float64_for_graded() -> None:
    B = odd_matrix(130, 100, 5)
    assert pairwise_distances(B).gram.dtype == np.int32  # type: ignore[union-attr]
    assert pairwise_distances(B[:20]).gram.dtype == np.float32  # type: ignore[union-attr]  # small N: BLAS
    assert not pairwise_distances(B * 0.5).lazy


def test_fast_input_scan_agrees_with_numpy() -> None:
    rng = np.random.default_rng(1)
    B = (rng.random((128, 1 << 15)) < 0.5).astype(np.float32)  # 2^22 cells: the numba scan runs
    assert bh._scan(B)[1:] == (0.0, 1.0, True)
    assert bh._scan(np.ones_like(B))[1:] == (1.0, 1.0, True)
    B[100, 77] = 0.5
    with _fast.disabled():
        graded = bh._scan(B)
    assert bh._scan(B)[1:] == graded[1:] == (0.0, 1.0, False)
    B[3, 9] = np.nan
    bad, *_ = bh._scan(B)
    assert bad is not None and np.flatnonzero(bad).tolist() == [9]


def test_gram_route_errors() -> None:
    B = odd_matrix(6, 10, 0)
    with pytest.raises(UsageError, match="unknown Gram route"):
        pairwise_distances(B, gram="gpu")
    with pytest.raises(UsageError, match="unknown Gram route"):
        hse(B, gram="fast")
    with pytest.raises(UsageError, match="unknown MST kernel"):
        minimum_spanning_tree(np.zeros((3, 3)), kernel="c")
    if _fast.available():
        with pytest.raises(UsageError, match="needs 0/1 scores"):
            pairwise_distances(B * 0.5, gram="popcount")


def test_without_numba_the_blas_route_is_used(monkeypatch: pytest.MonkeyPatch,
                                              caplog: pytest.LogCaptureFixture) -> None:
    # numba made unimportable: the kernel module fails to import, said once at debug level, and the
    # BLAS Gram + NumPy Prim give the numba route's HSE bit for bit
    B = odd_matrix(200, 300, 2)
    fast_value = hse(B)  # numba's popcount route, before numba is made unimportable
    assert fast_value == hse(B, gram="popcount")
    monkeypatch.setitem(sys.modules, "numba", None)
    monkeypatch.delitem(sys.modules, "routerlab.society._popcount", raising=False)
    monkeypatch.delattr(routerlab.society, "_popcount", raising=False)
    monkeypatch.setattr(_fast, "_state", {})
    with caplog.at_level(logging.DEBUG, logger="routerlab.society"):
        dist = pairwise_distances(B)
        value = hse(B)
    assert not _fast.available()
    assert [r.levelno for r in caplog.records if "numba is not available" in r.message] == [logging.DEBUG]
    assert dist.gram is not None and dist.gram.dtype == np.float32
    assert value == hse(B, gram="blas") == fast_value == pytest.approx(naive_hse(B), rel=1e-12)
    with pytest.raises(UsageError, match="needs numba"):
        pairwise_distances(B, gram="popcount")
    with pytest.raises(UsageError, match="needs numba"):
        minimum_spanning_tree(dist, kernel="numba")
    assert np.array_equal(dd.exact_gram(B), dd.binary_gram(B))


def test_kernels_compile_in_memory_where_no_cache_is_writable() -> None:
    from routerlab.society import _popcount

    namespace: dict[str, object] = {}
    exec("def twice(x):\n    return 2 * x\n", namespace)  # no source file: numba has no cache locator
    fn = _popcount._jit()(namespace["twice"])
    assert fn(21) == 42


def test_few_actors_never_load_numba(monkeypatch: pytest.MonkeyPatch) -> None:
    # the popcount route starts at SMALL_N actors, so below it the input scan stays in NumPy too: numba's
    # start-up (~0.45 CPU-s) would cost more than the scan saves
    from routerlab.data.table import RoutingTable

    def no_numba() -> None:
        raise AssertionError("numba was loaded for a society of fewer than SMALL_N actors")

    monkeypatch.setattr(_fast, "kernels", no_numba)
    rng = np.random.default_rng(3)
    few = (rng.random((100, 1 << 16)) < 0.5).astype(np.float32)  # 6.5M cells (the numba scan's size), 100 actors
    assert bh._scan(few)[1:] == (0.0, 1.0, True)
    table = RoutingTable.from_arrays(few.T, actors=[f"a{i}" for i in range(100)])
    with _fast.disabled():
        expected = hse(few, gram="blas")
    assert hse(table, split=None) == expected
