"""Hierarchic Social Entropy of a society of actors, exactly (SPEC 2; paper sec. 4.3, app. 14).

At taxonomic level h the actors are clustered (single linkage: the connected components of the
graph with edges ``d <= h``; complete / average linkage: the dendrogram cut at h), ``H(h)`` is the
Shannon entropy in bits of the cluster-size proportions, and ``HSE = integral_0^inf H(h) dh``.
``H`` is a step function that changes only at merge heights, so with the heights sorted
``HSE = sum_i H(partition before merge i) * (h_i - h_{i-1})`` with ``h_0 = 0``: an exact sum.

Single linkage merges are the edges of a minimum spanning tree taken in increasing order, so it is
computed with a dense O(N^2) Prim's algorithm on the distance matrix (no generic clustering, and no
sparse-graph MST, which would drop the zero-weight edges that merge identical actors). Complete and
average linkage use scipy's O(N^2) nearest-neighbour-chain clustering; with tied distances their
dendrogram, and so their HSE, can depend on the order of the actors (scipy breaks ties by index),
which single linkage never does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import numpy as np
import numpy.typing as npt

from routerlab.errors import UsageError
from routerlab.society import _fast
from routerlab.society.behaviour import NanRule, Society, SocietyLike, as_society, clean
from routerlab.society.distances import Distances, as_distances, check_metric, pairwise_distances

Linkage = Literal["single", "complete", "average"]
LINKAGES: tuple[str, ...] = get_args(Linkage)

FloatArray = npt.NDArray[np.float64]


def check_linkage(linkage: str) -> str:
    if linkage not in LINKAGES:
        raise UsageError(f"unknown linkage {linkage!r}; use one of {', '.join(LINKAGES)}")
    return linkage


# --------------------------------------------------------------------------- spanning tree
def minimum_spanning_tree(
    D: np.ndarray | Distances, *, kernel: str = "auto",
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp], FloatArray]:
    """Edges ``(u, v, w)`` of a minimum spanning tree of the complete graph with weights ``D``.

    Dense Prim, O(N^2) time and O(N) extra memory; zero weights are ordinary edges. ``D`` may be
    a :class:`Distances` whose rows are formed on demand (0/1 scores), which never needs N x N floats.
    ``kernel``: ``"numba"`` (compiled), ``"numpy"``, or ``"auto"`` (numba when it
    imports and N >= 128). Both give the same edges in the same order, bit for bit (ties, weights).
    """
    if kernel not in ("auto", "numba", "numpy"):
        raise UsageError(f"unknown MST kernel {kernel!r}; use auto, numba or numpy")
    dist = as_distances(D)
    if kernel == "numba" and not _fast.available():
        raise UsageError("kernel='numba' needs numba, which does not import here: reinstall routerlab "
                         "(numba is a dependency) or use kernel='auto'")
    if kernel == "numba" or (kernel == "auto" and dist.n >= _fast.SMALL_N):
        kernels = _fast.kernels()
        if kernels is not None:
            u_, v_, w_ = kernels.prim(dist)
            return np.asarray(u_, dtype=np.intp), np.asarray(v_, dtype=np.intp), np.asarray(w_)
    n = dist.n
    u = np.empty(max(n - 1, 0), dtype=np.intp)
    v = np.empty(max(n - 1, 0), dtype=np.intp)
    w = np.empty(max(n - 1, 0), dtype=np.float64)
    if n < 2:
        return u, v, w
    rem = np.arange(1, n, dtype=np.intp)  # vertices not yet in the tree
    best = np.array(dist.row(0, rem), dtype=np.float64)  # their distance to the tree
    parent = np.zeros(n - 1, dtype=np.intp)
    size = n - 1
    for e in range(n - 1):
        j = int(np.argmin(best[:size]))
        x = int(rem[j])
        u[e], v[e], w[e] = parent[j], x, best[j]
        size -= 1
        rem[j], best[j], parent[j] = rem[size], best[size], parent[size]
        if size == 0:
            break
        row = dist.row(x, rem[:size])
        closer = row < best[:size]
        best[:size][closer] = row[closer]
        parent[:size][closer] = x
    return u, v, w


def single_linkage(D: np.ndarray | Distances, *, kernel: str = "auto") -> FloatArray:
    """The single-linkage dendrogram in scipy's linkage-matrix format, from the MST (O(N^2)).

    ``kernel`` is the Prim's (see :func:`minimum_spanning_tree`); every kernel gives the same matrix.
    """
    n = as_distances(D).n
    u, v, w = minimum_spanning_tree(D, kernel=kernel)
    order = np.argsort(w, kind="stable")
    Z = np.empty((max(n - 1, 0), 4), dtype=np.float64)
    parent = np.arange(n, dtype=np.intp)
    cluster_id = np.arange(n, dtype=np.intp)
    size = np.ones(n, dtype=np.intp)

    def find(a: int) -> int:
        root = a
        while parent[root] != root:
            root = int(parent[root])
        while parent[a] != root:
            parent[a], a = root, int(parent[a])
        return root

    for t, e in enumerate(order.tolist()):
        a, b = find(int(u[e])), find(int(v[e]))
        ia, ib = int(cluster_id[a]), int(cluster_id[b])
        if size[a] < size[b]:
            a, b = b, a
        parent[b] = a
        size[a] += size[b]
        cluster_id[a] = n + t
        Z[t] = (min(ia, ib), max(ia, ib), w[e], size[a])
    return Z


def linkage_matrix(dist: Distances, linkage: str = "single") -> FloatArray:
    """The dendrogram of ``dist`` under ``linkage``, as a scipy linkage matrix (heights ascending)."""
    check_linkage(linkage)
    n = dist.n
    if n < 2:
        return np.empty((0, 4), dtype=np.float64)
    if linkage == "single":
        return single_linkage(dist)
    from scipy.cluster.hierarchy import linkage as scipy_linkage
    from scipy.spatial.distance import squareform

    Z = scipy_linkage(squareform(dist.matrix, checks=False), method=linkage)
    return np.asarray(Z, dtype=np.float64)


# --------------------------------------------------------------------------- entropy
def _xlog2x(x: np.ndarray | float) -> Any:
    x = np.asarray(x, dtype=np.float64)
    return np.where(x > 0, x * np.log2(np.where(x > 0, x, 1.0)), 0.0)


def entropy_steps(Z: np.ndarray, n: int) -> FloatArray:
    """``H`` before merge 1, 2, ... and after the last one: ``H_0 = log2 n``, ..., ``H_{n-1} = 0``."""
    H = np.empty(max(n, 1), dtype=np.float64)
    if n <= 1:
        H[:] = 0.0
        return H
    log_n = float(np.log2(n))
    sizes = np.concatenate([np.ones(n), Z[:, 3]])
    a = sizes[Z[:, 0].astype(np.intp)]
    b = sizes[Z[:, 1].astype(np.intp)]
    # sum over clusters of n_c log2 n_c, updated merge by merge
    delta = _xlog2x(a + b) - _xlog2x(a) - _xlog2x(b)
    S = np.concatenate([[0.0], np.cumsum(delta)])
    H[:] = np.maximum(log_n - S / n, 0.0)
    H[0] = log_n
    H[-1] = 0.0
    return H


def hse_from_linkage(Z: np.ndarray, n: int) -> float:
    """``sum_i H_{i-1} (h_i - h_{i-1})``, h_0 = 0 (SPEC 2): the exact integral of H(h)."""
    if n <= 1:
        return 0.0
    heights = np.concatenate([[0.0], Z[:, 2]])
    H = entropy_steps(Z, n)
    return float(np.dot(H[:-1], np.diff(heights)))


@dataclass(frozen=True)
class TaxonomicCurve:
    """``H(h)`` as data: ``H(h) = entropy[i]`` for ``levels[i] <= h < levels[i+1]`` (0 beyond the last).

    ``levels[0] = 0`` and ``levels[i]`` is the height of merge i; ``n_clusters[i]`` counts the clusters
    on that step. HSE is ``sum(entropy[:-1] * diff(levels))``.
    """

    levels: FloatArray
    entropy: FloatArray
    n_clusters: npt.NDArray[np.intp]

    def at(self, h: float | npt.ArrayLike) -> Any:
        """H at taxonomic level(s) h (merges at height <= h are applied)."""
        idx = np.searchsorted(self.levels[1:], np.asarray(h, dtype=np.float64), side="right")
        return self.entropy[idx]

    def to_dict(self) -> dict[str, list[float] | list[int]]:
        return {"levels": self.levels.tolist(), "entropy": self.entropy.tolist(),
                "n_clusters": self.n_clusters.tolist()}


@dataclass(frozen=True, eq=False)
class Diversity:
    """Everything one HSE computation gives: the numbers, the dendrogram and the curve H(h)."""

    hse: float
    hse_normalized: float
    n_actors: int
    n_items: int
    metric: str
    linkage: str
    d_max: float
    names: list[str]
    linkage_matrix: FloatArray
    curve: TaxonomicCurve
    distances: Distances
    n_dropped_items: int = 0
    binary: bool = True
    notes: list[str] = field(default_factory=list)

    @property
    def max_hse(self) -> float:
        """The largest HSE N actors can have under this metric: log2(N) * d_max (SPEC 2)."""
        return float(np.log2(self.n_actors) * self.d_max) if self.n_actors > 1 else 0.0

    def to_dict(self, *, curve: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "hse": self.hse, "hse_normalized": self.hse_normalized, "n_actors": self.n_actors,
            "n_items": self.n_items, "n_dropped_items": self.n_dropped_items, "metric": self.metric,
            "linkage": self.linkage, "d_max": self.d_max, "max_hse": self.max_hse,
            "binary_scores": self.binary, "actors": self.names, "notes": self.notes,
        }
        if curve:
            out["taxonomic_curve"] = self.curve.to_dict()
        return out


def normalize(hse_value: float, n_actors: int, dmax: float) -> float:
    """HSE / (log2(N) d_max), 0 for N <= 1 (SPEC 2)."""
    if n_actors <= 1 or dmax <= 0:
        return 0.0
    return float(hse_value / (np.log2(n_actors) * dmax))


def diversity_from_distances(
    dist: Distances, linkage: str = "single", *, names: list[str] | None = None,
    n_dropped_items: int = 0, notes: list[str] | None = None,
) -> Diversity:
    """HSE and its curve from precomputed distances."""
    check_linkage(linkage)
    n = dist.n
    Z = linkage_matrix(dist, linkage)
    value = hse_from_linkage(Z, n)
    levels = np.concatenate([[0.0], Z[:, 2]])
    clusters = np.arange(max(n, 1), 0, -1, dtype=np.intp)  # n, n - 1, ..., 1 (one step for n <= 1)
    curve = TaxonomicCurve(levels, entropy_steps(Z, n), clusters)
    return Diversity(
        hse=value, hse_normalized=normalize(value, n, dist.d_max), n_actors=n, n_items=dist.n_items,
        metric=dist.metric, linkage=linkage, d_max=dist.d_max,
        names=list(names) if names is not None else [f"actor{i}" for i in range(n)],
        linkage_matrix=Z, curve=curve, distances=dist, n_dropped_items=n_dropped_items,
        binary=dist.binary, notes=list(notes or []),
    )


def prepare(
    society: SocietyLike, metric: str = "cosine", *, split: str | None = "train", nan: NanRule = "drop",
    gram: str = "auto",
) -> tuple[Society, Distances, int]:
    """Coerce, clean (NaN rule) and measure distances: the shared first step of every HSE function.

    ``gram`` picks the 0/1 Gram route (``"auto"``, ``"popcount"``, ``"blas"``; see
    :func:`routerlab.society.distances.pairwise_distances`); every route gives the same distances.
    """
    check_metric(metric)
    _fast.check_gram(gram)
    if isinstance(society, Distances):
        raise UsageError("these distances are already computed; use diversity_from_distances")
    soc, dropped, binary = clean(as_society(society, split=split), nan)
    dist = pairwise_distances(soc.matrix, metric, binary=binary, gram=gram)
    return soc, dist, dropped


def diversity(
    society: SocietyLike, metric: str = "cosine", linkage: str = "single", *,
    split: str | None = "train", nan: NanRule = "drop", gram: str = "auto",
) -> Diversity:
    """HSE, normalised HSE, dendrogram and taxonomic curve of a society (SPEC 2).

    ``society`` is a behaviour matrix (actors x items, values in [0, 1]), a :class:`Society`, a
    routing table (its ``split`` rows, transposed) or precomputed :class:`Distances`. ``nan`` is the
    rule for unobserved cells (see :mod:`routerlab.society.behaviour`); ``gram`` the 0/1 Gram route
    (``"auto"``, ``"popcount"`` or ``"blas"``: the same numbers, at different speeds).
    """
    check_linkage(linkage)
    if isinstance(society, Distances):  # precomputed: its own metric stands
        return diversity_from_distances(society, linkage)
    soc, dist, dropped = prepare(society, metric, split=split, nan=nan, gram=gram)
    return diversity_from_distances(dist, linkage, names=soc.names, n_dropped_items=dropped,
                                    notes=soc.notes)


def hse(
    society: SocietyLike, metric: str = "cosine", linkage: str = "single", *,
    split: str | None = "train", nan: NanRule = "drop", gram: str = "auto",
) -> float:
    """Hierarchic Social Entropy in bits x distance units, computed exactly (SPEC 2).

    ``hse(B)`` for a behaviour matrix B (actors x items); ``hse(table, split="train")`` for a
    routing table, with the actors' scores on that split as behaviour vectors. ``gram`` as in
    :func:`diversity`.
    """
    return diversity(society, metric, linkage, split=split, nan=nan, gram=gram).hse


def normalized_hse(
    society: SocietyLike, metric: str = "cosine", linkage: str = "single", *,
    split: str | None = "train", nan: NanRule = "drop", gram: str = "auto",
) -> float:
    """HSE / (log2(N) d_max): 1 for N mutually orthogonal actors under cosine, any N (SPEC 2)."""
    return diversity(society, metric, linkage, split=split, nan=nan, gram=gram).hse_normalized


def taxonomic_curve(
    society: SocietyLike, metric: str = "cosine", linkage: str = "single", *,
    split: str | None = "train", nan: NanRule = "drop", gram: str = "auto",
) -> TaxonomicCurve:
    """The step function H(h) whose integral is HSE (SPEC 2), as arrays."""
    return diversity(society, metric, linkage, split=split, nan=nan, gram=gram).curve


def subset_hse(dist: Distances, index: npt.ArrayLike, linkage: str = "single") -> float:
    """HSE of the actors at ``index`` from the whole society's distances."""
    idx = np.asarray(index, dtype=np.intp)
    if idx.size <= 1:
        return 0.0
    sub = dist.subset(idx)
    return hse_from_linkage(linkage_matrix(sub, linkage), sub.n)
