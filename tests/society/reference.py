"""Straightforward references for the society tests: scipy's pdist + linkage + a plain merge walk,
and H(h) from connected components of the threshold graph (SPEC 2 read literally)."""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy.cluster.hierarchy import linkage
from scipy.sparse.csgraph import connected_components
from scipy.spatial.distance import pdist, squareform

SCIPY_METRIC = {"cosine": "cosine", "correlation": "correlation", "euclidean": "euclidean",
                "manhattan": "cityblock"}


def naive_distances(B: np.ndarray, metric: str = "cosine") -> np.ndarray:
    """Condensed distances by scipy; undefined cosine/correlation distances are 1 (paper's rule)."""
    X = np.asarray(B, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        d = pdist(X, SCIPY_METRIC[metric])
    if metric in ("cosine", "correlation"):
        bad = np.linalg.norm(X, axis=1) == 0 if metric == "cosine" else np.ptp(X, axis=1) == 0
        sq = squareform(d, checks=False)
        sq[bad, :] = 1.0
        sq[:, bad] = 1.0
        np.fill_diagonal(sq, 0.0)
        d = squareform(sq, checks=False)
    return np.asarray(np.nan_to_num(d, nan=1.0))


def entropy_bits(sizes: list[int] | np.ndarray) -> float:
    total = float(sum(sizes))
    return -sum((c / total) * math.log2(c / total) for c in sizes if c > 0)


def naive_hse(B: np.ndarray, metric: str = "cosine", method: str = "single") -> float:
    """HSE by scipy's linkage and a merge walk that recomputes the entropy from the cluster sizes."""
    n = np.asarray(B).shape[0]
    if n <= 1:
        return 0.0
    Z = linkage(naive_distances(B, metric), method)
    sizes = {i: 1 for i in range(n)}
    total, prev = 0.0, 0.0
    for t, (a, b, h, _) in enumerate(Z):
        total += entropy_bits(list(sizes.values())) * (h - prev)
        prev = h
        sizes[n + t] = sizes.pop(int(a)) + sizes.pop(int(b))
    return total


def threshold_graph_hse(D: np.ndarray) -> float:
    """Single-linkage HSE straight from SPEC 2: H(h) = entropy of the components of {d <= h},
    integrated exactly over the intervals between distinct distances."""
    n = D.shape[0]
    if n <= 1:
        return 0.0
    levels = np.unique(np.concatenate([[0.0], D[np.triu_indices(n, 1)]]))
    total = 0.0
    for lo, hi in itertools.pairwise(levels):
        _, lab = connected_components(np.asarray(lo >= D, dtype=np.int8), directed=False)
        total += entropy_bits(np.bincount(lab)) * (hi - lo)
    return total
