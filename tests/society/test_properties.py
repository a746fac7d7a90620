"""Property-based checks of HSE (SPEC 2): invariances and agreement with a scipy reference."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from routerlab.society import candidate_hse_single, hse, pairwise_distances, subset_hse

from .reference import naive_hse, threshold_graph_hse

binary_matrices = st.integers(2, 10).flatmap(
    lambda n: st.integers(1, 8).flatmap(lambda L: arrays(np.float64, (n, L), elements=st.sampled_from([0.0, 1.0])))
)
graded_matrices = st.integers(2, 10).flatmap(
    lambda n: st.integers(1, 8).flatmap(
        lambda L: arrays(np.float64, (n, L), elements=st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0])))
)
METRICS = st.sampled_from(["cosine", "correlation", "euclidean", "manhattan"])
FAST = settings(max_examples=40, deadline=None)


@FAST
@given(B=st.one_of(binary_matrices, graded_matrices), metric=METRICS, seed=st.integers(0, 2**31))
def test_single_linkage_is_permutation_invariant(B: np.ndarray, metric: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows, cols = rng.permutation(B.shape[0]), rng.permutation(B.shape[1])
    base = hse(B, metric)
    assert abs(hse(B[rows], metric) - base) <= 1e-12 * max(1.0, base)
    assert abs(hse(B[:, cols], metric) - base) <= 1e-9 * max(1.0, base)


@FAST
@given(B=st.one_of(binary_matrices, graded_matrices), seed=st.integers(0, 2**31))
def test_cosine_hse_is_scale_invariant(B: np.ndarray, seed: int) -> None:
    # scaling each actor's vector by its own factor in (0, 1] keeps values in [0, 1] and angles fixed
    scale = np.random.default_rng(seed).uniform(0.05, 1.0, size=(B.shape[0], 1))
    assert abs(hse(B * scale) - hse(B)) <= 1e-9


@FAST
@given(B=st.one_of(binary_matrices, graded_matrices), metric=METRICS)
def test_single_linkage_agrees_with_scipy_reference(B: np.ndarray, metric: str) -> None:
    got = hse(B, metric)
    assert abs(got - naive_hse(B, metric)) <= 1e-9 * max(1.0, got)
    D = pairwise_distances(B, metric).matrix
    assert abs(got - threshold_graph_hse(D)) <= 1e-9 * max(1.0, got)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 14), L=st.integers(2, 30), metric=METRICS, method=st.sampled_from(["complete", "average"]),
       seed=st.integers(0, 2**31))
def test_complete_and_average_agree_with_scipy_reference(n: int, L: int, metric: str, method: str, seed: int) -> None:
    # continuous scores: no tied distances, so the dendrogram is unique
    B = np.random.default_rng(seed).random((n, L))
    got = hse(B, metric, method)
    assert abs(got - naive_hse(B, metric, method)) <= 1e-9 * max(1.0, got)


@FAST
@given(B=st.one_of(binary_matrices, graded_matrices), metric=METRICS, seed=st.integers(0, 2**31))
def test_vectorised_candidate_scores_equal_recomputed_hse(B: np.ndarray, metric: str, seed: int) -> None:
    dist = pairwise_distances(B, metric)
    n = B.shape[0]
    rng = np.random.default_rng(seed)
    S = rng.permutation(n)[: rng.integers(1, n)]
    C = np.setdiff1d(np.arange(n), S)
    got = candidate_hse_single(dist.matrix, S, C)
    ref = np.array([subset_hse(dist, [*S.tolist(), c]) for c in C.tolist()])
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12)


@FAST
@given(B=binary_matrices)
def test_hse_is_bounded_by_its_maximum(B: np.ndarray) -> None:
    from routerlab.society import diversity

    d = diversity(B)
    assert 0.0 <= d.hse <= d.max_hse + 1e-12
    assert 0.0 <= d.hse_normalized <= 1.0 + 1e-12
